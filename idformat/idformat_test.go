package idformat

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/flake128"
	"github.com/idmint/idmint/ksuid"
	"github.com/idmint/idmint/timeid"
	"github.com/idmint/idmint/ulid"
)

var rfcTime = time.Date(2022, 2, 22, 19, 22, 22, 0, time.UTC)

func TestRecognise(t *testing.T) {
	t.Parallel()
	flake := flake128.Make(uint64(rfcTime.UnixMilli()), 0x9f6bdeced846, 7)
	for _, tc := range []struct {
		in      string
		format  string
		version int
		time    time.Time
		seq     int64 // -1: none
		also    string
	}{
		{"C232AB00-9414-11EC-B3C8-9F6BDECED846", UUID, 1, rfcTime, 0x33C8, ""},
		{"919108f7-52d1-4320-9bac-f847db4148a8", UUID, 4, time.Time{}, -1, ""},
		{"1EC9414C-232A-6B00-B3C8-9F6BDECED846", UUID, 6, rfcTime, 0x33C8, ""},
		{"017F22E2-79B0-7CC3-98C4-DC0C0C07398F", UUID, 7, rfcTime, -1, ""},
		{"{017F22E2-79B0-7CC3-98C4-DC0C0C07398F}", UUID, 7, rfcTime, -1, ""},
		{"urn:uuid:017F22E2-79B0-7CC3-98C4-DC0C0C07398F", UUID, 7, rfcTime, -1, ""},
		{"017F22E279B07CC398C4DC0C0C07398F", UUID, 7, rfcTime, -1, Flake128},
		{flake.Hex(), Flake128, 0, rfcTime, 7, UUID}, // its digits happen to look like a v7 UUID of 1970
		{flake.String(), Flake128, 0, rfcTime, 7, ""},
		{"01ARZ3NDEKTSV4RRFFQ69G5FAV", ULID, 0, time.UnixMilli(1469922850259).UTC(), -1, ""},
		{"0ujtsYcgvSTl8PAuAdqWYSMnLOv", KSUID, 0, time.Date(2017, 10, 10, 4, 0, 47, 0, time.UTC), -1, ""},
		{"507f1f77bcf86cd799439011", ObjectID, 0, time.Date(2012, 10, 17, 21, 13, 27, 0, time.UTC), 0x439011, ""},
		{"9m4e2mr0ui3e8a215n4g", XID, 0, time.Date(2011, 3, 22, 17, 50, 19, 0, time.UTC), 4271561, ""},
		{"  9m4e2mr0ui3e8a215n4g\n", XID, 0, time.Date(2011, 3, 22, 17, 50, 19, 0, time.UTC), 4271561, ""},
	} {
		p, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if p.Format != tc.format || p.Version != tc.version || !p.Time.Equal(tc.time) {
			t.Errorf("Parse(%q) = %s v%d %v; want %s v%d %v", tc.in, p.Format, p.Version, p.Time, tc.format, tc.version, tc.time)
		}
		if (tc.seq >= 0) != p.HasSeq || tc.seq >= 0 && p.Sequence != uint64(tc.seq) {
			t.Errorf("Parse(%q) sequence = %v %d, want %d", tc.in, p.HasSeq, p.Sequence, tc.seq)
		}
		if strings.Join(p.Also, ",") != tc.also {
			t.Errorf("Parse(%q) also = %v, want %q", tc.in, p.Also, tc.also)
		}
		// The canonical form decodes to the same parts.
		q, err := ParseAs(p.Format, p.Canonical)
		if err != nil || q.Canonical != p.Canonical || !q.Time.Equal(p.Time) {
			t.Errorf("ParseAs(%s, %q) = %+v, %v", p.Format, p.Canonical, q, err)
		}
		if len(p.Fields()) < 3 {
			t.Errorf("Fields of %q: %v", tc.in, p.Fields())
		}
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want error
		msg  string
	}{
		{"hello", ErrUnknown, "5 characters"},
		{"", ErrUnknown, "0 characters"},
		{"81ARZ3NDEKTSV4RRFFQ69G5FAV", ulid.ErrRange, "exceeds '7'"},
		{"zzzzzzzzzzzzzzzzzzzzzzzzzzz", ksuid.ErrRange, "exceeds"},
		{"017f22e2-79b0-7cc3-98c4-dc0c0c07398g", nil, "not a hex digit"},
	} {
		_, err := Parse(tc.in)
		if err == nil || tc.want != nil && !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Parse(%q) = %v; want %v mentioning %q", tc.in, err, tc.want, tc.msg)
		}
	}
	if _, err := ParseAs("snowflake", "1"); !errors.Is(err, ErrFormat) {
		t.Errorf("ParseAs(snowflake) = %v", err)
	}
	if _, err := ParseAs(TimeGene, "-5"); !errors.Is(err, timeid.ErrTime) {
		t.Errorf("ParseAs(timeid-gene, -5) = %v", err)
	}
	if _, err := ParseAs(TimeGene, "12x"); err == nil || !strings.Contains(err.Error(), "decimal") {
		t.Errorf("ParseAs(timeid-gene, 12x) = %v", err)
	}
}

