package segmenttest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/idmint/idmint/segment"
)

// batchOf returns the store as a BatchAllocator, skipping the test when it
// is not one.
func batchOf(t *testing.T, s segment.Store) segment.BatchAllocator {
	t.Helper()
	b, ok := s.(segment.BatchAllocator)
	if !ok {
		t.Skipf("%T is not a segment.BatchAllocator: its loads go one by one", s)
	}
	return b
}

// testBatchAllocate: one AllocateMany over many keys moves each exactly as
// Allocate would (the row's step or the one asked; [old max_id, new
// max_id)), answers an unknown key, a bad key, a bad step and a key at the
// end of its number line on their own without failing the others, and
// refuses a key asked twice before changing anything.
func testBatchAllocate(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := openStore(t, open)
	b := batchOf(t, s)
	const n = 1500 // more than one statement's worth where the store chunks
	var reqs []segment.AllocateRequest
	var rows []segment.KeyInfo
	for i := range n {
		k := segment.KeyInfo{Key: fmt.Sprintf("b%04d", i), Step: int64(10 + i%7), MaxID: int64(1 + 1000*i)}
		rows = append(rows, k)
		step := int64(0)
		if i%3 == 0 {
			step = int64(1 + i%5)
		}
		reqs = append(reqs, segment.AllocateRequest{Key: k.Key, Step: step})
	}
	a, err := segment.New(s, segment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.EnsureKeys(ctx, rows); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, segment.KeyInfo{Key: "end", Step: 10, MaxID: math.MaxInt64 - 5})
	reqs = append(reqs,
		segment.AllocateRequest{Key: "nope"},
		segment.AllocateRequest{Key: "end"},
		segment.AllocateRequest{Key: ""},
		segment.AllocateRequest{Key: "badstep", Step: -3})
	want := []error{segment.ErrUnknownKey, segment.ErrOverflow, segment.ErrBadKey, segment.ErrBadStep}

	dup := append([]segment.AllocateRequest{{Key: "b0002"}}, reqs[:5]...)
	if _, err := b.AllocateMany(ctx, dup); !errors.Is(err, segment.ErrBadKey) {
		t.Fatalf("AllocateMany with b0002 twice = %v, want ErrBadKey", err)
	}
	if m := maxID(t, s, "b0000"); m != 1 {
		t.Fatalf("b0000 max_id = %d after a refused batch, want 1 (unchanged)", m)
	}

	got, err := b.AllocateMany(ctx, reqs)
	if err != nil {
		t.Fatalf("AllocateMany of %d keys: %v", len(reqs), err)
	}
	if len(got) != len(reqs) {
		t.Fatalf("AllocateMany answered %d allocations for %d requests", len(got), len(reqs))
	}
	for i := range n {
		r, g := rows[i], got[i]
		size := reqs[i].Step
		if size == 0 {
			size = r.Step
		}
		wantSeg := segment.Segment{Start: r.MaxID, End: r.MaxID + size, Step: r.Step}
		if g.Err != nil || g.Segment != wantSeg {
			t.Fatalf("%s (step asked %d): %+v, %v; want %+v", r.Key, reqs[i].Step, g.Segment, g.Err, wantSeg)
		}
		if m := maxID(t, s, r.Key); i%100 == 0 && m != wantSeg.End {
			t.Fatalf("%s max_id = %d after the batch, want %d", r.Key, m, wantSeg.End)
		}
	}
	for j, w := range want {
		if g := got[n+j]; !errors.Is(g.Err, w) {
			t.Errorf("request %q: %+v, %v; want %v", reqs[n+j].Key, g.Segment, g.Err, w)
		}
	}
	if m := maxID(t, s, "end"); m != math.MaxInt64-5 {
		t.Errorf("end max_id = %d, want it unchanged", m)
	}
	if got, err := b.AllocateMany(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("AllocateMany(nil) = %v, %v", got, err)
	}
}

