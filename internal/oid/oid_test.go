package oid

import (
	"errors"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/testkit/idtest"
)

var (
	errTime      = errors.New("time")
	errExhausted = errors.New("exhausted")
	t0           = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
)

// TestCounterWrapDoesNotRepeat issues more than 2^24 IDs within one second
// of a frozen clock, starting the counter just below the wrap: the
// reference generators repeat here; Gen waits for the next second.
func TestCounterWrapDoesNotRepeat(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	g := New(clk, time.Second, Errors{errTime, errExhausted}, [5]byte{1, 2, 3, 4, 5}, PerSecond-2)
	g.SetLimit(1000) // keep the test small; the logic is the same at 2^24
	ctx := idtest.Context(t)
	seen := map[[12]byte]bool{}
	for range 1000 {
		id, err := g.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if seen[id] {
			t.Fatalf("duplicate %x", id)
		}
		seen[id] = true
	}
	id := idtest.AfterWait(t, clk, time.Second, func() ([12]byte, error) { return g.Next(ctx) })
	if seen[id] || id[3] != byte(t0.Unix()+1) {
		t.Fatalf("after the budget: %x", id)
	}
	// Exhaust the new second, then step the clock back 5 s: the wait is
	// longer than MaxWait.
	for range 999 {
		if _, err := g.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	clk.Step(-5 * time.Second)
	if a := g.Ahead(); a != 5*time.Second {
		t.Fatalf("Ahead = %v", a)
	}
	if _, err := g.Next(ctx); !errors.Is(err, errExhausted) {
		t.Fatalf("Next = %v, want exhausted", err)
	}
}

func TestTimeRange(t *testing.T) {
	t.Parallel()
	for _, at := range []time.Time{time.Unix(-1, 0), time.Unix(1<<32, 0)} {
		g := New(clock.NewFake(at), time.Second, Errors{errTime, errExhausted}, [5]byte{}, 0)
		if _, err := g.Next(idtest.Context(t)); !errors.Is(err, errTime) {
			t.Errorf("at %v: %v", at, err)
		}
	}
}