// TestRegistryHook registers a decimal decoder the way cmd/idmint wires the
// snowflake package's layouts.
func TestRegistryHook(t *testing.T) {
	t.Parallel()
	r := New()
	dec := Decoder{
		Name:  "snowflake-twitter",
		Match: func(s string) bool { _, err := strconv.ParseUint(s, 10, 63); return err == nil },
		Decode: func(s string) (Parts, error) {
			n, _ := strconv.ParseInt(s, 10, 64)
			return Parts{Canonical: s, Time: time.UnixMilli(n>>22 + 1288834974657).UTC(), Precision: time.Millisecond}, nil
		},
	}
	if err := r.Register(dec); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(dec); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("second Register = %v", err)
	}
	if err := r.Register(Decoder{}); !errors.Is(err, ErrFormat) {
		t.Fatalf("empty decoder = %v", err)
	}
	p, err := r.Parse("1541815603606036480")
	if err != nil || p.Format != "snowflake-twitter" || p.Time.Year() != 2022 {
		t.Fatalf("Parse via hook = %+v, %v", p, err)
	}
	if _, err := Parse("1541815603606036480"); !errors.Is(err, ErrUnknown) {
		t.Fatalf("default registry changed: %v", err)
	}
	if !strings.Contains(strings.Join(r.Formats(), ","), "snowflake-twitter") {
		t.Fatal("Formats misses the hook")
	}
}

func TestTimeIDFormats(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(rfcTime)
	g, _ := timeid.NewGene(2, timeid.GeneSettings{Settings: timeid.Settings{Clock: clk}, Key: []byte("0123456789abcdef")})
	id, _ := g.Next(t.Context(), []byte("alice"))
	p, err := ParseAs(TimeGene, strconv.FormatInt(id, 10))
	if err != nil || !p.Time.Equal(rfcTime) || p.Node != "2" || !strings.Contains(strings.Join(p.Notes, ";"), fmt.Sprintf("gene (shard) %d", g.Shard(id))) {
		t.Fatalf("timeid-gene = %+v, %v", p, err)
	}
	m, _ := timeid.NewMember(timeid.Settings{Clock: clk})
	id, _ = m.Next(t.Context(), 4242)
	p, _ = ParseAs(TimeMember, strconv.FormatInt(id, 10))
	if !strings.Contains(strings.Join(p.Notes, ";"), "member ID 4242") {
		t.Fatalf("timeid-member = %+v", p)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"C232AB00-9414-11EC-B3C8-9F6BDECED846", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "0ujtsYcgvSTl8PAuAdqWYSMnLOv", "507f1f77bcf86cd799439011", "9m4e2mr0ui3e8a215n4g", "00008HDbYS99WAyUEMzMcy", "", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := Parse(s)
		if err != nil {
			if !strings.Contains(err.Error(), ": ") {
				t.Fatalf("error without detail: %v", err)
			}
			return
		}
		q, err := ParseAs(p.Format, p.Canonical)
		if err != nil || q.Canonical != p.Canonical || !q.Time.Equal(p.Time) {
			t.Fatalf("canonical %q of %q does not decode alike: %v", p.Canonical, s, err)
		}
	})
}

func ExampleParse() {
	p, err := Parse("017F22E2-79B0-7CC3-98C4-DC0C0C07398F")
	if err != nil {
		panic(err)
	}
	for _, f := range p.Fields() {
		fmt.Printf("%-10s %s\n", f.Name, f.Value)
	}
	// Output:
	// format     uuid
	// canonical  017f22e2-79b0-7cc3-98c4-dc0c0c07398f
	// version    7
	// variant    RFC 9562, Unix time (ms)
	// time       2022-02-22T19:22:22Z
	// precision  1ms
	// random     7cc398c4dc0c0c07398f
	// note       rand_a and rand_b: a generator's counter (RFC 9562 §6.2) cannot be told apart from random bits
}
