package coarse

import (
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
)

func TestNeverAheadAndFresh(t *testing.T) {
	t.Parallel()
	real := clock.NewReal()
	c := New(real)
	var prev time.Time
	for range 2000 {
		got := c.Now()
		now := real.Now()
		if got.After(now) {
			t.Fatalf("coarse %v is after real %v", got, now)
		}
		if got.Before(prev) {
			t.Fatalf("coarse went back from %v to %v", prev, got)
		}
		prev = got
	}
	// Wait (on the real clock: this tests a real-time cache) until the
	// cache has been refreshed at least once, then check staleness is small.
	first := c.Now()
	deadline := real.Mono() + 2*time.Second
	for c.Now().Equal(first) && real.Mono() < deadline {
		_ = real.Sleep(t.Context(), time.Millisecond)
	}
	if lag := real.Now().Sub(c.Now()); lag > time.Second {
		t.Fatalf("cache is %v stale", lag)
	}
	if c.Mono() <= 0 {
		t.Fatal("Mono does not pass through")
	}
}

func BenchmarkNow(b *testing.B) {
	c := New(clock.NewReal())
	b.ReportAllocs()
	for b.Loop() {
		_ = c.Now()
	}
}

func BenchmarkNowParallel(b *testing.B) {
	c := New(clock.NewReal())
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = c.Now()
		}
	})
}

func TestSharedIsOneClock(t *testing.T) {
	t.Parallel()
	if Shared() != Shared() {
		t.Fatal("Shared returned two clocks")
	}
	if Shared().Now().IsZero() {
		t.Fatal("Shared clock reads zero")
	}
}
