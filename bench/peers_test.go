package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	bwsnowflake "github.com/bwmarrin/snowflake"
	"github.com/google/uuid"
	oklog "github.com/oklog/ulid/v2"
	rsxid "github.com/rs/xid"
	segksuid "github.com/segmentio/ksuid"
	"github.com/sony/sonyflake"

	"github.com/idmint/idmint/flake128"
	"github.com/idmint/idmint/ksuid"
	"github.com/idmint/idmint/objectid"
	"github.com/idmint/idmint/snowflake"
	"github.com/idmint/idmint/testkit/idtest"
	"github.com/idmint/idmint/ulid"
	iduuid "github.com/idmint/idmint/uuid"
	"github.com/idmint/idmint/xid"
)

// source is one generator of the comparisons, issuing IDs as text that
// sorts as the IDs do.
type source struct {
	name string
	next func() (string, error)
	// ordered: the generator promises strictly increasing IDs to each
	// caller (time-ordered with a monotonic sequence or counter).
	ordered bool
	// perG is how many IDs each goroutine takes; a generator limited by
	// its clock (Sonyflake: 256 IDs per 10 ms) gets fewer.
	perG int
}

// sources lists idmint's generators and their peers with their ordering
// promises. Every one of them must issue no duplicate in one process.
func sources(t *testing.T) []source {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	snow := func(layout string, node map[string]int64) func() (string, error) {
		l, ok := snowflake.Lookup(layout)
		if !ok {
			t.Fatalf("no built-in layout %q", layout)
		}
		g, err := snowflake.New(l, snowflake.Settings{Node: node})
		must(err)
		t.Cleanup(func() { g.Close() })
		return func() (string, error) { id, err := g.Next(ctx); return fmt.Sprintf("%019d", id), err }
	}
	v4, err := iduuid.NewV4(iduuid.Settings{})
	must(err)
	v7, err := iduuid.NewV7(iduuid.Settings{})
	must(err)
	ul, err := ulid.New(ulid.Settings{})
	must(err)
	ks, err := ksuid.New(ksuid.Settings{})
	must(err)
	xg, err := xid.New(xid.Settings{})
	must(err)
	og, err := objectid.New(objectid.Settings{})
	must(err)
	fg, err := flake128.New(1, flake128.Settings{})
	must(err)
	bw, err := bwsnowflake.NewNode(1) // default widths: Leaf's 10-bit node, 12-bit step
	must(err)
	sf, err := sonyflake.New(sonyflake.Settings{MachineID: func() (uint16, error) { return 1, nil }})
	must(err)
	text := func(s fmt.Stringer, err error) (string, error) { return s.String(), err }
	return []source{
		{"idmint-snowflake-leaf", snow("leaf", map[string]int64{"worker": 1}), true, 20000},
		{"idmint-snowflake-sonyflake", snow("sonyflake", map[string]int64{"machine": 1}), true, 500},
		{"bwmarrin-snowflake", func() (string, error) { return fmt.Sprintf("%019d", bw.Generate().Int64()), nil }, true, 20000},
		{"sonyflake-v1", func() (string, error) { id, err := sf.NextID(); return fmt.Sprintf("%020d", id), err }, true, 500},
		{"idmint-uuid-v4", func() (string, error) { return text(v4.Next(ctx)) }, false, 20000},
		{"google-uuid-v4", func() (string, error) { return text(uuid.NewRandom()) }, false, 20000},
		{"idmint-uuid-v7", func() (string, error) { return text(v7.Next(ctx)) }, true, 20000},
		{"google-uuid-v7", func() (string, error) { return text(uuid.NewV7()) }, true, 20000},
		{"idmint-ulid", func() (string, error) { return text(ul.Next(ctx)) }, true, 20000},
		// oklog's Make reads the time before taking its entropy lock: a
		// caller that read millisecond t after another caller's t+1 gets
		// fresh entropy, so one goroutine's ULIDs can step back within a
		// millisecond (seen here in about 1 run of 2). Unique, not ordered.
		{"oklog-ulid-make", func() (string, error) { return oklog.Make().String(), nil }, false, 20000},
		{"idmint-ksuid", func() (string, error) { return text(ks.Next(ctx)) }, false, 20000},
		{"segmentio-ksuid", func() (string, error) { return text(segksuid.NewRandom()) }, false, 20000},
		{"idmint-xid", func() (string, error) { return text(xg.Next(ctx)) }, false, 20000},
		{"rs-xid", func() (string, error) { return rsxid.New().String(), nil }, false, 20000},
		{"idmint-objectid", func() (string, error) { return text(og.Next(ctx)) }, false, 20000},
		{"idmint-flake128", func() (string, error) { id, err := fg.Next(ctx); return id.Hex(), err }, true, 20000},
	}
}

