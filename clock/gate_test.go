package clock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeGate is the real clock's wait primitive over a Fake: the leader's
// wait is Fake.SleepUntil, counted in spinning, and other waiters park.
func fakeGate(f *Fake, spinning, most *atomic.Int32) *gate {
	return &gate{
		mono: f.Mono,
		wait: func(ctx context.Context, until time.Duration) error {
			n := spinning.Add(1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			defer spinning.Add(-1)
			return f.SleepUntil(ctx, until)
		},
		park: f.park,
	}
}

// TestGateOneSpinner: 50 goroutines wait for the same tick; only one of
// them is ever in the clock's own wait (the one that may spin), the rest
// are parked on its channel, and all return once the clock reaches the
// tick, none before.
func TestGateOneSpinner(t *testing.T) {
	t.Parallel()
	f := NewFake(t0)
	var spinning, most atomic.Int32
	g := fakeGate(f, &spinning, &most)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const n = 50
	var returned atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.SleepUntil(ctx, time.Millisecond); err != nil {
				errs <- err
			}
			if f.Mono() < time.Millisecond {
				errs <- errors.New("returned before the deadline")
			}
			returned.Add(1)
		}()
	}
	if err := f.WaitForSleepers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	f.Advance(999 * time.Microsecond)
	if got := returned.Load(); got != 0 {
		t.Fatalf("%d waiters returned before the deadline", got)
	}
	if got := f.Sleepers(); got != 1 {
		t.Fatalf("%d goroutines in the clock's wait, want 1 (the others must park)", got)
	}
	f.Advance(time.Microsecond)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := most.Load(); got != 1 {
		t.Fatalf("at most %d goroutines were in the clock's wait at once, want 1", got)
	}
}

// TestGateEarlierDeadline: a waiter whose deadline is earlier than the
// leader's parks for its own deadline instead of waiting for the leader's.
func TestGateEarlierDeadline(t *testing.T) {
	t.Parallel()
	f := NewFake(t0)
	var spinning, most atomic.Int32
	g := fakeGate(f, &spinning, &most)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	late := make(chan error, 1)
	go func() { late <- g.SleepUntil(ctx, 10*time.Millisecond) }()
	if err := f.WaitForSleepers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	early := make(chan error, 1)
	go func() { early <- g.SleepUntil(ctx, 2*time.Millisecond) }()
	if err := f.WaitForSleepers(ctx, 2); err != nil {
		t.Fatal(err)
	}
	f.Advance(2 * time.Millisecond)
	select {
	case err := <-early:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the earlier waiter did not return at its deadline")
	}
	select {
	case <-late:
		t.Fatal("the leader returned before its deadline")
	default:
	}
	f.Advance(8 * time.Millisecond)
	if err := <-late; err != nil {
		t.Fatal(err)
	}
	if most.Load() != 1 {
		t.Fatalf("%d leaders at once", most.Load())
	}
}

// TestGateLeaderCancelled: when the leader's ctx ends, a follower takes
// over the wait and still returns at its deadline.
func TestGateLeaderCancelled(t *testing.T) {
	t.Parallel()
	f := NewFake(t0)
	var spinning, most atomic.Int32
	g := fakeGate(f, &spinning, &most)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lctx, lcancel := context.WithCancel(ctx)
	leader := make(chan error, 1)
	go func() { leader <- g.SleepUntil(lctx, time.Millisecond) }()
	if err := f.WaitForSleepers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	follower := make(chan error, 1)
	go func() { follower <- g.SleepUntil(ctx, time.Millisecond) }()
	lcancel()
	if err := <-leader; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled leader = %v", err)
	}
	if err := f.WaitForSleepers(ctx, 1); err != nil {
		t.Fatalf("the follower did not take over the wait: %v", err)
	}
	f.Advance(time.Millisecond)
	if err := <-follower; err != nil {
		t.Fatal(err)
	}
}

// TestRealWaitPrecise: the real clock's wait ends at or after its deadline
// and, on an unloaded machine, well within a tick of it (a benchmark, not
// this test, measures how close: BenchmarkTwitterCapacity).
func TestRealWaitPrecise(t *testing.T) {
	t.Parallel()
	c := NewReal()
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				until := c.Mono() + 700*time.Microsecond
				if err := c.SleepUntil(ctx, until); err != nil {
					t.Error(err)
					return
				}
				if got := c.Mono(); got < until {
					t.Errorf("SleepUntil returned %v early", until-got)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := realGate.leaders.Load(); n != 0 {
		t.Fatalf("%d leaders left after every wait ended", n)
	}
}
