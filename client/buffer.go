package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// How a key is served.
const (
	modeUnknown int32 = iota // no answer yet: the first refill asks for one ID and learns the strategy
	modeRange                // prefetched ranges (segment)
	modeBatch                // prefetched batches of IDs (snowflake, ticket, redis)
	modeDirect               // one request per call (monotonic, unknown strategies)
	modeText                 // text IDs: refused
)

// batched are the strategies whose IDs may be fetched ahead of use: unique
// whenever they are handed out. Monotonic keys are not (design.md U8), nor
// strategies this client does not know.
var batched = map[string]bool{"snowflake": true, "ticket": true, "redis": true, "segment": true}

// chunk is one range or batch. next is the index of the next ID to hand
// out; whoever's atomic add returns i < n owns ID i, so each is handed out
// once. Past n the chunk is used up.
type chunk struct {
	next  atomic.Int64
	first int64   // a range: IDs first..first+n-1
	n     int64   // IDs in the chunk
	low   int64   // the index whose taker starts a refill (half the chunk)
	ids   []int64 // a batch: the IDs; nil for a range
}

func newChunk(first, n int64, ids []int64) *chunk {
	return &chunk{first: first, n: n, low: n / 2, ids: ids}
}

// flight is one refill; err is set before done is closed.
type flight struct {
	done chan struct{}
	err  error
}

// keyState is one key's buffer: the current chunk, consumed lock-free,
// and a queue of chunks behind it, refilled in the background.
type keyState struct {
	name, token string
	c           *Client
	cur         atomic.Pointer[chunk]
	mode        atomic.Int32

	mu        sync.Mutex
	strategy  string
	queue     []*chunk
	queued    int64         // IDs in queue
	fl        *flight       // the running refill, nil if none
	wake      chan struct{} // closed (and replaced) when a chunk arrives or a refill ends
	batch     int64         // IDs the next refill asks for
	lastStart time.Duration // when the last refill started (client mono time)
	started   bool          // a sized refill ran before
	starved   bool          // a caller found the buffer empty since the last refill started

	refills, refillErrors atomic.Int64
}

func (k *keyState) strategyName() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.strategy
}

func (k *keyState) textErr() error {
	return fmt.Errorf("%w: key %q uses strategy %q, whose IDs are not int64", ErrTextKey, k.name, k.strategyName())
}

func (k *keyState) buffered() int64 {
	k.mu.Lock()
	n := k.queued
	k.mu.Unlock()
	if ch := k.cur.Load(); ch != nil {
		n += max(0, ch.n-ch.next.Load())
	}
	return n
}

// take fills dst from the buffer without waiting and returns how many IDs
// it took.
func (k *keyState) take(dst []int64) int {
	got := 0
	for got < len(dst) {
		ch := k.cur.Load()
		if ch == nil {
			if !k.promote(nil) {
				break
			}
			continue
		}
		want := int64(len(dst) - got)
		end := ch.next.Add(want)
		i := end - want
		if i >= ch.n {
			if !k.promote(ch) {
				break
			}
			continue
		}
		m := min(end, ch.n) - i
		if i <= ch.low && ch.low < i+m {
			k.kick()
		}
		if ch.ids != nil {
			copy(dst[got:], ch.ids[i:i+m])
		} else {
			for j := range m {
				dst[got+int(j)] = ch.first + i + j
			}
		}
		got += int(m)
	}
	return got
}

// promote replaces the used-up chunk old with the next queued one. It
// reports whether the current chunk changed (by this call or another).
func (k *keyState) promote(old *chunk) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cur.Load() != old {
		return true
	}
	if len(k.queue) == 0 {
		return false
	}
	ch := k.queue[0]
	k.queue[0] = nil
	k.queue = k.queue[1:]
	k.queued -= ch.n
	k.cur.Store(ch)
	return true
}

// kick starts a background refill when the buffer runs low: the taker of
// a chunk's low-water index calls it.
func (k *keyState) kick() {
	if m := k.mode.Load(); m == modeDirect || m == modeText {
		return
	}
	k.mu.Lock()
	if k.fl == nil && k.queued < k.batch/2 && !k.c.closed.Load() {
		k.startLocked()
	}
	k.mu.Unlock()
}

// await waits until the buffer may have IDs: at once if it has, else
// until a chunk arrives or the refill ends (starting one if none runs). It
// returns the refill's error when it brought nothing.
func (k *keyState) await(ctx context.Context) error {
	k.mu.Lock()
	if ch := k.cur.Load(); len(k.queue) > 0 || (ch != nil && ch.next.Load() < ch.n) {
		k.mu.Unlock()
		return nil
	}
	k.starved = true
	f := k.fl
	if f == nil {
		f = k.startLocked()
	}
	w := k.wake
	k.mu.Unlock()
	select {
	case <-w:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-f.done:
		return f.err
	default:
		return nil
	}
}

// sizeLocked picks the next refill's size. Like Leaf's dynamic step
// (SegmentIDGenImpl.updateSegmentFromDb: a segment used up in less than
// 15 minutes doubles the step, one that lasted over 30 halves it), a
// refill that comes sooner than RefillEvery after the previous one doubles
// the batch and one that comes later than twice that halves it. A caller
// that found the buffer empty doubles it at once: the buffer must stay
// ahead of consumption (CosId's safe distance grows with hunger).
func (k *keyState) sizeLocked() int64 {
	now := k.c.clk.Mono()
	o := &k.c.opts
	if k.started {
		since := now - k.lastStart
		switch {
		case k.starved, since < o.RefillEvery:
			k.batch *= 2
		case since > 2*o.RefillEvery:
			k.batch /= 2
		}
		k.batch = min(max(k.batch, int64(o.MinBatch)), int64(o.MaxBatch))
	}
	k.started = true
	k.starved = false
	k.lastStart = now
	return k.batch
}

