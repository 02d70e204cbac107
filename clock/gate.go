package clock

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// gate is the one waiting primitive: it lets any number of goroutines wait
// for monotonic deadlines while at most one of them, the leader, runs the
// clock's own wait (wait), which for the real clock may spin through its
// last microseconds. The others park: on the leader's done channel when
// their deadline is no earlier than the leader's (the usual case: callers
// of a generator all waiting for the next tick), or in park otherwise.
type gate struct {
	mono func() time.Duration
	// wait is the leader's wait: precise, may spin briefly.
	wait func(ctx context.Context, until time.Duration) error
	// park waits idly until until, wake is closed or ctx is done; it may
	// return late.
	park func(ctx context.Context, until time.Duration, wake <-chan struct{}) error

	mu   sync.Mutex
	lead *turn // the current leader's wait; nil when none

	leaders atomic.Int32 // goroutines inside wait; tests check it is <= 1
}

type turn struct {
	until time.Duration
	done  chan struct{}
}

// SleepUntil returns nil once mono() >= until, or ctx.Err() if ctx ends
// first.
func (g *gate) SleepUntil(ctx context.Context, until time.Duration) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if g.mono() >= until {
			return nil
		}
		g.mu.Lock()
		t := g.lead
		if t == nil {
			t = &turn{until: until, done: make(chan struct{})}
			g.lead = t
			g.mu.Unlock()
			g.leaders.Add(1)
			err := g.wait(ctx, until)
			g.leaders.Add(-1)
			g.mu.Lock()
			g.lead = nil
			close(t.done) // followers re-check; one of them may lead next
			g.mu.Unlock()
			if err != nil {
				return err
			}
			continue // re-check the deadline (a wait may end early on EINTR)
		}
		g.mu.Unlock()
		if t.until <= until {
			select {
			case <-t.done:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		// The leader waits for a later deadline: wait idly for ours (or for
		// the leader to finish, whichever comes first).
		if err := g.park(ctx, until, t.done); err != nil {
			return err
		}
	}
}

// The real clock's wait: a runtime timer for all but timerLead of it (the
// Go runtime's timers wake ~1 ms late on Linux: measured on the 2-core CI
// VM, time.Sleep(200µs) took 1.08 ms at p50), then shortPark (nanosleep
// with 1 µs slack on Linux, measured 18-35 µs late at p50 on that VM) for
// all but spinWindow, then a spin.
//
// The spin only buys precision, never capacity: a generator at its cap
// issues a whole tick's sequence after waking, whether 10 or 40 µs late. So
// the window is 10 µs, not the 50 µs that covered nanosleep's lateness:
// BenchmarkCapacityCPU/1 (bench/) fell from 15.8 to 9.9 CPU-ms per million
// IDs with the same 4.11 M IDs/s.
const (
	timerLead  = 2 * time.Millisecond
	spinWindow = 10 * time.Microsecond
)

var realGate = &gate{mono: sinceStart, wait: preciseWait, park: timerPark}

// preciseWait waits until sinceStart() >= until, parking for all but the
// last spinWindow.
func preciseWait(ctx context.Context, until time.Duration) error {
	for {
		left := until - sinceStart()
		if left <= 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		switch {
		case left > timerLead+spinWindow:
			if err := timerPark(ctx, until-timerLead, nil); err != nil {
				return err
			}
		case left > spinWindow:
			shortPark(left - spinWindow)
		default:
			for sinceStart() < until {
				// Spin: at most spinWindow, one goroutine at a time (gate).
			}
			return nil
		}
	}
}

// timerPark waits on a runtime timer until sinceStart() >= until, wake is
// closed or ctx is done.
func timerPark(ctx context.Context, until time.Duration, wake <-chan struct{}) error {
	d := until - sinceStart()
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
