package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Calls on a key that is not prefetched (a monotonic key: strictly
// increasing across the cluster in real-time order) share requests, and
// stay linearizable:
//
//   - A call joins the batch that is gathering. A batch is sealed and sent
//     when one of the key's Options.MaxInFlight request slots is free, so
//     a request carries only calls that began before it was sent; a call
//     that arrives while every slot is busy waits for the next request.
//   - The answer is split among the batch's calls in the order they
//     joined. Each call returns only after the answer came, so if call A
//     returned before call B began, B's request was sent after A's answer
//     arrived, and the server (linearizable itself) answered B above A.
//   - A call whose context ends leaves its batch. IDs meant for it are
//     dropped (gaps), never handed to a later call: they were issued
//     before answers that later calls may already have seen.
//
// Monotonic keys are asked for ranges (/v1/keys/{key}/range: two numbers
// whatever the count); other keys served this way for batches of IDs.

// coalescer is the shared requests of one key.
type coalescer struct {
	mu       sync.Mutex
	gather   *batch // the batch calls join; nil when none is gathering
	inflight int    // flushers running, each sending one batch at a time
	size     int    // the next batch's capacity: the recent largest batch, decaying
}

// batch is the calls one request (or several, when the calls want more
// than one request may carry) is sent for.
type batch struct {
	calls []call
	done  chan struct{} // closed once every call is served, gone or failed
	err   error         // why calls were left short; set before done is closed
}

// Call states. A waiting call becomes served when the sender writes its
// first ID, or gone when its caller leaves first; never both.
const (
	callWaiting int32 = iota
	callServed
	callGone
)

// call is one call's place in a batch: it wants len(dst) IDs, or, with
// dst nil (Next), one, written to one.
type call struct {
	dst   []int64
	one   int64
	n     int   // IDs written (by the sender; read after done)
	state int32 // atomic: callWaiting, callServed or callGone
}

func (cl *call) want() int {
	if cl.dst == nil {
		return 1
	}
	return len(cl.dst)
}

// coalescedOne is coalesced for one ID (Next): no slice to allocate.
func (k *keyState) coalescedOne(ctx context.Context) (int64, error) {
	b, i := k.join(nil)
	if err := k.awaitBatch(ctx, b, i); err != nil {
		return 0, err
	}
	if cl := &b.calls[i]; cl.n == 1 {
		return cl.one, nil
	}
	return 0, b.failure()
}

// coalesced fills dst from requests shared with concurrent calls; it
// returns how many IDs it wrote and, when fewer than len(dst), why.
func (k *keyState) coalesced(ctx context.Context, dst []int64) (int, error) {
	b, i := k.join(dst)
	if err := k.awaitBatch(ctx, b, i); err != nil {
		return 0, err
	}
	if cl := &b.calls[i]; cl.n == len(dst) {
		return cl.n, nil
	}
	return b.calls[i].n, b.failure()
}

// failure is why a call of b was left short.
func (b *batch) failure() error {
	if b.err == nil {
		return errors.New("client: a shared request ended without IDs for every call") // not reached
	}
	return b.err
}

// join adds a call for dst (nil: one ID) to the gathering batch, starting
// a flusher when a request slot is free, and returns the batch and the
// call's index in it.
func (k *keyState) join(dst []int64) (*batch, int) {
	co := &k.co
	co.mu.Lock()
	b := co.gather
	if b == nil {
		b = &batch{done: make(chan struct{}), calls: make([]call, 0, max(co.size, 4))}
		co.gather = b
	}
	i := len(b.calls)
	b.calls = append(b.calls, call{dst: dst})
	start := co.inflight < k.c.opts.MaxInFlight
	if start {
		co.inflight++
		k.c.wg.Add(1)
	}
	co.mu.Unlock()
	if start {
		go k.flush()
	}
	return b, i
}

// awaitBatch waits until b is served, or the caller's ctx ends first: then the
// call leaves (ctx's error), unless the sender is writing its IDs already.
func (k *keyState) awaitBatch(ctx context.Context, b *batch, i int) error {
	done := ctx.Done()
	if done == nil { // context.Background: nothing to select
		<-b.done
		return nil
	}
	select {
	case <-b.done:
		return nil
	case <-done:
	}
	// Under co.mu: the batch may still be gathering, and a join may be
	// moving its calls.
	k.co.mu.Lock()
	left := atomic.CompareAndSwapInt32(&b.calls[i].state, callWaiting, callGone)
	k.co.mu.Unlock()
	if left {
		return ctx.Err()
	}
	<-b.done // the sender is writing this call's IDs: it ends soon
	return nil
}

// flush sends gathered batches one at a time until none is gathering.
func (k *keyState) flush() {
	defer k.c.wg.Done()
	co := &k.co
	for {
		co.mu.Lock()
		b := co.gather
		co.gather = nil
		if b == nil {
			co.inflight--
			co.mu.Unlock()
			return
		}
		co.size = max(len(b.calls), co.size-co.size/8)
		co.mu.Unlock()
		k.send(b)
	}
}

// send serves a sealed batch: requests (each at most what one request may
// carry) until every call that has not left is full, or one fails.
func (k *keyState) send(b *batch) {
	c := k.c
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.Timeout)
	defer cancel()
	i := 0 // the first call not yet full
	var err error
	for {
		want := int64(0)
		for j := i; j < len(b.calls); j++ {
			if cl := &b.calls[j]; atomic.LoadInt32(&cl.state) != callGone {
				want += int64(cl.want() - cl.n)
			}
		}
		if want == 0 {
			break
		}
		var first, count int64
		var ids []int64
		if first, count, ids, err = k.request(ctx, want); err == nil && count < 1 {
			// The transports refuse an answer without IDs; were one taken
			// as a success, the loop would ask again at once, without a
			// pause, until the deadline. It fails the batch instead: the
			// calls back off.
			err = &Error{Message: fmt.Sprintf("key %q: an answer without IDs", k.name), Retryable: true, Err: errMalformed}
		}
		if err != nil {
			break
		}
		// Split in the order the calls joined; a call that left gets
		// nothing (its share is a gap), and what is left over too.
		pos := int64(0)
		for pos < count && i < len(b.calls) {
			cl := &b.calls[i]
			if cl.n == 0 && !atomic.CompareAndSwapInt32(&cl.state, callWaiting, callServed) {
				i++
				continue
			}
			m := min(int64(cl.want()-cl.n), count-pos)
			switch {
			case cl.dst == nil:
				cl.one = first + pos
				if ids != nil {
					cl.one = ids[pos]
				}
			case ids != nil:
				copy(cl.dst[cl.n:], ids[pos:pos+m])
			default:
				for j := range m {
					cl.dst[cl.n+int(j)] = first + pos + j
				}
			}
			cl.n += int(m)
			pos += m
			if cl.n == cl.want() {
				i++
			}
		}
	}
	b.err = err
	close(b.done)
}

