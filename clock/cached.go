package clock

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultPeriod is the staleness bound of Shared and of NewCached with a
// non-positive period.
const DefaultPeriod = time.Millisecond

// idleRefreshes is how many refreshes without a Recent call stop the
// refresher goroutine.
const idleRefreshes = 1000

// Cached is a Clock whose wall time is read from a cache, for generators
// that stamp many IDs per millisecond. It is idmint's one cached clock.
//
//   - Now costs a monotonic read (~26 ns on the CI VM) instead of a wall
//     read (~48 ns): it returns the cached wall time if that was read less
//     than Period ago by the monotonic clock, and otherwise reads the wall
//     clock itself. So Now is never ahead of the wrapped clock and never
//     more than Period behind it, whatever the scheduler does: no goroutine
//     needs a CPU for the bound to hold.
//   - Recent costs one atomic load. A background goroutine, started by
//     Recent and stopped after idleRefreshes periods without a Recent call,
//     refreshes the cache every Period; so Recent lags by Period plus the
//     time that goroutine waits for a CPU (1-2 ms on an idle machine, tens
//     of milliseconds with every core busy). It is for hot paths that bound
//     the lag themselves (snowflake re-reads the clock every 64 IDs).
//
// Mono, Sleep and SleepUntil pass through. Safe for concurrent use.
type Cached struct {
	base   Clock
	period time.Duration
	// A seqlock over (wall, at): seq is odd while a refresh writes them.
	seq     atomic.Uint64
	wall    atomic.Int64 // Unix nanoseconds of the last reading
	at      atomic.Int64 // base.Mono just before that reading
	used    atomic.Bool  // Recent called since the last refresh
	running atomic.Bool  // a refresher goroutine is live
}

// NewCached wraps base (normally a *Real) with a cache of period
// (DefaultPeriod when period <= 0).
func NewCached(base Clock, period time.Duration) *Cached {
	if period <= 0 {
		period = DefaultPeriod
	}
	c := &Cached{base: base, period: period}
	c.at.Store(int64(base.Mono()) - int64(period) - 1) // stale until the first read
	return c
}

// Period returns the cache's staleness bound.
func (c *Cached) Period() time.Duration { return c.period }

// Now returns the wall time, at most Period old by the monotonic clock and
// never later than the wrapped clock's Now. The location is UTC and the
// value carries no monotonic reading.
func (c *Cached) Now() time.Time {
	m := c.base.Mono()
	if v := c.seq.Load(); v&1 == 0 {
		w, at := c.wall.Load(), c.at.Load()
		if c.seq.Load() == v && m-time.Duration(at) < c.period {
			return time.Unix(0, w).UTC()
		}
	}
	return c.Refresh()
}

// Refresh reads the wrapped clock, publishes the reading and returns it.
func (c *Cached) Refresh() time.Time {
	m := c.base.Mono()
	now := c.base.Now()
	if v := c.seq.Load(); v&1 == 0 && c.seq.CompareAndSwap(v, v+1) {
		// Only a later reading replaces the cache; a losing or older
		// refresh just returns its own reading.
		if int64(m) > c.at.Load() {
			c.wall.Store(now.UnixNano())
			c.at.Store(int64(m))
		}
		c.seq.Store(v + 2)
	}
	return time.Unix(0, now.UnixNano()).UTC()
}

// Recent returns the cached wall time in Unix nanoseconds with one atomic
// load, starting the refresher goroutine if it is not running (and then
// reading the clock first). See Cached for its lag.
func (c *Cached) Recent() int64 {
	if !c.running.Load() && c.running.CompareAndSwap(false, true) {
		c.Refresh()
		go c.refresh()
	}
	if !c.used.Load() {
		c.used.Store(true)
	}
	return c.wall.Load()
}

// Mono returns the wrapped clock's Mono.
func (c *Cached) Mono() time.Duration { return c.base.Mono() }

// Sleep calls the wrapped clock's Sleep.
func (c *Cached) Sleep(ctx context.Context, d time.Duration) error { return c.base.Sleep(ctx, d) }

// SleepUntil calls the wrapped clock's SleepUntil.
func (c *Cached) SleepUntil(ctx context.Context, until time.Duration) error {
	return c.base.SleepUntil(ctx, until)
}

func (c *Cached) refresh() {
	t := time.NewTicker(c.period)
	defer t.Stop()
	idle := 0
	for range t.C {
		c.Refresh()
		if c.used.Swap(false) {
			idle = 0
			continue
		}
		if idle++; idle < idleRefreshes {
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
	shared     *Cached
)

// Shared returns one process-wide Cached over NewReal() with DefaultPeriod,
// so every generator created with default settings shares one cache and at
// most one refresher goroutine (none while they are idle).
func Shared() *Cached {
	sharedOnce.Do(func() { shared = NewCached(NewReal(), DefaultPeriod) })
	return shared
}
