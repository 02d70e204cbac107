package segment

import (
	"context"
	"fmt"
	"sync"
)

// maxBatch bounds how many loads one AllocateMany carries.
const maxBatch = 1000

// batcher is the Allocator's group commit for a BatchAllocator store:
// loads that wait at the same time go to the store as one AllocateMany.
// One batch is in flight at a time; the loads that arrive meanwhile form
// the next one. A lone load goes at once, so it waits no longer than it
// would for Store.Allocate.
type batcher struct {
	a     *Allocator
	store BatchAllocator

	mu       sync.Mutex
	pending  []*batchWait
	running  bool // a flush goroutine runs
	batches  uint64
	requests uint64
	largest  int
}

// batchWait is one load waiting in a batch.
type batchWait struct {
	ctx  context.Context
	req  AllocateRequest
	warm bool            // queued by Warm: goes after the loads callers wait for
	done chan Allocation // buffered: the flush never blocks on a waiter that left
}

// BatchStats counts the Allocator's batched loads (zero when its store is
// not a BatchAllocator).
type BatchStats struct {
	// Batches is the number of AllocateMany calls; Requests the loads they
	// carried, Largest the most in one call.
	Batches, Requests uint64
	Largest           int
	// Pending is the loads waiting for the next call.
	Pending int
}

// BatchStats returns the counts of the loads batched so far.
func (a *Allocator) BatchStats() BatchStats {
	b := a.batch
	if b == nil {
		return BatchStats{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return BatchStats{Batches: b.batches, Requests: b.requests, Largest: b.largest, Pending: len(b.pending)}
}

// allocate leases one segment of key in the next batch. A caller whose ctx
// ends before its batch is sent is left out of it; one whose ctx ends
// while the batch is in flight returns and its segment, if leased,
// becomes a gap.
func (b *batcher) allocate(ctx context.Context, key string, step int64) (Segment, error) {
	return b.enqueue(ctx, []AllocateRequest{{Key: key, Step: step}}, false)[0].wait(ctx)
}

// enqueue queues reqs together (they go in one batch when they fit) and
// returns their waits, in order; warm ones after the others. ctx ending before the batch is sent
// leaves a request out of it.
func (b *batcher) enqueue(ctx context.Context, reqs []AllocateRequest, warm bool) []*batchWait {
	ws := make([]*batchWait, len(reqs))
	for i, r := range reqs {
		ws[i] = &batchWait{ctx: ctx, req: r, warm: warm, done: make(chan Allocation, 1)}
	}
	b.mu.Lock()
	b.pending = append(b.pending, ws...)
	if !b.running {
		b.running = true
		b.a.wg.Add(1) // the caller is a loader the WaitGroup counts: never zero here
		go b.flush()
	}
	b.mu.Unlock()
	return ws
}

// wait returns the request's answer, or ctx's error first.
func (w *batchWait) wait(ctx context.Context) (Segment, error) {
	select {
	case r := <-w.done:
		return r.Segment, r.Err
	case <-ctx.Done():
		return Segment{}, ctx.Err()
	}
}

// flush sends batches until no load waits.
func (b *batcher) flush() {
	defer b.a.wg.Done()
	for {
		b.mu.Lock()
		// Take the waiters in order, the loads callers wait for before
		// Warm's, each key once (a key deleted and asked for again can
		// have two loads waiting: the second goes in the next batch),
		// leaving out those whose caller gave up.
		var batch, rest []*batchWait
		in := make(map[string]bool, min(len(b.pending), maxBatch))
		for _, warm := range []bool{false, true} {
			for _, w := range b.pending {
				switch {
				case w.warm != warm:
				case w.ctx.Err() != nil:
				case len(batch) < maxBatch && !in[w.req.Key]:
					in[w.req.Key] = true
					batch = append(batch, w)
				default:
					rest = append(rest, w)
				}
			}
		}
		b.pending = rest
		if len(batch) == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		b.batches++
		b.requests += uint64(len(batch))
		b.largest = max(b.largest, len(batch))
		b.mu.Unlock()
		b.send(batch)
	}
}

// send makes one AllocateMany call and hands each waiter its answer.
func (b *batcher) send(batch []*batchWait) {
	a := b.a
	a.checkIdentity()
	reqs := make([]AllocateRequest, len(batch))
	for i, w := range batch {
		reqs[i] = w.req
	}
	ctx, cancel := context.WithTimeout(a.ctx, a.opts.LoadTimeout)
	res, err := b.store.AllocateMany(ctx, reqs)
	cancel()
	if err == nil && len(res) != len(reqs) {
		err = fmt.Errorf("segment: store answered %d allocations for %d requests", len(res), len(reqs))
	}
	for i, w := range batch {
		if err != nil {
			w.done <- Allocation{Err: err}
		} else {
			w.done <- res[i]
		}
	}
}