// request asks for want IDs (at most what one request carries) of a key
// whose calls share requests: a range for a monotonic key, else a batch
// of IDs. It returns a range [first, first+count) with ids nil, or the
// count IDs in ids. The key's leader, when known, is asked first.
func (k *keyState) request(ctx context.Context, want int64) (first, count int64, ids []int64, err error) {
	c := k.c
	for {
		if k.ranged.Load() {
			n := c.rangeCount(want)
			var r Range
			r, err = do(ctx, c.pool, k.name, k.leaderEndpoint(), func(ctx context.Context, e *endpoint) (Range, error) {
				k.requests.Add(1)
				first, count, m, err := e.t.rangeOf(ctx, k.name, k.token, n)
				k.heard(e, m, anyEpoch)
				return Range{first, count}, err
			})
			var ce *Error
			if errors.As(err, &ce) && ce.Status == 400 && ce.Field == "key" && (ce.Code == "unsupported" || ce.Code == "invalid_argument") {
				k.ranged.Store(false) // no ranges after all: batches of IDs
				continue
			}
			if c.fewerInRange(err, n) {
				continue
			}
			return r.First, r.Count, nil, err
		}
		n := c.count(want)
		ids, err = do(ctx, c.pool, k.name, k.leaderEndpoint(), func(ctx context.Context, e *endpoint) ([]int64, error) {
			k.requests.Add(1)
			ids, text, m, err := e.t.ids(ctx, k.name, k.token, n)
			k.heard(e, m, anyEpoch)
			if err == nil && text {
				return nil, k.textErr()
			}
			return ids, err
		})
		if c.fewer(err, n) {
			continue
		}
		return 0, int64(len(ids)), ids, err
	}
}
