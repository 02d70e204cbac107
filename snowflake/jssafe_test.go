package snowflake

import (
	"context"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
)

func TestJSSafeLayout(t *testing.T) {
	t.Parallel()
	l, ok := Lookup("jssafe")
	if !ok {
		t.Fatal("Lookup(jssafe) failed")
	}
	for _, alias := range []string{"js-safe", "JavaScript"} {
		if a, ok := Lookup(alias); !ok || a.Name() != "jssafe" {
			t.Errorf("Lookup(%q) = %v, %v", alias, a.Name(), ok)
		}
	}
	if !l.JSSafe() || l.Bits() != 53 {
		t.Fatalf("jssafe is %d bits, JSSafe() = %v", l.Bits(), l.JSSafe())
	}
	if tw, _ := Lookup("twitter"); tw.JSSafe() {
		t.Error("twitter reports JSSafe")
	}
	wantEnd := time.Date(2112, 2, 9, 13, 44, 29, 440_000_000, time.UTC)
	if !l.End().Equal(wantEnd) {
		t.Errorf("End = %s, want %s", l.End().Format(time.RFC3339Nano), wantEnd.Format(time.RFC3339Nano))
	}
	if got := l.CapacityPerSecond(); got != 51200 {
		t.Errorf("CapacityPerSecond = %v, want 51200", got)
	}
	// The last ID before End, with every node and sequence bit set, is
	// exactly Number.MAX_SAFE_INTEGER; one tick later cannot be composed.
	last, err := Compose(l, Parts{Time: l.End().Add(-l.Unit()), Node: map[string]int64{"worker": 63}, Sequence: 511})
	if err != nil || last != MaxSafeInteger {
		t.Fatalf("last ID = %d, %v; want %d", last, err, int64(MaxSafeInteger))
	}
	if _, err := Compose(l, Parts{Time: l.End(), Node: map[string]int64{"worker": 0}}); err == nil {
		t.Fatal("Compose at End succeeded")
	}
	if _, err := Decode(l, MaxSafeInteger+1); err == nil {
		t.Fatal("Decode(2^53) succeeded")
	}
	back, err := ParseLayout(l.String())
	if err != nil || back.String() != l.String() {
		t.Fatalf("ParseLayout(%s) = %v, %v", l.String(), back, err)
	}
}

// TestJSSafeGenerator issues IDs with the jssafe layout at the start of its
// 87 years and just before their end: every ID is unique, increasing and at
// most 2^53 - 1, and a float64 (a JavaScript number) holds each exactly.
func TestJSSafeGenerator(t *testing.T) {
	t.Parallel()
	l, _ := Lookup("jssafe")
	for _, start := range []time.Time{l.Epoch().Add(time.Hour), l.End().Add(-time.Second)} {
		clk := clock.NewFake(start)
		g, err := New(l, Settings{Node: map[string]int64{"worker": 63}, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		seen := make(map[int64]bool)
		var prev int64
		for i := range 20000 {
			if i%500 == 499 {
				clk.Advance(10 * time.Millisecond)
			}
			id, err := g.Next(context.Background())
			if err != nil {
				t.Fatalf("at %s: Next #%d: %v", start, i, err)
			}
			if id > MaxSafeInteger || int64(float64(id)) != id {
				t.Fatalf("ID %d is not JavaScript-safe", id)
			}
			if seen[id] || id <= prev {
				t.Fatalf("ID %d repeated or not increasing (prev %d)", id, prev)
			}
			seen[id], prev = true, id
		}
	}
}