// startLocked starts a refill; k.mu is held.
func (k *keyState) startLocked() *flight {
	f := &flight{done: make(chan struct{})}
	k.fl = f
	size := int64(1)
	if k.mode.Load() != modeUnknown {
		size = k.sizeLocked()
	}
	k.c.wg.Add(1)
	go k.refill(f, size)
	return f
}

// pushLocked queues a chunk and wakes waiters.
func (k *keyState) pushLocked(ch *chunk) {
	k.queue = append(k.queue, ch)
	k.queued += ch.n
	close(k.wake)
	k.wake = make(chan struct{})
}

func (k *keyState) push(ch *chunk) {
	k.mu.Lock()
	k.pushLocked(ch)
	k.mu.Unlock()
}

// RefillEvent describes one refill.
type RefillEvent struct {
	Key    string
	Asked  int64         // IDs asked for
	Got    int64         // IDs received
	Ranges []Range       // for range refills: the ranges received, in order
	Took   time.Duration // from start to end
	Err    error         // why it got fewer than asked, if it did
}

// Range is a block of contiguous IDs [First, First+Count).
type Range struct{ First, Count int64 }

// refill fetches size IDs into the queue, request by request (at most
// maxCount each, lowered when a server refuses that many), and ends the
// flight.
func (k *keyState) refill(f *flight, size int64) {
	c := k.c
	defer c.wg.Done()
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.Timeout)
	defer cancel()
	start := c.clk.Mono()
	ev := RefillEvent{Key: k.name, Asked: size}
	var err error
	switch k.mode.Load() {
	case modeUnknown:
		err = k.probe(ctx)
		if err == nil {
			ev.Got = 1
		}
	case modeRange:
		for ev.Got < size && err == nil {
			n := c.rangeCount(size - ev.Got)
			var r Range
			r, err = do(ctx, c.pool, k.name, func(ctx context.Context, t transport) (Range, error) {
				first, count, err := t.rangeOf(ctx, k.name, k.token, n)
				return Range{first, count}, err
			})
			var ce *Error
			if errors.As(err, &ce) && ce.Status == 400 && ce.Field == "key" && (ce.Code == "unsupported" || ce.Code == "invalid_argument") {
				// A segment key with a step other than 1 has no ranges:
				// fetch batches of IDs instead.
				k.mode.Store(modeBatch)
				err = nil
				break
			}
			if c.fewerInRange(err, n) {
				err = nil
				continue
			}
			if err == nil {
				ev.Got += r.Count
				ev.Ranges = append(ev.Ranges, r)
				k.push(newChunk(r.First, r.Count, nil))
			}
		}
	case modeBatch:
		for ev.Got < size && err == nil {
			n := c.count(size - ev.Got)
			var ids []int64
			ids, err = do(ctx, c.pool, k.name, func(ctx context.Context, t transport) ([]int64, error) {
				_, ids, text, err := t.ids(ctx, k.name, k.token, n)
				if err == nil && text {
					return nil, &Error{Endpoint: "", Message: "a batch key answered text IDs", Retryable: true, Err: errMalformed}
				}
				return ids, err
			})
			if c.fewer(err, n) {
				err = nil
				continue
			}
			if err == nil {
				ev.Got += int64(len(ids))
				k.push(newChunk(0, int64(len(ids)), ids))
			}
		}
	}
	ev.Took, ev.Err = c.clk.Mono()-start, err
	if ev.Got > 0 {
		k.refills.Add(1)
		err = nil
	} else {
		k.refillErrors.Add(1)
	}
	k.mu.Lock()
	f.err = err
	k.fl = nil
	close(f.done)
	close(k.wake)
	k.wake = make(chan struct{})
	k.mu.Unlock()
	if h := c.opts.Hooks.Refill; h != nil {
		h(ev)
	}
}

// probe asks for one ID: its answer names the key's strategy, which says
// how the key is served from then on. The ID is queued like any other,
// except for keys served one request per call, which drop it.
func (k *keyState) probe(ctx context.Context) error {
	type answer struct {
		strategy string
		ids      []int64
		text     bool
	}
	a, err := do(ctx, k.c.pool, k.name, func(ctx context.Context, t transport) (answer, error) {
		s, ids, text, err := t.ids(ctx, k.name, k.token, 1)
		return answer{s, ids, text}, err
	})
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.strategy = a.strategy
	switch {
	case a.text:
		k.mode.Store(modeText)
		return nil
	case a.strategy == "segment":
		k.mode.Store(modeRange)
	case batched[a.strategy]:
		k.mode.Store(modeBatch)
	default:
		// A key served one request per call (monotonic: in real-time
		// order) must not hand the probe's ID to a later call: the call
		// that started the probe may have given up, and an ID answered
		// before other calls were answered is below theirs. It becomes a
		// gap; every call asks for its own.
		k.mode.Store(modeDirect)
		return nil
	}
	k.pushLocked(newChunk(0, 1, a.ids))
	return nil
}
