package idformat

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/testkit/idtest"
)

// TestEveryGeneratorIsUniqueAndDecodes issues IDs from every format on 4
// goroutines, checks there are no duplicates, and that Parse (or ParseAs
// for decimal formats) recognises each ID as its own format and time.
func TestEveryGeneratorIsUniqueAndDecodes(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, format := range GeneratorFormats() {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			clk := clock.NewFake(at)
			g, err := NewGenerator(format, GenSettings{Clock: clk, Worker: 3})
			if err != nil {
				t.Fatal(err)
			}
			ids := idtest.Unique(t, 4, 2000, func(int, int) (string, error) {
				id, err := g.Next(t.Context())
				clk.Advance(time.Microsecond)
				return id, err
			}, nil)
			id := ids[0][0]
			var p Parts
			if format == TimeRandom {
				p, err = ParseAs(format, id)
			} else {
				p, err = Parse(id)
			}
			want := strings.SplitN(format, "-v", 2)[0] // uuid-v7 decodes as uuid
			if err != nil || p.Format != want {
				t.Fatalf("decode %s = %+v, %v; want format %s", id, p, err, want)
			}
			if format != "uuid-v4" && format != KSUID && (p.Time.Before(at.Add(-time.Second)) || p.Time.After(at.Add(time.Second))) {
				t.Fatalf("decoded time %v, generated at %v", p.Time, at)
			}
			if g.Ahead() != 0 {
				t.Fatalf("Ahead = %v", g.Ahead())
			}
		})
	}
}

func TestMemberGenerators(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	m, err := NewMemberGenerator(TimeMember, GenSettings{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	id, err := m.NextFor(t.Context(), "4242")
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := ParseAs(TimeMember, id); !strings.Contains(fmt.Sprint(p.Notes), "4242") {
		t.Fatalf("decoded %+v", p)
	}
	if _, err := m.NextFor(t.Context(), "bob"); err == nil {
		t.Fatal("non-numeric member accepted")
	}
	g, err := NewMemberGenerator(TimeGene, GenSettings{Clock: clk, Key: []byte("0123456789abcdef"), Worker: 1})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := g.NextFor(t.Context(), "bob")
	b, _ := g.NextFor(t.Context(), "bob")
	pa, _ := ParseAs(TimeGene, a)
	pb, _ := ParseAs(TimeGene, b)
	if a == b || pa.Notes[0] != pb.Notes[0] || g.Ahead() != 0 {
		t.Fatalf("gene IDs %s %s: %v / %v", a, b, pa.Notes, pb.Notes)
	}
	if _, err := NewMemberGenerator(TimeGene, GenSettings{}); err == nil {
		t.Fatal("gene generator without a key accepted")
	}
}

func TestNewGeneratorErrors(t *testing.T) {
	t.Parallel()
	if _, err := NewGenerator("snowflake", GenSettings{}); !errors.Is(err, ErrFormat) {
		t.Errorf("unknown format: %v", err)
	}
	if _, err := NewMemberGenerator(ULID, GenSettings{}); !errors.Is(err, ErrFormat) {
		t.Errorf("ulid as member generator: %v", err)
	}
	if _, err := NewGenerator(Flake128, GenSettings{Worker: 1 << 48}); err == nil {
		t.Error("49-bit worker accepted")
	}
}

func ExampleNewGenerator() {
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	g, _ := NewGenerator(Flake128, GenSettings{Clock: clk, Worker: 7})
	id, _ := g.Next(context.Background())
	p, _ := Parse(id)
	fmt.Println(p.Format, p.Time, p.Node, p.Sequence)
	// Output: flake128 2026-11-29 12:00:00 +0000 UTC 000000000007 0
}
