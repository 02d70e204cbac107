// Package coarse wraps a clock.Clock so that reading the wall time costs an
// atomic load instead of a system clock read.
//
// time.Now costs ~40 ns on the CI machine (measured November 2026), most of a
// 50 ns budget for a UUID v7. Clock caches Now in an atomic word that a
// background goroutine refreshes from the wrapped clock about once a
// millisecond while the Clock is in use; the goroutine exits after a second
// without reads and the next read restarts it. A cached reading is never
// later than the real time, only up to about one timer period (≈1–2 ms)
// earlier, so IDs stamped from it never run ahead of the clock.
//
// This belongs beside clock.Real; it lives here until the clock package
// offers a coarse clock of its own.
package coarse

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idmint/idmint/clock"
)

// Period is how often the cache is refreshed while in use.
const Period = time.Millisecond

// idleTicks is how many refreshes without a read stop the goroutine.
const idleTicks = 1000

// Clock is a clock.Clock whose Now is cached. Mono and Sleep pass through to
// the wrapped clock. Safe for concurrent use.
type Clock struct {
	base    clock.Clock
	now     atomic.Int64 // cached wall time, Unix nanoseconds
	used    atomic.Bool  // read since the last refresh
	running atomic.Bool  // a refresher goroutine is live
}

// New wraps base, which should be a real clock: with a fake clock, use the
// fake directly.
func New(base clock.Clock) *Clock { return &Clock{base: base} }

// Now returns the wall time as of the last refresh, at most about one
// Period old and never later than base.Now. The location is UTC and the
// value carries no monotonic reading.
func (c *Clock) Now() time.Time {
	if !c.running.Load() && c.running.CompareAndSwap(false, true) {
		c.now.Store(c.base.Now().UnixNano())
		go c.refresh()
	}
	if !c.used.Load() {
		c.used.Store(true)
	}
	return time.Unix(0, c.now.Load()).UTC()
}

// Mono returns base.Mono().
func (c *Clock) Mono() time.Duration { return c.base.Mono() }

// Sleep calls base.Sleep.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error { return c.base.Sleep(ctx, d) }

func (c *Clock) refresh() {
	t := time.NewTicker(Period)
	defer t.Stop()
	idle := 0
	for range t.C {
		c.now.Store(c.base.Now().UnixNano())
		if c.used.Swap(false) {
			idle = 0
			continue
		}
		if idle++; idle < idleTicks {
			continue
		}
		c.running.Store(false)
		// A reader may have seen running == true just before the store
		// and relied on this goroutine: if so, keep going.
		if !c.used.Load() || !c.running.CompareAndSwap(false, true) {
			return
		}
		idle = 0
	}
}

var (
	sharedOnce sync.Once
	shared     *Clock
)

// Shared returns one process-wide coarse Clock over clock.NewReal(), so
// every generator created with default settings shares a single refresher
// goroutine (and none runs while they are idle).
func Shared() *Clock {
	sharedOnce.Do(func() { shared = New(clock.NewReal()) })
	return shared
}
