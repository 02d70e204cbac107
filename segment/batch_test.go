package segment_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/witness"
)

// batchFake is the fake store with AllocateMany (each request through the
// fake's Allocate) and Identity, counting both. While gate is set, the
// first AllocateMany waits for it to close.
type batchFake struct {
	*fakeStore
	bmu        sync.Mutex
	sizes      []int // requests per AllocateMany, in call order
	identities int
	gate       chan struct{}
}

func newBatchFake() *batchFake { return &batchFake{fakeStore: newFake()} }

func (b *batchFake) AllocateMany(ctx context.Context, reqs []segment.AllocateRequest) ([]segment.Allocation, error) {
	out, err := segment.CheckBatch(reqs)
	if err != nil {
		return nil, err
	}
	b.bmu.Lock()
	b.sizes = append(b.sizes, len(reqs))
	gate := b.gate
	if len(b.sizes) > 1 {
		gate = nil
	}
	b.bmu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	for i, r := range reqs {
		if out[i].Err == nil {
			out[i].Segment, out[i].Err = b.fakeStore.Allocate(ctx, r.Key, r.Step)
		}
	}
	return out, nil
}

func (b *batchFake) Identity(context.Context) (string, error) {
	b.bmu.Lock()
	defer b.bmu.Unlock()
	b.identities++
	return "server-1", nil
}

func (b *batchFake) counts() (sizes []int, identities int) {
	b.bmu.Lock()
	defer b.bmu.Unlock()
	return append([]int(nil), b.sizes...), b.identities
}

// TestGroupCommit: 1,000 keys' first loads arrive while the store is busy
// with the first; they all go to the store in one AllocateMany, not in
// 1,000 round trips, with one identity check per batch, and every key
// starts at its first ID.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 1000
	f := newBatchFake()
	for i := range n {
		if err := f.Create(ctx, segment.KeyInfo{Key: fmt.Sprintf("k%d", i), Step: 10}); err != nil {
			t.Fatal(err)
		}
	}
	f.gate = make(chan struct{})
	a, err := segment.New(f, segment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ids := make([]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i], errs[i] = a.Next(ctx, fmt.Sprintf("k%d", i))
		}()
	}
	// The first batch is held at the store; every other load must be
	// waiting for the next one.
	poll(t, "every load to be in a batch or waiting for one (loads are not gathered)", func() bool {
		st := a.BatchStats()
		return st.Requests+uint64(st.Pending) == n
	})
	close(f.gate)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || ids[i] != 1 {
			t.Fatalf("k%d: first ID %d, %v; want 1", i, ids[i], errs[i])
		}
	}
	sizes, identities := f.counts()
	if len(sizes) > 2 || sizes[0]+sizes[len(sizes)-1] != n {
		t.Fatalf("%d store round trips (requests each, the first: %v) for %d concurrent first loads; want the loads gathered into 2", len(sizes), sizes[:min(len(sizes), 8)], n)
	}
	if identities != len(sizes) {
		t.Errorf("%d identity checks for %d batches; want one per batch", identities, len(sizes))
	}
	if st := a.BatchStats(); st.Batches != uint64(len(sizes)) || st.Requests != n || st.Pending != 0 {
		t.Errorf("BatchStats = %+v", st)
	}
}

// TestBatchPerKeyErrors: in one batch, an unknown key fails alone (and
// an auto-created key then loads), the others are served.
func TestBatchPerKeyErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newBatchFake()
	if err := f.Create(ctx, segment.KeyInfo{Key: "known", Step: 10}); err != nil {
		t.Fatal(err)
	}
	a, err := segment.New(f, segment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Next(ctx, "unknown"); err == nil {
		t.Fatal("Next(unknown) succeeded")
	}
	if id, err := a.Next(ctx, "known"); err != nil || id != 1 {
		t.Fatalf("Next(known) = %d, %v", id, err)
	}
	b, err := segment.New(f, segment.Options{AutoCreate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if id, err := b.Next(ctx, "fresh"); err != nil || id != 1 {
		t.Fatalf("auto-created Next(fresh) = %d, %v", id, err)
	}
}

// TestWitnessBatched is TestWitnessAcrossAllocators with a store that
// takes batches and many keys: three allocators share the store and a
// witness, the store forgets every key's last allocations twice while
// they serve; no ID of any key is issued twice.
func TestWitnessBatched(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const keys = 50
	f := newBatchFake()
	for i := range keys {
		if err := f.Create(ctx, segment.KeyInfo{Key: fmt.Sprintf("k%d", i), Step: 20}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := witness.OpenFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var as []*segment.Allocator
	for range 3 {
		a, err := segment.New(f, segment.Options{Witness: w, Step: segment.StepPolicy{Fixed: true}})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		as = append(as, a)
	}
	var mu sync.Mutex
	seen := map[string]map[int64]bool{}
	for round := range 3 {
		var wg sync.WaitGroup
		for i, a := range as {
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for c := range 400 {
						key := fmt.Sprintf("k%d", (c+g*13+i*7)%keys)
						id, err := a.Next(ctx, key)
						if err != nil {
							t.Errorf("allocator %d: %s: %v", i, key, err)
							return
						}
						mu.Lock()
						if seen[key] == nil {
							seen[key] = map[int64]bool{}
						}
						dup := seen[key][id]
						seen[key][id] = true
						mu.Unlock()
						if dup {
							t.Errorf("%s: ID %d issued twice", key, id)
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		if round < 2 {
			for i := range keys {
				forget(f.fakeStore, fmt.Sprintf("k%d", i), 1+int64(round)*10)
			}
		}
	}
	var back uint64
	for _, a := range as {
		for _, st := range a.Stats() {
			back += st.WentBack
		}
	}
	if back == 0 {
		t.Fatal("no allocator reported that the store went back")
	}
}
