// Package stamp holds the clock handling that idmint's Unix-millisecond
// generators (flake128, ulid, uuid.V7) share: the last millisecond stamped
// never goes back (after a wall-clock step back it is held, and Ahead
// reports the lead), and once a millisecond's values are used up the
// generator sleeps for the next one, never holding its lock while it waits.
package stamp

import (
	"context"
	"sync"
	"time"

	"github.com/idmint/idmint/clock"
)

// Millis is a generator's last Unix millisecond and the lock that guards it
// together with the generator's other per-millisecond state. Create it
// with Last = -1 (nothing stamped yet).
type Millis struct {
	Mu      sync.Mutex
	Clk     clock.Clock
	MaxWait time.Duration
	Last    int64 // last millisecond stamped, -1 before the first; guarded by Mu
}

// Wait is called with Mu held when millisecond Last is used up at the clock
// reading now. It unlocks Mu, then returns exhausted(Last, wait) if the next
// millisecond is more than MaxWait away; otherwise it sleeps until then and
// returns nil for the caller to try again, or ctx's error if ctx ends first.
func (m *Millis) Wait(ctx context.Context, now time.Time, exhausted func(held int64, wait time.Duration) error) error {
	wait := time.UnixMilli(m.Last + 1).Sub(now)
	held := m.Last
	m.Mu.Unlock()
	if wait > m.MaxWait {
		return exhausted(held, wait)
	}
	return m.Clk.Sleep(ctx, wait)
}

// Ahead reports how far millisecond Last is ahead of the clock: zero before
// the first stamp and unless the wall clock stepped back.
func (m *Millis) Ahead() time.Duration {
	m.Mu.Lock()
	ms := m.Last
	m.Mu.Unlock()
	if ms < 0 {
		return 0
	}
	return max(0, time.UnixMilli(ms).Sub(m.Clk.Now()))
}
