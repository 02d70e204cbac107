package worker

import (
	"context"
	"time"
)

// Assigner grants worker-ID leases from one coordinator. Implementations
// are safe for concurrent use.
type Assigner interface {
	// Acquire returns a lease on a worker ID in 0..max (max is the largest
	// value the layout's worker field holds) that no other live holder has.
	// It fails with a *NoFreeIDError when all are held, a *RangeError when
	// the ID this process must use lies outside 0..max, ErrHeld when that ID
	// is held by another live process, or the coordinator's error (within
	// the configured timeout) when it cannot be reached.
	Acquire(ctx context.Context, max int64) (*Lease, error)
	// List returns the worker IDs known to the coordinator, in ID order.
	List(ctx context.Context) ([]Holder, error)
	// Close releases the assigner's connection. Leases it granted must be
	// closed first.
	Close() error
}

// Holder describes one worker ID as the coordinator records it.
type Holder struct {
	ID         int64     // the worker ID
	Generation int64     // fencing generation of the latest holding
	Holder     string    // who holds (or last held) it
	Since      time.Time // when the latest holding began (zero if unknown)
	Horizon    time.Time // highest time its holder may have stamped (zero if none)
	Live       bool      // whether a live lease holds it now
}
