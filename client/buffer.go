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

// reserve claims up to want IDs of the chunk: indexes [i, i+m), m >= 1,
// or m == 0 when it is used up. Unlike an atomic add of want, it never
// moves the counter past n, so however often callers retry a used-up
// chunk (Range of 2^40 on a dry buffer, every backoff), the counter
// cannot overflow and wrap into IDs handed out before. (Next adds 1: it
// would take 2^63 calls.)
func (ch *chunk) reserve(want int64) (i, m int64) {
	for {
		cur := ch.next.Load()
		if cur >= ch.n {
			return cur, 0
		}
		m := min(want, ch.n-cur)
		if ch.next.CompareAndSwap(cur, cur+m) {
			return cur, m
		}
	}
}

// flight is one refill; err is set before done is closed.
type flight struct {
	done chan struct{}
	err  error
}

// keyState is one key's buffer: the current chunk, consumed lock-free,
// and a queue of chunks behind it, refilled in the background; or, for a
// key that is not prefetched, the requests its calls share (co).
type keyState struct {
	name, token string
	c           *Client
	cur         atomic.Pointer[chunk]
	mode        atomic.Int32
	leader      atomic.Pointer[string] // the node name answers give as the key's leader
	ranged      atomic.Bool            // a direct key's calls are served from ranges (monotonic keys)
	co          coalescer

	mu        sync.Mutex
	strategy  string
	epoch     uint64   // counts resets: a refill started before one buffers nothing
	gens      []string // the key's generation on each endpoint (by index), "" before an answer said
	queue     []*chunk
	queued    int64         // IDs in queue
	fl        *flight       // the running refill, nil if none
	wake      chan struct{} // closed (and replaced) when a chunk arrives or a refill ends
	batch     int64         // IDs the next refill asks for
	lastStart time.Duration // when the last refill started (client mono time)
	started   bool          // a sized refill ran before
	starved   bool          // a caller found the buffer empty since the last refill started

	refills, refillErrors atomic.Int64
	requests, resets      atomic.Int64 // shared requests of calls (direct keys); buffers dropped
}

