package worker

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// fixed is the assigner for a worker ID decided outside any coordinator:
// static (config or flag), ip and mac. Nothing stops two processes from
// being given the same static ID: that is the operator's promise. Its
// horizon lives in the file WithHorizonFile names (the server puts one in
// its data directory), which carries it across restarts; without one it
// lives in memory only and protects handovers inside one process alone.
type fixed struct {
	s      settings
	id     int64
	source string

	mu      sync.Mutex
	held    bool
	lock    *os.File // the horizon file's lock while a lease is open
	gen     int64
	since   time.Time
	horizon time.Time // in-memory horizon (no horizon file)
}

// NewStatic returns an Assigner that always grants worker ID id. Acquire
// fails with a *RangeError if id is outside the layout's range, and with
// ErrHeld while an earlier lease from the same Assigner (or another process
// using the same horizon file) is open.
//
// Give it WithHorizonFile: the lease then records its horizon there,
// fsync'd before any ID is stamped past it, and a restart starts after it
// whatever the clock says (design.md U6). With WithMemoryHorizon instead
// the horizon is kept in memory, so a restart with the clock set back can
// repeat IDs the last run issued; Acquire logs a warning saying so. With
// neither, Acquire fails with an error wrapping ErrNoHorizon.
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
	if f.held {
		f.mu.Unlock()
		return nil, fmt.Errorf("%w: %s worker id %d is already leased in this process", ErrHeld, f.source, f.id)
	}
	path := f.s.horizonFile
	if path == "" && !f.s.memoryHorizon {
		f.mu.Unlock()
		return nil, fmt.Errorf("%w: %s worker id %d has no coordinator to keep its time horizon, so a restart with the clock set back would repeat IDs; name a file: ?horizon=/var/lib/idmint/%s.horizon in the URL (worker.WithHorizonFile; idmint serve puts one in its data directory, gen snowflake takes --horizon FILE), or accept the risk with ?horizon=memory",
			ErrNoHorizon, f.source, f.id, strings.Fields(f.source)[0])
	}
	f.held = true
	if path == "" {
		// The generation must grow across restarts too, and there is
		// nowhere to keep a counter: wall nanoseconds grow as long as the
		// clock does.
		f.gen = max64(f.gen+1, f.s.clock.Now().UnixNano())
		f.since = f.s.clock.Now()
		l := newLease(f.s, f.id, f.gen, f.horizon, (*fixedBackend)(f), 0, false)
		f.mu.Unlock()
		f.s.logger.Warn("worker: the horizon is kept in memory only: a restart with the clock set back can repeat IDs; name a horizon file (?horizon=/path in the coordinator URL)",
			"source", f.source, "worker_id", f.id)
		return l, nil
	}
	f.mu.Unlock()
	// The file I/O runs outside f.mu; held keeps a second Acquire out.
	lk, st, err := claimFile(path, f.s, func(st *fileState, _ bool) error {
		st.WorkerID = f.id // the file carries the horizon of whichever ID used it last
		return nil
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.held = false
		return nil, err // names the horizon file
	}
	f.lock, f.gen, f.since = lk, st.Generation, st.Since
	return newLease(f.s, f.id, st.Generation, st.Horizon, &fileBackend{path: path, st: st, unlock: f.unlock}, 0, false), nil
}

// unlock ends the open lease of a horizon-file assigner.
func (f *fixed) unlock() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held = false
	if f.lock == nil {
		return nil
	}
	err := f.lock.Close()
	f.lock = nil
	return err
}

func (f *fixed) List(ctx context.Context) ([]Holder, error) {
	f.mu.Lock()
	here, path := f.lock != nil, f.s.horizonFile
	h := Holder{ID: f.id, Generation: f.gen, Holder: f.s.holder, Since: f.since, Horizon: f.horizon, Live: f.held}
	f.mu.Unlock()
	if path != "" {
		fh, ok, err := listFile(path, here)
		if err != nil {
			return nil, err
		}
		if ok {
			h = fh
		}
	}
	return []Holder{h}, nil
}

func (f *fixed) Close() error { return nil }

// fixedBackend keeps the horizon of a fixed assigner without a horizon
// file, in memory.
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
