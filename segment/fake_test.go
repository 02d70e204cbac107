package segment_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/idmint/idmint/segment"
)

// fakeStore is an in-memory segment.Store with fault injection, for tests
// of the allocator's own logic (the contract on real stores lives in
// segmenttest and runs from each store's package).
type fakeStore struct {
	mu        sync.Mutex
	rows      map[string]segment.KeyInfo
	fail      error         // Allocate returns it while set
	block     chan struct{} // Allocate waits for it (or ctx) while set
	latency   time.Duration // real delay per Allocate, for benchmarks
	steps     []int64       // every step asked of Allocate
	calls     int
	lists     int           // List calls
	listErr   error         // List returns it while set
	onList    func()        // List calls it first (outside mu), if set
	allocated chan struct{} // gets a value after each successful Allocate, if set
}

func newFake() *fakeStore { return &fakeStore{rows: map[string]segment.KeyInfo{}} }

func (f *fakeStore) Allocate(ctx context.Context, key string, step int64) (segment.Segment, error) {
	if err := segment.ValidateAllocate(key, step); err != nil {
		return segment.Segment{}, err
	}
	f.mu.Lock()
	f.calls++
	f.steps = append(f.steps, step)
	block, fail, lat := f.block, f.fail, f.latency
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return segment.Segment{}, ctx.Err()
		}
	}
	if lat > 0 {
		t := time.NewTimer(lat)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return segment.Segment{}, ctx.Err()
		}
	}
	if fail != nil {
		return segment.Segment{}, fail
	}
	f.mu.Lock()
	r, ok := f.rows[key]
	if !ok {
		f.mu.Unlock()
		return segment.Segment{}, fmt.Errorf("%w: %q", segment.ErrUnknownKey, key)
	}
	used := step
	if used == 0 {
		used = r.Step
	}
	if !segment.CanAdvance(r.MaxID, used) {
		f.mu.Unlock()
		return segment.Segment{}, segment.OverflowError(key, r.MaxID, used)
	}
	seg := segment.Segment{Start: r.MaxID, End: r.MaxID + used, Step: r.Step}
	r.MaxID += used
	f.rows[key] = r
	ch := f.allocated
	f.mu.Unlock()
	if ch != nil {
		ch <- struct{}{}
	}
	return seg, nil
}

func (f *fakeStore) Raise(_ context.Context, key string, atLeast int64) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.rows[key]
	if !ok {
		return 0, fmt.Errorf("%w: %q", segment.ErrUnknownKey, key)
	}
	before := r.MaxID
	r.MaxID = max(r.MaxID, atLeast)
	f.rows[key] = r
	return before, nil
}

func (f *fakeStore) Create(_ context.Context, k segment.KeyInfo) error {
	k, err := segment.ValidateKeyInfo(k)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.rows[k.Key]; ok {
		return fmt.Errorf("%w: %q", segment.ErrKeyExists, k.Key)
	}
	f.rows[k.Key] = k
	return nil
}

func (f *fakeStore) Get(_ context.Context, key string) (segment.KeyInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.rows[key]
	if !ok {
		return r, fmt.Errorf("%w: %q", segment.ErrUnknownKey, key)
	}
	return r, nil
}

func (f *fakeStore) List(context.Context) ([]segment.KeyInfo, error) {
	f.mu.Lock()
	on := f.onList
	f.mu.Unlock()
	if on != nil {
		on()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	if f.listErr != nil {
		return nil, f.listErr
	}
	var out []segment.KeyInfo
	for _, r := range f.rows {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func (f *fakeStore) SetStep(_ context.Context, key string, step int64) error {
	if err := segment.ValidateStep(step); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.rows[key]
	if !ok {
		return fmt.Errorf("%w: %q", segment.ErrUnknownKey, key)
	}
	r.Step = step
	f.rows[key] = r
	return nil
}

func (f *fakeStore) Delete(_ context.Context, key string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.rows[key]; !ok {
		return fmt.Errorf("%w: %q", segment.ErrUnknownKey, key)
	}
	delete(f.rows, key)
	return nil
}

func (f *fakeStore) Close() error { return nil }

func (f *fakeStore) set(fn func(f *fakeStore)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeStore) requested() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.steps...)
}

var errDown = errors.New("fake: store is down")

// slowBatchStore is a BatchCreator whose CreateMissing costs perRow for
// each row under one constant deadline per call, as a SQL store's calls
// each get sqldb.DefaultTimeout: a call with more rows than fit fails with
// context.DeadlineExceeded and creates nothing (its transaction rolls
// back). The cost is counted, not slept, so a loaded machine changes
// nothing.
type slowBatchStore struct {
	*fakeStore
	perRow, deadline time.Duration
	calls            int
}

func (s *slowBatchStore) CreateMissing(_ context.Context, keys []segment.KeyInfo) error {
	s.calls++
	if cost := time.Duration(len(keys)) * s.perRow; cost > s.deadline {
		return fmt.Errorf("create %d keys: %v of work in a %v deadline: %w", len(keys), cost, s.deadline, context.DeadlineExceeded)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		k, err := segment.ValidateKeyInfo(k)
		if err != nil {
			return err
		}
		if _, ok := s.rows[k.Key]; !ok {
			s.rows[k.Key] = k
		}
	}
	return nil
}
