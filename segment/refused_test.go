package segment_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/witness"
)

// flakyWitness is a witness whose claims fail while down is set: the
// coordinator out of one node's reach.
type flakyWitness struct {
	segment.Witness
	down atomic.Bool
}

var errWitnessDown = errors.New("fake: witness unreachable")

func (w *flakyWitness) Claim(ctx context.Context, space string, from, to int64) (int64, bool, error) {
	if w.down.Load() {
		return 0, false, errWitnessDown
	}
	return w.Witness.Claim(ctx, space, from, to)
}

// TestWitnessClaimFailedNotServed: a segment the witness did not let a
// node claim (the claim failed: the coordinator out of reach) is not
// served. Node A serves [1, 21); the store goes back to 5 (a failover to
// a lagging replica) while node B's claims fail: B's calls fail, naming
// the witness, instead of serving the store's [5, 15), which A served.
// Once B reaches the witness again, its IDs start above A's.
func TestWitnessClaimFailedNotServed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFake()
	if err := f.Create(ctx, segment.KeyInfo{Key: "k", Step: 10}); err != nil {
		t.Fatal(err)
	}
	w, err := witness.OpenFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	node := func(wit segment.Witness, clk *clock.Fake) *segment.Key {
		// LoadAt 1: a segment is loaded when the last one is used up,
		// so nothing loads behind the test's back.
		a, err := segment.New(f, segment.Options{Witness: wit, Clock: clk, Step: segment.StepPolicy{Fixed: true},
			RetryMin: time.Second, RetryMax: time.Second, LoadAt: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		k, _ := a.Key("k")
		return k
	}
	served := map[int64]bool{}
	for _, id := range take(t, node(w, clock.NewFake(epoch)), 20) {
		served[id] = true
	}
	forget(f, "k", 5)
	fw := &flakyWitness{Witness: w}
	fw.down.Store(true)
	clkB := clock.NewFake(epoch)
	b := node(fw, clkB)
	for range 3 {
		id, err := b.Next(ctx)
		if err == nil {
			t.Fatalf("node B answered %d although every claim it made failed (A served [1, 21); a repeat: %v)", id, served[id])
		}
		if !errors.Is(err, errWitnessDown) || !errors.Is(err, segment.ErrUnavailable) {
			t.Fatalf("Next while the witness is unreachable = %v; want ErrUnavailable wrapping the witness's error", err)
		}
	}
	fw.down.Store(false)
	if err := clkB.WaitForSleepers(ctx, 1); err != nil { // the loader's backoff
		t.Fatal(err)
	}
	clkB.Advance(time.Second)
	id := nextAfterLoad(t, b)
	for _, id := range append([]int64{id}, take(t, b, 30)...) {
		if served[id] || id <= 20 {
			t.Fatalf("node B issued %d after the witness came back; node A served [1, 21)", id)
		}
	}
}

// badAnswers is the fake store answering bad while it is set, instead of
// leasing a segment.
type badAnswers struct {
	*fakeStore
	bad   atomic.Pointer[segment.Segment]
	calls atomic.Int64
}

func (s *badAnswers) Allocate(ctx context.Context, key string, step int64) (segment.Segment, error) {
	s.calls.Add(1)
	if b := s.bad.Load(); b != nil {
		return *b, nil
	}
	return s.fakeStore.Allocate(ctx, key, step)
}

// TestStoreBadSegmentRefused: a store answer that is no segment (empty,
// reversed, or without a step) is a failed load, never a buffer: the
// callers past the buffers get an error that says so at once, the loader
// backs off instead of asking again in a loop, and once the store answers
// properly IDs go on above those served.
func TestStoreBadSegmentRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		seg  segment.Segment
	}{
		{"empty", segment.Segment{Start: 100, End: 100, Step: 10}},
		{"reversed", segment.Segment{Start: 100, End: 50, Step: 10}},
		{"no step", segment.Segment{Start: 100, End: 110, Step: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := &badAnswers{fakeStore: newFake()}
			if err := s.Create(ctx, segment.KeyInfo{Key: "k", Step: 10}); err != nil {
				t.Fatal(err)
			}
			clk := clock.NewFake(epoch)
			a, err := segment.New(s, segment.Options{Clock: clk, Step: segment.StepPolicy{Fixed: true},
				RetryMin: time.Second, RetryMax: time.Second, LoadAt: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			k, _ := a.Key("k")
			served := take(t, k, 10) // [1, 11), used up; no load started (LoadAt 1)
			s.bad.Store(&tc.seg)
			before := s.calls.Load()
			wctx, cancel := context.WithTimeout(ctx, waitTimeout)
			defer cancel()
			id, err := k.Next(wctx)
			if err == nil {
				t.Fatalf("Next = %d from the store's answer %+v", id, tc.seg)
			}
			if errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, segment.ErrUnavailable) || !strings.Contains(err.Error(), "empty segment") {
				t.Fatalf("Next on the answer %+v = %v; want ErrUnavailable at once, saying the store returned an empty segment", tc.seg, err)
			}
			if n := s.calls.Load() - before; n != 1 {
				t.Fatalf("the store was asked %d times before its backoff; want 1", n)
			}
			s.bad.Store(nil)
			if err := clk.WaitForSleepers(ctx, 1); err != nil {
				t.Fatal(err)
			}
			clk.Advance(time.Second)
			if id := nextAfterLoad(t, k); id <= served[len(served)-1] {
				t.Fatalf("Next after the store recovered = %d; want above %d", id, served[len(served)-1])
			}
		})
	}
}

// shortBatch is the batching fake store answering one allocation fewer
// than it was asked for.
type shortBatch struct{ *batchFake }

func (s shortBatch) AllocateMany(ctx context.Context, reqs []segment.AllocateRequest) ([]segment.Allocation, error) {
	out, err := s.batchFake.AllocateMany(ctx, reqs)
	if err != nil || len(out) == 0 {
		return out, err
	}
	return out[:len(out)-1], nil
}

// TestBatchShortAnswerRefused: a batch answer that does not hold one
// allocation per request cannot be matched to the keys that asked: every
// load of the batch fails, saying so, and nothing is served from it.
func TestBatchShortAnswerRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := shortBatch{newBatchFake()}
	if err := s.Create(ctx, segment.KeyInfo{Key: "k", Step: 10}); err != nil {
		t.Fatal(err)
	}
	a, err := segment.New(s, segment.Options{Clock: clock.NewFake(epoch)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	id, err := a.Next(ctx, "k")
	if err == nil || !errors.Is(err, segment.ErrUnavailable) || !strings.Contains(err.Error(), "store answered 0 allocations for 1 requests") {
		t.Fatalf("Next on a batch answer short of one allocation = %d, %v; want ErrUnavailable naming the short answer", id, err)
	}
}
