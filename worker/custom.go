package worker

import (
	"context"
	"fmt"
	"time"
)

// Backend is what a coordinator does for a Lease, for coordinators built
// outside this package (a simulated coordinator, a test double). The
// coordinators in this package implement the same four operations
// internally.
type Backend interface {
	// Keepalive confirms the lease with the coordinator. It returns an
	// error wrapping ErrLeaseLost when the coordinator says the lease is
	// gone, any other error when it could not tell.
	Keepalive(ctx context.Context) error
	// Store records a horizon of at least until, conditional on the lease
	// still being held (its generation), and returns the value recorded.
	Store(ctx context.Context, until time.Time) (time.Time, error)
	// Lower records exactly last as the horizon, below the recorded one,
	// conditional on the lease still being held, and returns the value
	// recorded.
	Lower(ctx context.Context, last time.Time) (time.Time, error)
	// Release gives the worker ID back (best effort). The Lease calls it
	// exactly once, on Close, whether or not the lease was lost before.
	Release(ctx context.Context) error
}

// StoreConfirmer is implemented by a Backend whose successful Store also
// renews the lease, as a request on a ZooKeeper session does: the Lease
// then counts a Store like a confirmed keepalive sent when the Store was.
type StoreConfirmer interface {
	StoreConfirms() bool
}

// NewLease starts a Lease on worker ID id, fencing generation gen, granted
// by a coordinator outside this package through b. horizon is the horizon
// the coordinator had recorded for id (the zero time if none); sent is the
// Mono reading of the WithClock clock taken before the acquiring request was
// sent: the lease is valid until sent + TTL - margin, and each confirmed
// keepalive moves that to its own sending time + TTL - margin. The options
// are those of the assigners (WithClock, WithTTL, WithMargin, WithTimeout,
// WithHolder, WithLogger); the lease keeps itself alive every TTL/3 until
// Close.
func NewLease(id, gen int64, horizon time.Time, b Backend, sent time.Duration, opts ...Option) (*Lease, error) {
	s, err := newSettings(opts)
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, fmt.Errorf("%w: backend of worker id %d is nil", ErrBadOption, id)
	}
	return newLease(s, id, gen, horizon, customBackend{b}, sent, true), nil
}

// customBackend adapts a Backend to the lease's internal backend.
type customBackend struct{ b Backend }

func (c customBackend) keepalive(ctx context.Context) error { return c.b.Keepalive(ctx) }
func (c customBackend) store(ctx context.Context, until time.Time) (time.Time, error) {
	return c.b.Store(ctx, until)
}
func (c customBackend) lower(ctx context.Context, last time.Time) (time.Time, error) {
	return c.b.Lower(ctx, last)
}
func (c customBackend) release(ctx context.Context) error { return c.b.Release(ctx) }
func (c customBackend) storeConfirms() bool {
	sc, ok := c.b.(StoreConfirmer)
	return ok && sc.StoreConfirms()
}