// testBatchConcurrent: several handles (separate connections, as separate
// nodes) send AllocateMany over overlapping sets of keys in shuffled
// orders while others call Allocate on the same keys. Every ID of every
// segment is collected: none twice, no call fails (two batches that locked
// shared rows in different orders would deadlock and fail), and each row
// ends where the segments end.
func testBatchConcurrent(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := openStore(t, open)
	batchOf(t, s)
	const keys, step, workers, rounds = 60, 3, 6, 15
	for i := range keys {
		mustCreate(t, s, segment.KeyInfo{Key: fmt.Sprintf("c%02d", i), Step: step})
	}
	var (
		mu   sync.Mutex
		segs = map[string][]segment.Segment{}
		wg   sync.WaitGroup
	)
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := open()
			defer h.Close()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range rounds {
				perm := rng.Perm(keys)[:keys/2+rng.IntN(keys/2)]
				var reqs []segment.AllocateRequest
				for _, i := range perm {
					reqs = append(reqs, segment.AllocateRequest{Key: fmt.Sprintf("c%02d", i)})
				}
				var got []segment.Allocation
				if w%3 == 2 { // one in three goes key by key
					for _, r := range reqs {
						seg, err := h.Allocate(ctx, r.Key, 0)
						got = append(got, segment.Allocation{Segment: seg, Err: err})
					}
				} else {
					var err error
					if got, err = h.(segment.BatchAllocator).AllocateMany(ctx, reqs); err != nil {
						errs <- fmt.Errorf("worker %d: AllocateMany: %w", w, err)
						return
					}
				}
				mu.Lock()
				for i, g := range got {
					if g.Err != nil {
						mu.Unlock()
						errs <- fmt.Errorf("worker %d: %s: %w", w, reqs[i].Key, g.Err)
						return
					}
					segs[reqs[i].Key] = append(segs[reqs[i].Key], g.Segment)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := 0
	for key, ss := range segs {
		seen := map[int64]bool{}
		for _, sg := range ss {
			if sg.End-sg.Start != step {
				t.Fatalf("%s: segment %+v is not %d long", key, sg, step)
			}
			for id := sg.Start; id < sg.End; id++ {
				if seen[id] {
					t.Fatalf("%s: ID %d leased twice", key, id)
				}
				seen[id] = true
			}
		}
		total += len(seen)
		if m := maxID(t, s, key); m != 1+int64(len(ss))*step {
			t.Fatalf("%s: max_id %d after %d segments of %d, want %d", key, m, len(ss), step, 1+int64(len(ss))*step)
		}
	}
	t.Logf("%d IDs in %d keys, none twice", total, len(segs))
}

// testManyKeysAllocators: three Allocators on their own handles serve 400
// keys at once from many goroutines, so first loads and preloads of
// different keys share batches, and a small step makes each key load many
// times. Every ID is collected: none twice.
func testManyKeysAllocators(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := openStore(t, open)
	const keys, allocators, goroutines, calls = 400, 3, 8, 1500
	var rows []segment.KeyInfo
	for i := range keys {
		rows = append(rows, segment.KeyInfo{Key: fmt.Sprintf("m%03d", i), Step: 20})
	}
	a0, err := segment.New(s, segment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a0.EnsureKeys(ctx, rows); err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		seen = map[string]map[int64]bool{}
		wg   sync.WaitGroup
	)
	for _, r := range rows {
		seen[r.Key] = map[int64]bool{}
	}
	errs := make(chan error, allocators*goroutines)
	for i := range allocators {
		a, err := segment.New(openStore(t, open), segment.Options{Step: segment.StepPolicy{Fixed: true}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for c := range calls {
					key := rows[(c*7+g*53+i*101)%keys].Key
					id, err := a.Next(ctx, key)
					if err != nil {
						errs <- fmt.Errorf("allocator %d: %s: %w", i, key, err)
						return
					}
					mu.Lock()
					dup := seen[key][id]
					seen[key][id] = true
					mu.Unlock()
					if dup {
						errs <- fmt.Errorf("allocator %d: %s: ID %d issued twice", i, key, id)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
