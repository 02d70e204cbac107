package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
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

// How the prefetch distance follows the draw (see targetLocked).
const (
	// rateWindow is the shortest interval a draw rate is measured over.
	rateWindow = 10 * time.Millisecond
	// rateDecay is the time constant the rate estimate falls with when
	// the draw slows: after a drop it halves about every 1.4 s.
	rateDecay = 2 * time.Second
	// latWindow is how many recent refill requests the refill latency is
	// the slowest of.
	latWindow = 64
)

// chunk is one range or batch. next is the index of the next ID to hand
// out; whoever's atomic add returns i < n owns ID i, so each is handed out
// once. Past n the chunk is used up.
type chunk struct {
	next  atomic.Int64
	first int64   // a range: IDs first..first+n-1
	n     int64   // IDs in the chunk
	low   int64   // the index whose taker checks the prefetch distance (half the chunk)
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

// left is how many IDs the chunk still holds.
func (ch *chunk) left() int64 { return max(0, ch.n-ch.next.Load()) }

// copyTo writes IDs [i, i+m) of the chunk to dst.
func (ch *chunk) copyTo(dst []int64, i, m int64) {
	if ch.ids != nil {
		copy(dst, ch.ids[i:i+m])
		return
	}
	for j := range m {
		dst[j] = ch.first + i + j
	}
}

// waiter is a call that found the buffer of a prefetched key empty. It
// waits in line (keyState.waiters): refilled IDs go to the calls in line
// in the order they joined it before anyone else may take them.
type waiter struct {
	dst []int64 // Next, NextN: IDs wanted; dst[:got] is filled. nil for Range
	got int
	// Range: up to want contiguous IDs; it gets [first, first+count).
	want, count, first int64

	ready chan struct{}      // closed when it leaves the line: served, or sent back (err)
	err   error              // why it was sent back (errLookAgain, ErrClosed); nil when served
	out   bool               // it left the line (k.mu)
	stop  context.CancelFunc // ends its backoff early; nil when not backing off (k.mu)
}

// errLookAgain sends a waiter back to look at its key again: the key
// turned out not to be prefetched.
var errLookAgain = errors.New("client: look again")

// takeFrom serves w from ch as far as ch goes; it reports whether w has
// all it wants.
func (w *waiter) takeFrom(ch *chunk) bool {
	if w.dst == nil {
		want := w.want
		if ch.ids != nil {
			want = 1
		}
		i, m := ch.reserve(want)
		if m == 0 {
			return false
		}
		if ch.ids != nil {
			w.first = ch.ids[i]
		} else {
			w.first = ch.first + i
		}
		w.count = m
		return true
	}
	i, m := ch.reserve(int64(len(w.dst) - w.got))
	if m == 0 {
		return false
	}
	ch.copyTo(w.dst[w.got:], i, m)
	w.got += int(m)
	return w.got == len(w.dst)
}

// keyState is one key's buffer: the current chunk, consumed lock-free,
// and a queue of chunks behind it, refilled in the background by up to
// MaxRefills requests at a time; or, for a key that is not prefetched,
// the requests its calls share (co).
type keyState struct {
	name, token string
	c           *Client
	cur         atomic.Pointer[chunk]
	mode        atomic.Int32
	leader      atomic.Pointer[string] // the node name answers give as the key's leader
	ranged      atomic.Bool            // a direct key's calls are served from ranges (monotonic keys)
	co          coalescer

	mu       sync.Mutex
	strategy string
	epoch    uint64   // counts resets: a refill started before one buffers nothing
	gens     []string // the key's generation on each endpoint (by index), "" before an answer said
	queue    []*chunk // behind cur; ranges in increasing order
	queued   int64    // IDs in queue
	waiters  []*waiter
	failed   chan struct{} // closed (and replaced) when a refill brought nothing
	failErr  error         // that refill's error

	inflight int   // refill requests running
	probing  bool  // one of them is the probe that learns the strategy
	asked    int64 // IDs the running requests asked for
	expected int64 // IDs they are expected to bring (a range answer ends with its segment)
	lastGot  int64 // what range answers bring, about: max(last, previous/2)

	// The draw rate, estimated from the IDs that left the buffer.
	supplied    int64 // IDs that entered the buffer (or went to a waiter)
	rate        float64
	sampled     bool
	sampleAt    time.Duration
	sampleDrawn int64
	hungry      bool // a call joined the line since the last sample

	lats   [latWindow]time.Duration // durations of recent refill requests that brought IDs
	latN   int
	latMax time.Duration // the slowest of them
	target int64         // the last distance computed

	refills, refillErrors atomic.Int64
	requests, resets      atomic.Int64 // shared requests of calls (direct keys); buffers dropped
	waits                 waitStats
}

// heard records what an answer of e said: e's node name, the key's
// leader, and the key's strategy and generation on e. When the key
// changed under the client (a strategy other than the one it learned, or
// a new generation on e: the key was deleted and created again there), it
// drops the buffer and the key is learned anew by the next refill;
// heard then reports true, and the caller must not buffer the answer's
// IDs. Calls waiting on a shared request still get its IDs: that request
// was sent after they began, which is all they need.
//
// epoch is the epoch the refill that asked began in (anyEpoch for shared
// requests of calls). An answer to a refill begun before the latest reset
// is stale: it may carry the generation the reset replaced, computed
// before an answer that carried the new one and overtaken by it, so it
// neither teaches nor resets anything (its IDs are a gap anyway: push
// refuses them). On a loaded machine such answers flipped an endpoint's
// generation back and forth, dropping the buffer four times for one
// re-creation.
func (k *keyState) heard(e *endpoint, m meta, epoch uint64) bool {
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
	if epoch != anyEpoch && epoch != k.epoch {
		return true
	}
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

// anyEpoch is heard's epoch for answers that are never stale: shared
// requests of calls, which were sent after the calls they serve began.
const anyEpoch = ^uint64(0)

// resetLocked drops what the key holds and forgets its strategy: the
// next refill probes it again. Calls in line keep their places. k.mu is
// held.
func (k *keyState) resetLocked() {
	k.epoch++
	k.resets.Add(1)
	k.cur.Store(nil)
	clear(k.queue)
	k.queue, k.queued = nil, 0
	k.strategy = ""
	k.mode.Store(modeUnknown)
	k.ranged.Store(false)
	k.sampled = false
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
	defer k.mu.Unlock()
	return k.levelLocked()
}

// levelLocked is how many IDs the buffer holds; k.mu is held.
func (k *keyState) levelLocked() int64 {
	n := k.queued
	if ch := k.cur.Load(); ch != nil {
		n += ch.left()
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
		ch.copyTo(dst[got:], i, m)
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
	if !k.promoteLocked() {
		return false
	}
	k.topUpLocked()
	return true
}

// promoteLocked makes the first queued chunk current; k.mu is held.
func (k *keyState) promoteLocked() bool {
	if len(k.queue) == 0 {
		return false
	}
	ch := k.queue[0]
	k.queue[0] = nil
	k.queue = k.queue[1:]
	k.queued -= ch.left()
	k.cur.Store(ch)
	return true
}

// kick checks the prefetch distance: the taker of a chunk's low index
// calls it. A caller never waits for the lock here: when it is taken,
// the check runs in a goroutine of its own.
func (k *keyState) kick() {
	if m := k.mode.Load(); m == modeDirect || m == modeText {
		return
	}
	if !k.mu.TryLock() {
		go k.check()
		return
	}
	k.topUpLocked()
	k.mu.Unlock()
}

func (k *keyState) check() {
	k.mu.Lock()
	k.topUpLocked()
	k.mu.Unlock()
}

// observeLocked updates the draw rate estimate. The rate is measured over
// at least rateWindow from the IDs that left the buffer. It rises at once
// to what was measured, and twice that when a call had to wait meanwhile
// (the draw was held back by the supply; CosId's safe distance grows
// with hunger the same way); it falls with the time constant rateDecay.
// k.mu is held.
func (k *keyState) observeLocked(now time.Duration, level int64) {
	drawn := k.supplied - level
	if !k.sampled {
		k.sampled, k.sampleAt, k.sampleDrawn, k.hungry = true, now, drawn, false
		return
	}
	dt := now - k.sampleAt
	if dt < rateWindow {
		return
	}
	r := float64(max(0, drawn-k.sampleDrawn)) / dt.Seconds()
	if k.hungry {
		r *= 2
	}
	est := k.rate * math.Exp(-dt.Seconds()/rateDecay.Seconds())
	k.rate = max(est, r)
	k.sampleAt, k.sampleDrawn, k.hungry = now, drawn, false
}

// targetLocked is the prefetch distance: how many IDs the client keeps
// ahead of its callers (held, or asked for by refills in flight). It
// covers the draw for two refill round trips and a failover:
//
//	rate × (2 × latency + failover)
//
// where latency is the slowest of the last 64 refill requests (their
// p99, about) and failover is how long a request waits before another
// endpoint is asked too (HedgeAfter; AttemptTimeout without hedging). It
// is at least MinBatch and at most MaxPrefetch. k.mu is held.
func (k *keyState) targetLocked() int64 {
	o := &k.c.opts
	failover := o.HedgeAfter
	if failover <= 0 {
		failover = o.AttemptTimeout
	}
	cover := 2*k.latMax + failover
	t := int64(min(k.rate*cover.Seconds(), float64(o.MaxPrefetch)))
	k.target = min(max(t, int64(o.MinBatch)), int64(o.MaxPrefetch))
	return k.target
}

// batchLocked is how many IDs one refill request asks for: what the draw
// takes in RefillEvery, between MinBatch and MaxBatch. k.mu is held.
func (k *keyState) batchLocked() int64 {
	o := &k.c.opts
	b := int64(min(k.rate*o.RefillEvery.Seconds(), float64(o.MaxBatch)))
	return min(max(b, int64(o.MinBatch)), int64(o.MaxBatch))
}

// askLocked is what the next refill request asks for, given level IDs
// held; 0 when it should not be sent. A range request asks for about
// twice what range answers bring (they end with the server's segment),
// so the IDs asked for stay near those that come; all requests in flight
// and the IDs held stay within MaxPrefetch. k.mu is held.
func (k *keyState) askLocked(level int64) int64 {
	o := &k.c.opts
	size := k.batchLocked()
	ask := min(size, int64(o.MaxPrefetch)-level-k.asked)
	switch k.mode.Load() {
	case modeRange:
		if k.lastGot > 0 {
			ask = min(ask, max(2*k.lastGot, int64(o.MinBatch)))
		}
	case modeBatch:
		ask = min(ask, k.c.maxCount.Load())
	}
	if ask < 1 || (ask < min(size, int64(o.MinBatch)) && (level > 0 || k.inflight > 0)) {
		return 0
	}
	return ask
}

// topUpLocked starts refill requests until the IDs held and those
// expected from requests in flight reach the prefetch distance, at most
// MaxRefills at a time. A key whose strategy is not known yet is probed
// once someone waits for it; keys that are not prefetched never refill.
// k.mu is held.
func (k *keyState) topUpLocked() {
	c := k.c
	if c.closed.Load() {
		return
	}
	switch k.mode.Load() {
	case modeUnknown:
		if len(k.waiters) > 0 && !k.probing {
			k.probing = true
			k.startLocked(1, 1)
		}
		return
	case modeRange, modeBatch:
	default:
		return
	}
	level := k.levelLocked()
	k.observeLocked(c.clk.Mono(), level)
	target := k.targetLocked()
	for k.inflight < c.opts.MaxRefills && level+k.expected < target {
		ask := k.askLocked(level)
		if ask == 0 {
			return
		}
		exp := ask
		if k.mode.Load() == modeRange && k.lastGot > 0 {
			exp = min(ask, k.lastGot)
		}
		k.startLocked(ask, exp)
	}
}

// startLocked starts a refill request for ask IDs, expected to bring exp;
// k.mu is held.
func (k *keyState) startLocked(ask, exp int64) {
	k.inflight++
	k.asked += ask
	k.expected += exp
	k.c.wg.Add(1)
	go k.refill(ask, exp, k.epoch)
}

// pushLocked hands a refilled chunk to the calls in line, first come
// first served, and queues what is left. k.mu is held.
func (k *keyState) pushLocked(ch *chunk) {
	k.supplied += ch.n
	for len(k.waiters) > 0 {
		w := k.waiters[0]
		if !w.takeFrom(ch) {
			break // ch is used up; w keeps its place at the head
		}
		k.waiters[0] = nil
		k.waiters = k.waiters[1:]
		k.releaseLocked(w, nil)
	}
	left := ch.left()
	if left == 0 {
		return
	}
	i := len(k.queue)
	if ch.ids == nil {
		// Ranges in increasing order: requests in flight at once answer
		// in any order, and IDs handed out should still trend upwards.
		i, _ = slices.BinarySearchFunc(k.queue, ch.first, func(q *chunk, first int64) int {
			if q.ids != nil || q.first < first {
				return -1
			}
			return 1
		})
	}
	k.queue = slices.Insert(k.queue, i, ch)
	k.queued += left
	if cur := k.cur.Load(); cur == nil || cur.left() == 0 {
		k.promoteLocked()
	}
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

// releaseLocked sends w out of the line: served (err nil) or back to its
// caller with err. k.mu is held.
func (k *keyState) releaseLocked(w *waiter, err error) {
	w.err, w.out = err, true
	close(w.ready)
	if w.stop != nil {
		w.stop()
	}
}

// releaseAllLocked sends every call in line back with err; k.mu is held.
func (k *keyState) releaseAllLocked(err error) {
	for _, w := range k.waiters {
		k.releaseLocked(w, err)
	}
	clear(k.waiters)
	k.waiters = k.waiters[:0]
}

// leave takes w out of the line unless it left already (served or sent
// back); it reports whether it did. IDs already written to w.dst are
// gaps.
func (k *keyState) leave(w *waiter) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if w.out {
		return false
	}
	w.out = true
	if i := slices.Index(k.waiters, w); i >= 0 {
		k.waiters = slices.Delete(k.waiters, i, i+1)
	}
	return true
}

// line serves w from the buffer or, when it is empty, puts w in line
// behind the calls waiting already and waits until refills have served
// it, ctx ends, or a refill fails for good. A retryable failure is waited
// out in line, with backoff, so the call keeps its place. It returns nil
// when w is served, errLookAgain when the key is not prefetched after
// all, or the error to return.
func (k *keyState) line(ctx context.Context, w *waiter) error {
	c := k.c
	k.mu.Lock()
	if len(k.waiters) == 0 {
		for {
			if ch := k.cur.Load(); ch != nil && w.takeFrom(ch) {
				k.topUpLocked()
				k.mu.Unlock()
				return nil
			}
			if !k.promoteLocked() {
				break
			}
		}
	}
	if m := k.mode.Load(); m == modeDirect || m == modeText {
		k.mu.Unlock()
		return errLookAgain
	}
	if c.closed.Load() {
		k.mu.Unlock()
		return ErrClosed
	}
	w.ready = make(chan struct{})
	k.waiters = append(k.waiters, w)
	k.hungry = true
	k.topUpLocked()
	if k.failed == nil {
		k.failed = make(chan struct{})
	}
	fails := k.failed
	k.mu.Unlock()

	start := c.clk.Mono()
	defer func() { k.waits.record(c.clk.Mono() - start) }()
	var last error
	for {
		select {
		case <-w.ready:
			return w.err
		case <-ctx.Done():
			if !k.leave(w) {
				return w.err // served or sent back meanwhile
			}
			return &WaitError{Key: k.name, Ctx: ctx.Err(), Last: last}
		case <-fails:
		}
		k.mu.Lock()
		err := k.failErr
		fails = k.failed
		k.mu.Unlock()
		if c.closed.Load() {
			if !k.leave(w) {
				return w.err
			}
			return ErrClosed
		}
		if !retryable(err) {
			if !k.leave(w) {
				return w.err
			}
			return fmt.Errorf("client: key %q: %w", k.name, err)
		}
		last = err
		d := c.opts.MinBackoff
		var u *unavailable
		if errors.As(err, &u) && u.retryAt > 0 {
			d = max(d, u.retryAt-c.clk.Mono())
		}
		// Back off in line: a refill that serves w meanwhile ends the
		// pause.
		pctx, cancel := context.WithCancel(ctx)
		k.mu.Lock()
		if !w.out {
			w.stop = cancel
		}
		k.mu.Unlock()
		c.clk.Sleep(pctx, d)
		cancel()
		k.mu.Lock()
		w.stop = nil
		if !w.out {
			k.topUpLocked()
		}
		k.mu.Unlock()
	}
}

// RefillEvent describes one refill request.
type RefillEvent struct {
	Key    string
	Asked  int64         // IDs asked for
	Got    int64         // IDs received
	Ranges []Range       // for range refills: the range received
	Took   time.Duration // from start to end
	Err    error         // why it got fewer than asked, if it did
}

// Range is a block of contiguous IDs [First, First+Count).
type Range struct{ First, Count int64 }

// refill sends one refill request for ask IDs (at most maxCount for a
// batch, lowered when a server refuses that many), queues what it brings
// and checks the prefetch distance again. It buffers nothing once the key
// is reset (an answer said it changed): epoch is the key's when the
// refill started. exp is what it was expected to bring.
func (k *keyState) refill(ask, exp int64, epoch uint64) {
	c := k.c
	defer c.wg.Done()
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.Timeout)
	defer cancel()
	start := c.clk.Mono()
	ev := RefillEvent{Key: k.name, Asked: ask}
	var err error
	probe := k.mode.Load() == modeUnknown
	switch k.mode.Load() {
	case modeUnknown:
		err = k.probe(ctx, epoch)
		if err == nil {
			ev.Got = 1
		}
	case modeRange:
		for {
			n := c.rangeCount(ask)
			var r Range
			r, err = do(ctx, c.pool, k.name, nil, func(ctx context.Context, e *endpoint) (Range, error) {
				first, count, m, err := e.t.rangeOf(ctx, k.name, k.token, n)
				if k.heard(e, m, epoch) && err == nil {
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
				continue
			}
			if err == nil && r.Count > 0 && k.push(epoch, newChunk(r.First, r.Count, nil)) {
				ev.Got = r.Count
				ev.Ranges = []Range{r}
			}
			break
		}
	case modeBatch:
		for {
			n := c.count(ask)
			var ids []int64
			ids, err = do(ctx, c.pool, k.name, nil, func(ctx context.Context, e *endpoint) ([]int64, error) {
				ids, text, m, err := e.t.ids(ctx, k.name, k.token, n)
				if k.heard(e, m, epoch) && err == nil {
					return nil, nil // the key changed: these IDs are a gap
				}
				if err == nil && text {
					return nil, &Error{Endpoint: "", Message: "a batch key answered text IDs", Retryable: true, Err: errMalformed}
				}
				return ids, err
			})
			if c.fewer(err, n) {
				continue
			}
			if err == nil && len(ids) > 0 && k.push(epoch, newChunk(0, int64(len(ids)), ids)) {
				ev.Got = int64(len(ids))
			}
			break
		}
	}
	ev.Took, ev.Err = c.clk.Mono()-start, err
	k.mu.Lock()
	k.inflight--
	k.asked -= ask
	k.expected -= exp
	if probe {
		k.probing = false
		if m := k.mode.Load(); err == nil && (m == modeDirect || m == modeText) {
			k.releaseAllLocked(errLookAgain)
		}
	}
	switch {
	case ev.Got > 0:
		k.refills.Add(1)
		k.lats[k.latN%latWindow] = ev.Took
		k.latN++
		k.latMax = slices.Max(k.lats[:min(k.latN, latWindow)])
		if len(ev.Ranges) > 0 {
			k.lastGot = max(ev.Got, k.lastGot/2)
		}
		k.topUpLocked()
	case err != nil:
		// The calls in line back off before they try again: no refill
		// starts here, or a cluster that is down would be asked in a
		// loop.
		k.refillErrors.Add(1)
		k.failErr = err
		if k.failed != nil {
			close(k.failed)
		}
		k.failed = make(chan struct{})
	default:
		// Nothing came and nothing failed: the key changed (or turned
		// out not to be prefetched).
		k.topUpLocked()
	}
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
		k.heard(e, m, epoch)
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

// waitBounds are the upper bounds of the wait histogram's buckets.
var waitBounds = [...]time.Duration{
	50 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// waitStats counts the calls that waited for a refill and how long.
type waitStats struct {
	n, total, max atomic.Int64 // calls; nanoseconds in all; the longest
	buckets       [len(waitBounds)]atomic.Int64
}

func (s *waitStats) record(d time.Duration) {
	s.n.Add(1)
	s.total.Add(int64(d))
	for {
		m := s.max.Load()
		if int64(d) <= m || s.max.CompareAndSwap(m, int64(d)) {
			break
		}
	}
	for i, b := range waitBounds {
		if d <= b {
			s.buckets[i].Add(1)
			break
		}
	}
}