// heard records what an answer of e said: e's node name, the key's
// leader, and the key's strategy and generation on e. When the key
// changed under the client (a strategy other than the one it learned, or
// a new generation on e: the key was deleted and created again there), it
// drops the buffer and the key is learned anew by the next refill;
// heard then reports true, and the caller must not buffer the answer's
// IDs. Calls waiting on a shared request still get its IDs: that request
// was sent after they began, which is all they need.
func (k *keyState) heard(e *endpoint, m meta) bool {
	e.learn(m.node)
	if m.leader != "" {
		if p := k.leader.Load(); p == nil || *p != m.leader {
			l := m.leader
			k.leader.Store(&l)
		}
	}
	if m.strategy == "" && m.generation == "" {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	changed := m.strategy != "" && k.strategy != "" && m.strategy != k.strategy
	if m.generation != "" {
		if k.gens == nil {
			k.gens = make([]string, len(k.c.pool.eps))
		}
		if old := k.gens[e.idx]; old != "" && old != m.generation {
			changed = true
		}
		k.gens[e.idx] = m.generation
	}
	if changed {
		k.resetLocked()
	}
	return changed
}

// resetLocked drops what the key holds and forgets its strategy: the
// next call probes it again. k.mu is held.
func (k *keyState) resetLocked() {
	k.epoch++
	k.resets.Add(1)
	k.cur.Store(nil)
	clear(k.queue)
	k.queue, k.queued = nil, 0
	k.strategy = ""
	k.mode.Store(modeUnknown)
	k.ranged.Store(false)
	k.batch, k.started, k.starved = int64(k.c.opts.MinBatch), false, false
	close(k.wake)
	k.wake = make(chan struct{})
}

// leaderEndpoint is the endpoint of the node the key's answers name as
// its leader, nil when none is known (or no endpoint has said it is
// that node).
func (k *keyState) leaderEndpoint() *endpoint {
	p := k.leader.Load()
	if p == nil {
		return nil
	}
	return k.c.pool.byNode(*p)
}

func (k *keyState) leaderName() string {
	if p := k.leader.Load(); p != nil {
		return *p
	}
	return ""
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
		i, m := ch.reserve(int64(len(dst) - got))
		if m == 0 {
			if !k.promote(ch) {
				break
			}
			continue
		}
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
	go k.refill(f, size, k.epoch)
	return f
}

// pushLocked queues a chunk and wakes waiters.
func (k *keyState) pushLocked(ch *chunk) {
	k.queue = append(k.queue, ch)
	k.queued += ch.n
	close(k.wake)
	k.wake = make(chan struct{})
}

// push queues a chunk fetched by a refill that started at epoch, unless
// the key was reset since (its IDs become a gap); it reports whether it
// did.
func (k *keyState) push(epoch uint64, ch *chunk) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.epoch != epoch {
		return false
	}
	k.pushLocked(ch)
	return true
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
// flight. It stops, buffering nothing more, once the key is reset (an
// answer said it changed): epoch is the key's when the refill started.
func (k *keyState) refill(f *flight, size int64, epoch uint64) {
	c := k.c
	defer c.wg.Done()
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.Timeout)
	defer cancel()
	start := c.clk.Mono()
	ev := RefillEvent{Key: k.name, Asked: size}
	var err error
	// stale reports that the key was reset since the refill started.
	stale := func() bool {
		k.mu.Lock()
		defer k.mu.Unlock()
		return k.epoch != epoch
	}
	switch k.mode.Load() {
	case modeUnknown:
		err = k.probe(ctx, epoch)
		if err == nil {
			ev.Got = 1
		}
	case modeRange:
		for ev.Got < size && err == nil && !stale() {
			n := c.rangeCount(size - ev.Got)
			var r Range
			r, err = do(ctx, c.pool, k.name, nil, func(ctx context.Context, e *endpoint) (Range, error) {
				first, count, m, err := e.t.rangeOf(ctx, k.name, k.token, n)
				if k.heard(e, m) && err == nil {
					count = 0 // the key changed: these IDs are a gap
				}
				return Range{first, count}, err
			})
			var ce *Error
			if errors.As(err, &ce) && ce.Status == 400 && ce.Field == "key" && (ce.Code == "unsupported" || ce.Code == "invalid_argument") {
				// A segment key with a step other than 1 has no ranges:
				// fetch batches of IDs instead.
				k.mode.CompareAndSwap(modeRange, modeBatch)
				err = nil
				break
			}
			if c.fewerInRange(err, n) {
				err = nil
				continue
			}
			if err == nil {
				if r.Count == 0 || !k.push(epoch, newChunk(r.First, r.Count, nil)) {
					break
				}
				ev.Got += r.Count
				ev.Ranges = append(ev.Ranges, r)
			}
		}
	case modeBatch:
		for ev.Got < size && err == nil && !stale() {
			n := c.count(size - ev.Got)
			var ids []int64
			ids, err = do(ctx, c.pool, k.name, nil, func(ctx context.Context, e *endpoint) ([]int64, error) {
				ids, text, m, err := e.t.ids(ctx, k.name, k.token, n)
				if k.heard(e, m) && err == nil {
					return nil, nil // the key changed: these IDs are a gap
				}
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
				if len(ids) == 0 || !k.push(epoch, newChunk(0, int64(len(ids)), ids)) {
					break
				}
				ev.Got += int64(len(ids))
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
func (k *keyState) probe(ctx context.Context, epoch uint64) error {
	type answer struct {
		strategy string
		ids      []int64
		text     bool
	}
	a, err := do(ctx, k.c.pool, k.name, nil, func(ctx context.Context, e *endpoint) (answer, error) {
		ids, text, m, err := e.t.ids(ctx, k.name, k.token, 1)
		k.heard(e, m)
		return answer{m.strategy, ids, text}, err
	})
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.epoch != epoch {
		return nil // reset meanwhile: the next refill probes again
	}
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
		//
		// A monotonic key hands out a range whole: calls that share a
		// request ask for a range, whose answer is two numbers.
		k.ranged.Store(a.strategy == "monotonic")
		k.mode.Store(modeDirect)
		return nil
	}
	k.pushLocked(newChunk(0, 1, a.ids))
	return nil
}
