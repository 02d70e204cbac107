package clock

import (
	"testing"
	"time"
)

// TestCachedBound: Now is never ahead of the wrapped clock and never more
// than the period behind it by Mono, with no refresher running (the bound
// must not depend on a goroutine getting a CPU).
func TestCachedBound(t *testing.T) {
	t.Parallel()
	f := NewFake(t0)
	c := NewCached(f, time.Millisecond)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("first Now = %v, want %v", got, t0)
	}
	f.Advance(999 * time.Microsecond)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("Now within the period = %v, want the cached %v", got, t0)
	}
	f.Advance(time.Microsecond)
	if got := c.Now(); !got.Equal(t0.Add(time.Millisecond)) {
		t.Fatalf("Now one period later = %v, want a fresh %v", got, t0.Add(time.Millisecond))
	}
	// Many periods pass with no refresher: Now is still fresh.
	f.Advance(time.Hour)
	if got, want := c.Now(), f.Now(); !got.Equal(want) {
		t.Fatalf("Now after an hour without refreshes = %v, want %v", got, want)
	}
	// A wall step back shows within one period and never runs ahead.
	f.Step(-time.Second)
	if got := c.Now(); got.After(f.Now().Add(time.Second)) {
		t.Fatalf("Now %v", got)
	}
	f.Advance(time.Millisecond)
	if got, want := c.Now(), f.Now(); !got.Equal(want) {
		t.Fatalf("Now a period after a step back = %v, want %v", got, want)
	}
	if c.Mono() != f.Mono() {
		t.Fatal("Mono does not pass through")
	}
}

func TestCachedRealNeverAhead(t *testing.T) {
	t.Parallel()
	r := NewReal()
	c := NewCached(r, time.Millisecond)
	for range 5000 {
		before := r.Now()
		got := c.Now()
		after := r.Now()
		if got.After(after) {
			t.Fatalf("cached %v is after real %v", got, after)
		}
		if before.Sub(got) > 2*time.Millisecond {
			// Period plus the time between reads; a descheduled test
			// goroutine can stretch "before".
			if lag := r.Now().Sub(c.Now()); lag > time.Millisecond+time.Millisecond {
				t.Fatalf("cached lags by %v", lag)
			}
		}
	}
	if Shared() != Shared() || Shared().Recent() == 0 {
		t.Fatal("Shared is not one working clock")
	}
}

func BenchmarkCachedNow(b *testing.B) {
	c := NewCached(NewReal(), time.Millisecond)
	b.ReportAllocs()
	for b.Loop() {
		_ = c.Now()
	}
}

func BenchmarkCachedRecent(b *testing.B) {
	c := NewCached(NewReal(), time.Millisecond)
	b.ReportAllocs()
	for b.Loop() {
		_ = c.Recent()
	}
}

func BenchmarkRealNow(b *testing.B) {
	c := NewReal()
	b.ReportAllocs()
	for b.Loop() {
		_ = c.Now()
	}
}
