package xid

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	rsxid "github.com/rs/xid"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/testkit/idtest"
)

// "9m4e2mr0ui3e8a215n4g" is the example of rs/xid's README; Parse must
// agree with rs/xid's own decoder on it.
const readme = "9m4e2mr0ui3e8a215n4g"

func TestParse(t *testing.T) {
	t.Parallel()
	id, err := Parse(readme)
	if err != nil {
		t.Fatal(err)
	}
	if id.String() != readme {
		t.Errorf("String = %s", id)
	}
	want, _ := rsxid.FromString(readme)
	if id != want {
		t.Errorf("Parse = %x, rs/xid = %x", id[:], want[:])
	}
	for _, tc := range []struct {
		in   string
		want error
		msg  string
	}{
		{"", ErrLength, "0 characters"},
		{readme + "0", ErrLength, "21 characters"},
		{"9m4e2mr0ui3e8a215n4w", ErrSyntax, "'w' at position 19 is not in 0-9a-v"},
		{"9M4e2mr0ui3e8a215n4g", ErrSyntax, "'M' at position 1"},
		{"9m4e2mr0ui3e8a215n4h", ErrSyntax, "must be '0' or 'g'"},
	} {
		_, err := Parse(tc.in)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) || !strings.HasPrefix(err.Error(), "xid: ") {
			t.Errorf("Parse(%q) = %v; want %v mentioning %q", tc.in, err, tc.want, tc.msg)
		}
	}
}

func TestSettings(t *testing.T) {
	t.Parallel()
	if _, err := New(Settings{MaxWait: -1}); !errors.Is(err, ErrSettings) {
		t.Errorf("MaxWait -1: %v", err)
	}
	if _, err := New(Settings{Machine: []byte{1}}); !errors.Is(err, ErrSettings) {
		t.Errorf("1-byte Machine: %v", err)
	}
	if _, err := New(Settings{Rand: bytes.NewReader(nil)}); err == nil {
		t.Error("empty Rand accepted")
	}
	g, _ := New(Settings{Machine: []byte{1, 2, 3}, PID: 0x4567})
	id, err := g.Next(idtest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(id.Machine(), []byte{1, 2, 3}) || id.Pid() != 0x4567 {
		t.Errorf("machine %x pid %x", id.Machine(), id.Pid())
	}
	d, _ := New(Settings{})
	id, _ = d.Next(idtest.Context(t))
	if ref := rsxid.New(); !bytes.Equal(id.Machine(), ref.Machine()) || id.Pid() != ref.Pid() {
		t.Errorf("defaults differ from rs/xid: %x/%x vs %x/%x", id.Machine(), id.Pid(), ref.Machine(), ref.Pid())
	}
}

func TestUniqueUnderConcurrency(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	g, _ := New(Settings{Clock: clk})
	ctx := idtest.Context(t)
	idtest.Unique(t, 8, 20000, func(_, i int) (ID, error) {
		id, err := g.Next(ctx)
		if i%4000 == 0 {
			clk.Advance(time.Second)
		}
		return id, err
	}, nil)
}

func FuzzParse(f *testing.F) {
	f.Add(readme)
	f.Add("00000000000000000000")
	f.Add("vvvvvvvvvvvvvvvvvvvg")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrLength) && !errors.Is(err, ErrSyntax) {
				t.Fatalf("unclassified error %v", err)
			}
			if _, rerr := rsxid.FromString(s); rerr == nil {
				t.Fatalf("Parse rejects %q that rs/xid accepts: %v", s, err)
			}
			return
		}
		if id.String() != s {
			t.Fatalf("round trip %q → %s", s, id)
		}
	})
}

func ExampleParse() {
	id, _ := Parse("9m4e2mr0ui3e8a215n4g")
	fmt.Println(id.Time().UTC(), id.Counter())
	// Output: 2011-03-22 17:50:19 +0000 UTC 4271561
}

func BenchmarkNext(b *testing.B) {
	g, _ := New(Settings{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, _ = g.Next(ctx)
	}
}

func BenchmarkNextParallel(b *testing.B) {
	g, _ := New(Settings{})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = g.Next(ctx)
		}
	})
}

// capLimit is the per-second budget TestPerSecondCap sets: small, so the
// race detector does not issue 2^24 IDs to prove the cap (capfull_test.go
// issues all 2^24 in builds without it).
const capLimit = 1 << 12

// TestPerSecondCap: a second's whole budget within one frozen second, no
// counter value twice; the next one waits for the next second (here: fails,
// the second being further away than MaxWait) instead of wrapping the
// counter.
func TestPerSecondCap(t *testing.T) {
	t.Parallel()
	testPerSecondCap(t, capLimit)
}

// testPerSecondCap runs the cap check with the budget lowered to limit, or
// at the real 2^24 when limit is 0.
func testPerSecondCap(t *testing.T, limit uint32) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 500_000_000, time.UTC)
	clk := clock.NewFake(at)
	g, err := New(Settings{Clock: clk, MaxWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	n := 1 << 24
	if limit != 0 {
		g.g.SetLimit(limit)
		n = int(limit)
	}
	idtest.PerSecondCap(t, clk, at, n, func(ctx context.Context) ([12]byte, error) {
		id, err := g.Next(ctx)
		return [12]byte(id), err
	}, ErrExhausted)
}
