package segment_test

import (
	"context"
	"sync"
	"testing"

	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/witness"
)

// forget sets the fake store's max_id back to v: what a failover to a
// lagging replica, or a restored backup, does to the row.
func forget(f *fakeStore, key string, v int64) {
	f.set(func(f *fakeStore) { r := f.rows[key]; r.MaxID = v; f.rows[key] = r })
}

// TestWitnessAcrossAllocators: three allocators (three nodes) share one
// store and one witness (their coordinator). The store forgets its last
// allocations twice while they serve; no ID is issued twice, although the
// allocators' own memories (each only below its own segments) would let
// the repeated numbers through.
func TestWitnessAcrossAllocators(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFake()
	if err := f.Create(ctx, segment.KeyInfo{Key: "k", Step: 100}); err != nil {
		t.Fatal(err)
	}
	w, err := witness.OpenFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var keys []*segment.Key
	for range 3 {
		a, err := segment.New(f, segment.Options{Witness: w, Step: segment.StepPolicy{Fixed: true}})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		k, _ := a.Key("k")
		keys = append(keys, k)
	}
	var mu sync.Mutex
	seen := map[int64]int{}
	for round := range 3 {
		var wg sync.WaitGroup
		for i, k := range keys {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 1000 {
					id, err := k.Next(ctx)
					if err != nil {
						t.Errorf("allocator %d: %v", i, err)
						return
					}
					mu.Lock()
					seen[id]++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if round < 2 {
			forget(f, "k", 1+int64(round)*50) // far behind what was served
		}
	}
	for id, n := range seen {
		if n > 1 {
			t.Fatalf("ID %d issued %d times", id, n)
		}
	}
	var back uint64
	for _, k := range keys {
		back += k.Stats().WentBack
	}
	if back == 0 {
		t.Fatal("no allocator reported that the store went back")
	}
}

// TestWitnessAcrossRestart: a node serves, stops, the store forgets, and
// the node starts again on the same data directory. Its new Allocator
// remembers nothing; the data directory's witness does.
func TestWitnessAcrossRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFake()
	if err := f.Create(ctx, segment.KeyInfo{Key: "k", Step: 100}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	seen := map[int64]bool{}
	run := func() {
		w, err := witness.OpenFile(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		a, err := segment.New(f, segment.Options{Witness: w})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		for range 250 {
			id, err := a.Next(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if seen[id] {
				t.Fatalf("ID %d issued again after the restart", id)
			}
			seen[id] = true
		}
	}
	run()
	forget(f, "k", 1)
	run()
	if got, _ := f.Get(ctx, "k"); got.MaxID < 300 {
		t.Fatalf("store max_id %d after the repair; want it raised above the 300 served", got.MaxID)
	}
}

// BenchmarkLoad is the cost of one segment load with and without the
// witness: every iteration takes a whole segment (Range), so each one
// waits for a load. witness=file adds a claim in the data directory's
// marks (one fsync, shared by concurrent claims). Next from memory does
// not touch the witness (BenchmarkNext).
func BenchmarkLoad(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "witness=none", true: "witness=file"}[on], func(b *testing.B) {
			ctx := context.Background()
			f := newFake()
			if err := f.Create(ctx, segment.KeyInfo{Key: "k", Step: 1000}); err != nil {
				b.Fatal(err)
			}
			opts := segment.Options{Step: segment.StepPolicy{Fixed: true}}
			if on {
				w, err := witness.OpenFile(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				defer w.Close()
				opts.Witness = w
			}
			a, err := segment.New(f, opts)
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			k, _ := a.Key("k")
			for b.Loop() {
				if _, err := k.Range(ctx, 1000); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