// TestPeersUnique takes IDs from every generator of the comparisons, ours
// and the peers', on 4 goroutines at once: no ID may repeat, and a
// generator that promises order must give each goroutine strictly
// increasing IDs. The benchmarks measure these same generators; this is
// what makes their figures comparable (none of them buys speed with
// duplicates).
func TestPeersUnique(t *testing.T) {
	for _, s := range sources(t) {
		t.Run(s.name, func(t *testing.T) {
			perG := s.perG
			if testing.Short() {
				perG = min(perG, 2000)
			}
			var cmp func(a, b string) int
			if s.ordered {
				cmp = strings.Compare
			}
			idtest.Unique(t, 4, perG, func(int, int) (string, error) { return s.next() }, cmp)
		})
	}
}

// TestPeersAgreeOnFormats checks both ways that idmint's IDs and the
// peers' are the same format: each side's IDs parse with the other's
// parser into the same bytes, version and time.
func TestPeersAgreeOnFormats(t *testing.T) {
	ctx := context.Background()
	near := func(t *testing.T, what string, got time.Time, slack time.Duration) {
		t.Helper()
		if d := time.Since(got); d < -slack || d > slack {
			t.Fatalf("%s: stamped %v, %v from now", what, got, d)
		}
	}
	t.Run("uuid", func(t *testing.T) {
		v4, _ := iduuid.NewV4(iduuid.Settings{})
		v7, _ := iduuid.NewV7(iduuid.Settings{})
		for _, g := range []struct {
			version int
			next    func(context.Context) (iduuid.UUID, error)
		}{{4, v4.Next}, {7, v7.Next}} {
			for range 200 {
				mine, err := g.next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				peer, err := uuid.Parse(mine.String())
				if err != nil {
					t.Fatalf("google/uuid rejects idmint's %s: %v", mine, err)
				}
				if [16]byte(peer) != [16]byte(mine) || int(peer.Version()) != g.version || peer.Variant() != uuid.RFC4122 {
					t.Fatalf("idmint %s: google/uuid reads version %d variant %v", mine, peer.Version(), peer.Variant())
				}
				if g.version == 7 {
					mt, _ := mine.Time()
					sec, nsec := peer.Time().UnixTime()
					if !time.Unix(sec, nsec).Equal(mt) {
						t.Fatalf("idmint v7 %s: google/uuid's time %v, idmint's %v", mine, time.Unix(sec, nsec), mt)
					}
					near(t, "idmint v7", mt, time.Second)
				}
			}
		}
		for _, mk := range []func() (uuid.UUID, error){uuid.NewRandom, uuid.NewV7} {
			for range 200 {
				peer, err := mk()
				if err != nil {
					t.Fatal(err)
				}
				mine, err := iduuid.Parse(peer.String())
				if err != nil {
					t.Fatalf("idmint rejects google/uuid's %s: %v", peer, err)
				}
				if [16]byte(mine) != [16]byte(peer) || mine.Version() != int(peer.Version()) || mine.Variant() != iduuid.VariantRFC9562 {
					t.Fatalf("google/uuid %s: idmint reads version %d variant %v", peer, mine.Version(), mine.Variant())
				}
				if peer.Version() == 7 {
					mt, _ := mine.Time()
					sec, nsec := peer.Time().UnixTime()
					if !time.Unix(sec, nsec).Equal(mt) {
						t.Fatalf("google v7 %s: idmint's time %v, google/uuid's %v", peer, mt, time.Unix(sec, nsec))
					}
				}
			}
		}
	})
	t.Run("ulid", func(t *testing.T) {
		g, _ := ulid.New(ulid.Settings{})
		for range 200 {
			mine, err := g.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			peer, err := oklog.ParseStrict(mine.String())
			if err != nil || peer != mine {
				t.Fatalf("oklog/ulid reads idmint's %s as %s, %v", mine, peer, err)
			}
			near(t, "idmint ulid", oklog.Time(peer.Time()), time.Second)
			theirs := oklog.Make()
			back, err := ulid.Parse(theirs.String())
			if err != nil || back != theirs {
				t.Fatalf("idmint reads oklog's %s as %s, %v", theirs, back, err)
			}
		}
	})
	t.Run("ksuid", func(t *testing.T) {
		g, _ := ksuid.New(ksuid.Settings{})
		for range 200 {
			mine, err := g.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			peer, err := segksuid.Parse(mine.String())
			if err != nil || peer != mine {
				t.Fatalf("segmentio/ksuid reads idmint's %s as %s, %v", mine, peer, err)
			}
			near(t, "idmint ksuid", peer.Time(), 2*time.Second)
			theirs := segksuid.New()
			back, err := ksuid.Parse(theirs.String())
			if err != nil || back != theirs {
				t.Fatalf("idmint reads segmentio's %s as %s, %v", theirs, back, err)
			}
		}
	})
	t.Run("xid", func(t *testing.T) {
		g, _ := xid.New(xid.Settings{})
		ref := rsxid.New()
		for range 200 {
			mine, err := g.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			peer, err := rsxid.FromString(mine.String())
			if err != nil || peer != mine {
				t.Fatalf("rs/xid reads idmint's %s as %s, %v", mine, peer, err)
			}
			// Same machine and process fields as rs/xid's own IDs here.
			if string(peer.Machine()) != string(ref.Machine()) || peer.Pid() != ref.Pid() {
				t.Fatalf("idmint xid %s: machine %x pid %d; rs/xid's own: machine %x pid %d", mine, peer.Machine(), peer.Pid(), ref.Machine(), ref.Pid())
			}
			near(t, "idmint xid", peer.Time(), 2*time.Second)
			theirs := rsxid.New()
			back, err := xid.Parse(theirs.String())
			if err != nil || back != theirs {
				t.Fatalf("idmint reads rs/xid's %s as %s, %v", theirs, back, err)
			}
		}
	})
	t.Run("snowflake-bwmarrin", func(t *testing.T) {
		// idmint's leaf layout has bwmarrin/snowflake's default bits
		// (Twitter epoch, 10-bit node, 12-bit step); TestDecodeBwmarrinIDs
		// is the other direction.
		leaf, _ := snowflake.Lookup("leaf")
		g, err := snowflake.New(leaf, snowflake.Settings{Node: map[string]int64{"worker": 777}})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		for range 1000 {
			id, err := g.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			p, _ := snowflake.Decode(leaf, id)
			peer := bwsnowflake.ParseInt64(id)
			if peer.Node() != 777 || peer.Step() != p.Sequence || peer.Time() != p.Time.UnixMilli() {
				t.Fatalf("idmint %d: bwmarrin reads node %d step %d ms %d; idmint %+v", id, peer.Node(), peer.Step(), peer.Time(), p)
			}
		}
	})
	t.Run("snowflake-sonyflake", func(t *testing.T) {
		// TestDecodeSonyflakeIDs is the other direction.
		layout, _ := snowflake.Lookup("sonyflake")
		g, err := snowflake.New(layout, snowflake.Settings{Node: map[string]int64{"machine": 0xBEEF}})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		start := time.Date(2014, 9, 1, 0, 0, 0, 0, time.UTC) // sonyflake v1's default StartTime
		for range 300 {
			id, err := g.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			p, _ := snowflake.Decode(layout, id)
			d := sonyflake.Decompose(uint64(id))
			at := start.Add(time.Duration(d["time"]) * 10 * time.Millisecond)
			if d["machine-id"] != 0xBEEF || int64(d["sequence"]) != p.Sequence || !at.Equal(p.Time) {
				t.Fatalf("idmint %d: sonyflake.Decompose says %v (time %v); idmint %+v", id, d, at, p)
			}
			near(t, "idmint sonyflake-layout ID", at, time.Second)
		}
	})
}
