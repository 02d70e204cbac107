package worker

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// fixed is the assigner for a worker ID decided outside any coordinator:
// static (config or flag), ip and mac. It keeps the horizon in memory only,
// so it protects handovers inside one process; across restarts the
// generator's own persisted horizon (snowflake.FileHorizon) or the file
// assigner must carry it. Nothing stops two processes from being given the
// same static ID: that is the operator's promise.
type fixed struct {
	s      settings
	id     int64
	source string

	mu      sync.Mutex
	held    bool
	gen     int64
	since   time.Time
	horizon time.Time
}

// NewStatic returns an Assigner that always grants worker ID id. Acquire
// fails with a *RangeError if id is outside the layout's range, and with
// ErrHeld while an earlier lease from the same Assigner is open.
func NewStatic(id int64, opts ...Option) (Assigner, error) {
	s, err := newSettings(opts)
	if err != nil {
		return nil, err
	}
	if id < 0 {
		return nil, fmt.Errorf("%w: static worker id %d is negative", ErrBadURL, id)
	}
	return &fixed{s: s, id: id, source: "static"}, nil
}

func (f *fixed) Acquire(ctx context.Context, max int64) (*Lease, error) {
	if err := checkRange(f.id, max, f.source); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held {
		return nil, fmt.Errorf("%w: %s worker id %d is already leased in this process", ErrHeld, f.source, f.id)
	}
	f.held = true
	// The generation must grow across restarts too, and there is nowhere
	// to keep a counter: wall nanoseconds grow as long as the clock does.
	f.gen = max64(f.gen+1, f.s.clock.Now().UnixNano())
	f.since = f.s.clock.Now()
	return newLease(f.s, f.id, f.gen, f.horizon, (*fixedBackend)(f), 0, false), nil
}

func (f *fixed) List(ctx context.Context) ([]Holder, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return []Holder{{ID: f.id, Generation: f.gen, Holder: f.s.holder, Since: f.since, Horizon: f.horizon, Live: f.held}}, nil
}

func (f *fixed) Close() error { return nil }

type fixedBackend fixed

func (b *fixedBackend) keepalive(context.Context) error { return nil }

func (b *fixedBackend) store(_ context.Context, until time.Time) (time.Time, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if until.After(b.horizon) {
		b.horizon = until
	}
	return b.horizon, nil
}

func (b *fixedBackend) lower(_ context.Context, last time.Time) (time.Time, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.horizon = last
	return b.horizon, nil
}

func (b *fixedBackend) release(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held = false
	return nil
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
