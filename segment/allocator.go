package segment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Allocator serves IDs for many keys from one Store, each key from its own
// double buffer. It is safe for concurrent use.
type Allocator struct {
	store Store
	opts  Options

	ctx    context.Context // cancelled by Close; parent of every load
	cancel context.CancelFunc
	wg     sync.WaitGroup // loaders
	closed atomic.Bool

	mu   sync.Mutex // serialises adding and forgetting keys
	keys sync.Map   // name -> *Key; lookups take no lock. A copy-on-write
	// map made adding n keys cost n^2/2 copies: 57 % of the start-up CPU
	// of 10,000 keys.

	knownMu sync.Mutex
	known   map[string]KeyInfo // rows EnsureKeys saw, until Known reads them

	readyMu   sync.Mutex  // guards the listings RowReady shares
	readyCur  *rowListing // the last finished listing
	readyNext *rowListing // the listing in flight, if any

	batch *batcher // group commit, when the store is a BatchAllocator

	idMu     sync.Mutex    // guards the fields below; never held over I/O
	idCall   chan struct{} // closed when the Identity call in flight ends; nil if none
	identity string        // the store's server as last seen ("" before the first)
	idChecks uint64
	idSwaps  uint64 // changes of identity seen
}

// New returns an Allocator over store. It does no I/O: each key's first
// segment is loaded by its first call. When store is a BatchAllocator, the
// loads of different keys that wait at the same time share one
// AllocateMany (group commit).
func New(store Store, opts Options) (*Allocator, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: store is nil", ErrBadOptions)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	a := &Allocator{store: store, opts: o}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	if b, ok := store.(BatchAllocator); ok {
		a.batch = &batcher{a: a, store: b}
	}
	return a, nil
}

// Store returns the store the Allocator leases from (for listing its rows).
func (a *Allocator) Store() Store { return a.store }

// Close stops background loads and makes every later call fail with
// ErrClosed. IDs left in the buffers become gaps. With Options.CloseStore
// it closes the store too.
func (a *Allocator) Close() error {
	if !a.closed.CompareAndSwap(false, true) {
		return nil
	}
	a.mu.Lock()
	keys := a.all()
	a.mu.Unlock()
	for _, k := range keys {
		k.mu.Lock()
		k.cur.Store(exhausted)
		k.next = nil
		k.broadcastLocked()
		k.mu.Unlock()
	}
	a.cancel()
	a.wg.Wait()
	if a.opts.CloseStore {
		return a.store.Close()
	}
	return nil
}

// Key returns the handle for key, which callers on a hot path may keep:
// its methods skip the lookup by name. It does no I/O; an unknown key
// shows as ErrUnknownKey on the first call. Errors: ErrBadKey, ErrClosed.
func (a *Allocator) Key(key string) (*Key, error) {
	if k, ok := a.keys.Load(key); ok {
		return k.(*Key), nil
	}
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed.Load() {
		return nil, ErrClosed
	}
	if k, ok := a.keys.Load(key); ok {
		return k.(*Key), nil
	}
	k := &Key{a: a, name: key}
	k.cur.Store(exhausted)
	a.keys.Store(key, k)
	return k, nil
}

// all returns every cached key handle.
func (a *Allocator) all() []*Key {
	var out []*Key
	a.keys.Range(func(_, v any) bool {
		out = append(out, v.(*Key))
		return true
	})
	return out
}

// cached returns the cached handle of key, nil if none.
func (a *Allocator) cached(key string) *Key {
	if k, ok := a.keys.Load(key); ok {
		return k.(*Key)
	}
	return nil
}

// forget drops k from the cache if it is still the cached handle.
func (a *Allocator) forget(k *Key) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.keys.CompareAndDelete(k.name, k)
}

// Next returns the next ID of key. See Key.Next.
func (a *Allocator) Next(ctx context.Context, key string) (int64, error) {
	k, err := a.Key(key)
	if err != nil {
		return 0, err
	}
	return k.Next(ctx)
}

// NextN fills dst with IDs of key. See Key.NextN.
func (a *Allocator) NextN(ctx context.Context, key string, dst []int64) (int, error) {
	k, err := a.Key(key)
	if err != nil {
		return 0, err
	}
	return k.NextN(ctx, dst)
}

// Range returns a block of up to n IDs of key. See Key.Range.
func (a *Allocator) Range(ctx context.Context, key string, n int64) (Block, error) {
	k, err := a.Key(key)
	if err != nil {
		return Block{}, err
	}
	return k.Range(ctx, n)
}

// Key is one key's double buffer. Obtain it from Allocator.Key; it is safe
// for concurrent use and stays valid until the Allocator is closed.
type Key struct {
	cur  atomic.Pointer[buffer] // the buffer Next takes from
	a    *Allocator
	name string

	mu         sync.Mutex
	next       *buffer       // loaded, waiting for cur to run out
	loading    bool          // a loader goroutine runs
	lastErr    error         // last load's error; nil after a success
	attempts   uint64        // finished load attempts
	changed    chan struct{} // closed when next/lastErr change; made by the first waiter (nil until then)
	loaded     bool          // a load has succeeded
	step       int64         // length of the last segment leased
	minStep    int64         // the key's configured step, per the store
	lastLoad   time.Duration // Mono at the last successful load
	high       int64         // end of the highest segment leased
	slot       int           // Leaf's buffer position, toggled per switch
	loads      uint64
	loadErrors uint64
	waits      uint64        // callers that found both buffers empty
	storeErrs  uint64        // failed loads the store may recover from (not permanent)
	failing    bool          // the last load failed with such an error
	failSince  time.Duration // Mono at the first failure of the current outage
	failCount  uint64        // failed loads in the current outage
	lastLat    time.Duration
	totalLat   time.Duration
	wentBack   uint64 // times the store answered below the mark and was raised
	lastBack   [2]int64
}

// buffer is one segment being served. pos is the next ID to hand out;
// IDs are pos, pos+delta, ... below end.
type buffer struct {
	pos       atomic.Int64
	end       int64
	start     int64 // segment start as leased
	first     int64 // first ID: start moved up to the remainder
	trigger   int64 // once an ID >= trigger is issued, load the next segment
	delta     int64
	triggered atomic.Bool
	slot      int
}

// exhausted is an empty buffer every key starts with and returns to when
// the Allocator closes.
var exhausted = func() *buffer {
	b := &buffer{delta: 1}
	b.triggered.Store(true)
	return b
}()

// Name returns the key's name.
func (k *Key) Name() string { return k.name }

// Next returns the key's next ID. IDs from one Key are strictly increasing
// in the order calls return, and never repeat across Allocators sharing the
// store. From memory it takes one compare-and-swap and does not allocate;
// it waits only when both buffers are empty: for the store (bounded by ctx
// and Options.LoadTimeout) or not at all when the last load failed, in
// which case the error wraps ErrUnavailable and the store's error.
func (k *Key) Next(ctx context.Context) (int64, error) {
	for {
		b := k.cur.Load()
		// One atomic add claims p. Callers that overshoot end claim
		// nothing; a pos that wrapped past 2^63-1 lands below first.
		p := b.pos.Add(b.delta) - b.delta
		if p < b.end && p >= b.first {
			if p >= b.trigger && !b.triggered.Load() {
				k.triggerLoad(b)
			}
			return p, nil
		}
		if err := k.refill(ctx); err != nil {
			return 0, err
		}
	}
}

// Block is a run of IDs: Start, Start+Step, ... below End. With the
// default Delta (1) it is the contiguous range [Start, End).
type Block struct {
	Start, End, Step int64
}

// Len returns how many IDs the block holds.
func (b Block) Len() int64 {
	if b.End <= b.Start || b.Step <= 0 {
		return 0
	}
	return (b.End-b.Start-1)/b.Step + 1
}

// Range reserves up to n IDs as one Block, all of them greater than any ID
// this Key returned before. The block is cut short when the current
// segment ends, so it holds between 1 and n IDs; callers wanting exactly n
// call again for the rest (or use NextN). Errors: ErrBadCount when n < 1,
// and those of Next.
func (k *Key) Range(ctx context.Context, n int64) (Block, error) {
	if n < 1 {
		return Block{}, fmt.Errorf("%w: key %q: count %d is below 1", ErrBadCount, k.name, n)
	}
	for {
		b := k.cur.Load()
		p := b.pos.Load()
		for p < b.end && p >= b.first {
			avail := (b.end-p-1)/b.delta + 1
			c := min(n, avail)
			np := b.end
			if c < avail {
				np = p + c*b.delta
			}
			if b.pos.CompareAndSwap(p, np) {
				last := p + (c-1)*b.delta
				if last >= b.trigger && !b.triggered.Load() {
					k.triggerLoad(b)
				}
				return Block{Start: p, End: last + 1, Step: b.delta}, nil
			}
			p = b.pos.Load()
		}
		if err := k.refill(ctx); err != nil {
			return Block{}, err
		}
	}
}

// NextN fills dst with the key's next len(dst) IDs, in increasing order,
// and returns how many it wrote: len(dst), or fewer with the error that
// stopped it (the IDs written are valid and issued). Errors: ErrBadCount
// for an empty dst, and those of Next.
func (k *Key) NextN(ctx context.Context, dst []int64) (int, error) {
	if len(dst) == 0 {
		return 0, fmt.Errorf("%w: key %q: dst is empty", ErrBadCount, k.name)
	}
	i := 0
	for i < len(dst) {
		blk, err := k.Range(ctx, int64(len(dst)-i))
		if err != nil {
			return i, err
		}
		for v := blk.Start; v < blk.End; v += blk.Step {
			dst[i] = v
			i++
			if v > math.MaxInt64-blk.Step {
				break
			}
		}
	}
	return i, nil
}

// triggerLoad starts loading the segment after b, once.
func (k *Key) triggerLoad(b *buffer) {
	if !b.triggered.CompareAndSwap(false, true) {
		return
	}
	k.mu.Lock()
	if k.next == nil && !k.loading && k.cur.Load() == b {
		k.startLoadLocked()
	}
	k.mu.Unlock()
}

// refill makes a non-empty buffer current, waiting for a load if one is
// running. It returns nil when the caller should try the buffer again.
func (k *Key) refill(ctx context.Context) error {
	var waitFrom uint64
	waiting := false
	for {
		k.mu.Lock()
		if k.a.closed.Load() {
			k.mu.Unlock()
			return fmt.Errorf("key %q: %w", k.name, ErrClosed)
		}
		cur := k.cur.Load()
		if cur.remaining() > 0 {
			k.mu.Unlock()
			return nil // another caller switched
		}
		if k.next != nil {
			k.cur.Store(k.next)
			k.slot = k.next.slot
			k.next = nil
			k.mu.Unlock()
			return nil
		}
		if waiting && k.attempts > waitFrom && k.lastErr != nil {
			// The load we waited for failed.
			err := k.lastErr
			k.mu.Unlock()
			return k.fail(err)
		}
		if k.lastErr != nil && k.loading && !permanent(k.lastErr) {
			// The store is failing and the loader is backing off: fail
			// now rather than make every caller wait for it.
			if !waiting {
				k.waits++
			}
			err := k.lastErr
			k.mu.Unlock()
			return k.fail(err)
		}
		if !k.loading {
			k.startLoadLocked()
		}
		if !waiting {
			waiting, waitFrom = true, k.attempts
			k.waits++
		}
		if k.changed == nil {
			k.changed = make(chan struct{})
		}
		ch := k.changed
		k.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: key %q: waiting for a segment: %w", ErrUnavailable, k.name, ctx.Err())
		case <-k.a.ctx.Done():
		}
	}
}

// fail turns a load error into the error callers see. An unknown key that
// never loaded is dropped from the cache, so requests for made-up keys do
// not pile up.
func (k *Key) fail(err error) error {
	if errors.Is(err, ErrUnknownKey) {
		k.mu.Lock()
		never := !k.loaded
		k.mu.Unlock()
		if never {
			k.a.forget(k)
		}
		return err
	}
	if permanent(err) {
		return err
	}
	return fmt.Errorf("%w: key %q: buffers used up and the store failed: %w", ErrUnavailable, k.name, err)
}

// permanent reports errors that retrying will not fix.
func permanent(err error) bool {
	return errors.Is(err, ErrUnknownKey) || errors.Is(err, ErrOverflow) ||
		errors.Is(err, ErrBadKey) || errors.Is(err, ErrBadStep) || errors.Is(err, ErrClosed)
}

func (k *Key) broadcastLocked() {
	if k.changed != nil {
		close(k.changed)
		k.changed = nil
	}
}

func (k *Key) startLoadLocked() {
	if k.a.closed.Load() {
		return
	}
	k.loading = true
	k.a.wg.Add(1)
	go k.loadLoop()
}

// loadLoop loads the next segment, retrying transient failures with
// backoff until it succeeds, the error is permanent, or the Allocator
// closes.
func (k *Key) loadLoop() {
	defer k.a.wg.Done()
	a := k.a
	backoff := a.opts.RetryMin
	for {
		b, err := k.loadOnce()
		k.mu.Lock()
		k.attempts++
		if err == nil {
			k.next, k.lastErr, k.loading = b, nil, false
			recovered, failed, since := k.failing, k.failCount, k.failSince
			k.failing, k.failCount = false, 0
			k.broadcastLocked()
			k.mu.Unlock()
			if recovered {
				a.opts.Logger.Info("segment: store answers again", "key", k.name,
					"failed_loads", failed, "outage", (a.opts.Clock.Mono() - since).Round(time.Millisecond).String())
			}
			return
		}
		k.lastErr = err
		k.loadErrors++
		stop := permanent(err) || a.closed.Load()
		first := false
		if !stop {
			k.storeErrs++
			k.failCount++
			if !k.failing {
				k.failing, k.failSince, first = true, a.opts.Clock.Mono(), true
			}
		}
		if stop {
			k.loading = false
		}
		left := k.cur.Load().remaining()
		k.broadcastLocked()
		k.mu.Unlock()
		if first {
			// Once per outage: retries are counted (StoreErrors), not logged.
			if left > 0 {
				a.opts.Logger.Warn("segment: store failed; serving the current buffer while retrying", "key", k.name,
					"ids_left", left, "err", err)
			} else {
				a.opts.Logger.Warn("segment: store failed and the buffers are empty; requests fail until it answers", "key", k.name, "err", err)
			}
		}
		if stop {
			return
		}
		if a.opts.Clock.Sleep(a.ctx, backoff) != nil {
			k.mu.Lock()
			k.loading = false
			k.broadcastLocked()
			k.mu.Unlock()
			return
		}
		backoff = min(backoff*2, a.opts.RetryMax)
	}
}

// loadOnce leases one segment and builds its buffer.
func (k *Key) loadOnce() (*buffer, error) { return k.load(nil) }

// load is loadOnce; pre, when set, is the key's first lease already
// queued in a batch (Warm), asking the row's step.
func (k *Key) load(pre *batchWait) (*buffer, error) {
	a := k.a
	clk := a.opts.Clock
	k.mu.Lock()
	var step int64 // 0: the row's step
	if k.loaded && !a.opts.Step.Fixed {
		step = a.opts.Step.nextStep(k.step, k.minStep, clk.Mono()-k.lastLoad)
	}
	slot := 1 - k.slot
	if !k.loaded {
		// Leaf loads a key's first segment into the current slot, 0
		// (SegmentIDGenImpl.get: updateSegmentFromDb(key,
		// buffer.getCurrent()), currentPos starting at 0), so /cache
		// shows it in value0/max0/step0 with pos 0.
		slot = k.slot
	}
	k.mu.Unlock()

	t0 := clk.Mono()
	if a.batch == nil {
		a.checkIdentity() // a batch checks once for all its keys
	}
	seg, err := k.allocate(step, pre)
	if err == nil {
		seg, err = k.witnessed(seg, step)
	}
	lat := clk.Mono() - t0
	if err != nil {
		return nil, err
	}

	b := &buffer{start: seg.Start, end: seg.End, delta: a.opts.Delta, slot: slot}
	first := seg.Start
	if r := mod(first, b.delta); r != a.opts.Remainder {
		adj := a.opts.Remainder - r
		if adj < 0 {
			adj += b.delta
		}
		if first > math.MaxInt64-adj {
			first = seg.End
		} else {
			first += adj
		}
	}
	if first > seg.End {
		first = seg.End
	}
	b.pos.Store(first)
	b.first = first
	size := seg.End - seg.Start
	used := int64(float64(size) * a.opts.LoadAt)
	if used < 0 || used > size {
		used = size
	}
	b.trigger = seg.Start + used
	if first >= seg.End {
		b.triggered.Store(true) // nothing to serve: refill loads again
	}

	k.mu.Lock()
	k.loaded = true
	k.high = seg.End
	k.step = size
	k.minStep = seg.Step
	k.lastLoad = clk.Mono()
	k.loads++
	k.lastLat = lat
	k.totalLat += lat
	k.mu.Unlock()
	return b, nil
}

func (k *Key) allocate(step int64, pre *batchWait) (Segment, error) {
	a := k.a
	ctx, cancel := context.WithTimeout(a.ctx, a.opts.LoadTimeout)
	defer cancel()
	var seg Segment
	var err error
	if pre != nil {
		seg, err = pre.wait(ctx)
	} else {
		seg, err = a.lease(ctx, k.name, step)
	}
	if errors.Is(err, ErrUnknownKey) && a.opts.AutoCreate {
		cerr := a.store.Create(ctx, KeyInfo{Key: k.name, Step: a.opts.AutoCreateStep, Description: "auto-created by idmint"})
		if cerr != nil && !errors.Is(cerr, ErrKeyExists) {
			return Segment{}, cerr
		}
		seg, err = a.lease(ctx, k.name, step)
	}
	if err == nil && (seg.End <= seg.Start || seg.Step < 1) {
		err = fmt.Errorf("segment: key %q: store returned an empty segment [%d, %d) step %d", k.name, seg.Start, seg.End, seg.Step)
	}
	if err != nil && a.ctx.Err() != nil {
		err = fmt.Errorf("key %q: %w", k.name, ErrClosed)
	}
	return seg, err
}

// lease asks the store for one segment: in the next batch when the store
// takes batches, else on its own.
func (a *Allocator) lease(ctx context.Context, key string, step int64) (Segment, error) {
	if a.batch != nil {
		return a.batch.allocate(ctx, key, step)
	}
	return a.store.Allocate(ctx, key, step)
}

// maxRepairs bounds how often one load raises a store that keeps
// answering below the mark before it reports ErrWentBack (and retries
// with backoff).
const maxRepairs = 8

// witnessed returns a segment that holds no number served before: one
// starting at or above the end of every segment this Key leased, whose
// range the witness let it claim. A segment below either mark is not
// used: the store is raised above the mark at once (Store.Raise) and asked
// again. When the raise moved max_id, the store had forgotten writes it
// acknowledged; that is logged and counted. When it did not, another node
// simply claimed a later segment first (a gap, nothing to report).
func (k *Key) witnessed(seg Segment, step int64) (Segment, error) {
	a := k.a
	for try := 0; ; try++ {
		k.mu.Lock()
		high, seen := k.high, k.loaded
		k.mu.Unlock()
		var mark int64
		switch {
		case seen && seg.Start < high:
			mark = high
		case a.opts.Witness != nil:
			ctx, cancel := context.WithTimeout(a.ctx, a.opts.LoadTimeout)
			m, ok, err := a.opts.Witness.Claim(ctx, WitnessSpace(k.name, a.opts.Delta, a.opts.Remainder), seg.Start, seg.End)
			cancel()
			if err != nil {
				if a.ctx.Err() != nil {
					return Segment{}, fmt.Errorf("key %q: %w", k.name, ErrClosed)
				}
				return Segment{}, fmt.Errorf("segment: key %q: witness: %w", k.name, err)
			}
			if ok {
				return seg, nil
			}
			mark = m
		default:
			return seg, nil
		}
		if try == maxRepairs {
			return Segment{}, fmt.Errorf("%w: key %q: store returned [%d, %d), below the mark %d, after %d raises", ErrWentBack, k.name, seg.Start, seg.End, mark, try)
		}
		ctx, cancel := context.WithTimeout(a.ctx, a.opts.LoadTimeout)
		before, err := a.store.Raise(ctx, k.name, mark)
		cancel()
		if err != nil {
			return Segment{}, fmt.Errorf("segment: key %q: raise the store to the mark %d: %w", k.name, mark, err)
		}
		if before < mark {
			k.mu.Lock()
			k.wentBack++
			k.lastBack = [2]int64{before, mark}
			k.mu.Unlock()
			a.opts.Logger.Warn("segment: store went back below the witness: a failover or a restore? raised it above the mark",
				"key", k.name, "store_max_id", before, "mark", mark, "refused", fmt.Sprintf("[%d, %d)", seg.Start, seg.End))
		}
		if seg, err = k.allocate(step, nil); err != nil {
			return Segment{}, err
		}
	}
}

// checkIdentity asks the store which server answers (when it can say) and
// logs a change: a failover or a restore happened behind the store's URL.
// The witness check of every allocation is what keeps IDs unique; this
// makes the event visible before any number goes back. Loads that check
// while a check is in flight share its answer (one query, not one per
// load under a lock); a batch checks once for all its keys.
func (a *Allocator) checkIdentity() {
	id, ok := a.store.(Identifier)
	if !ok {
		return
	}
	a.idMu.Lock()
	if ch := a.idCall; ch != nil {
		a.idMu.Unlock()
		select { // bounded by the call's LoadTimeout
		case <-ch:
		case <-a.ctx.Done():
		}
		return
	}
	ch := make(chan struct{})
	a.idCall = ch
	a.idMu.Unlock()
	ctx, cancel := context.WithTimeout(a.ctx, a.opts.LoadTimeout)
	now, err := id.Identity(ctx)
	cancel()
	a.idMu.Lock()
	defer a.idMu.Unlock()
	a.idCall = nil
	close(ch)
	if err != nil || now == "" {
		return // the allocation that follows reports a store that does not answer
	}
	a.idChecks++
	if a.identity != "" && now != a.identity {
		a.idSwaps++
		a.opts.Logger.Warn("segment: the store's server changed (a failover or a restore?); every segment is checked against the witness",
			"was", a.identity, "now", now, "witness", a.opts.Witness != nil)
	}
	a.identity = now
}

// IdentityChanges returns how often the store's server was seen to change.
func (a *Allocator) IdentityChanges() uint64 {
	a.idMu.Lock()
	defer a.idMu.Unlock()
	return a.idSwaps
}

func mod(a, m int64) int64 {
	r := a % m
	if r < 0 {
		r += m
	}
	return r
}

// CreateKey adds a key to the store. MaxID 0 means DefaultMaxID.
func (a *Allocator) CreateKey(ctx context.Context, k KeyInfo) error {
	k, err := ValidateKeyInfo(k)
	if err != nil {
		return err
	}
	return a.store.Create(ctx, k)
}

// createLot is how many rows EnsureKeys hands a BatchCreator in one
// CreateMissing call. Each call gets the store's own deadline, so a start
// with many keys is bounded by its work, not by one constant: 100,000 rows
// in one call ran past PostgreSQL's 5 s on a loaded machine.
const createLot = 1000

// EnsureKeys makes sure every key of keys has a row, creating the missing
// ones (MaxID 0 means DefaultMaxID) in lots of 1,000 when the store can,
// and returns every row of the store afterwards, by key. Existing rows are
// left as they are; a failure leaves the lots created before it.
func (a *Allocator) EnsureKeys(ctx context.Context, keys []KeyInfo) (map[string]KeyInfo, error) {
	valid, err := ValidateKeyInfos(keys)
	if err != nil {
		return nil, err
	}
	have, err := a.rows(ctx)
	if err != nil {
		return nil, err
	}
	var missing []KeyInfo
	for _, k := range valid {
		if _, ok := have[k.Key]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		a.remember(valid, have)
		return have, nil
	}
	if b, ok := a.store.(BatchCreator); ok {
		// One call per lot: a store bounds each call by a constant
		// deadline (sqldb.DefaultTimeout, the Redis client's timeouts),
		// so the time allowed grows with the number of keys instead of
		// 100,000 rows sharing the 5 s one call gets.
		for start := 0; start < len(missing); start += createLot {
			if err := b.CreateMissing(ctx, missing[start:min(start+createLot, len(missing))]); err != nil {
				return nil, err
			}
		}
	} else {
		for _, k := range missing {
			if err := a.store.Create(ctx, k); err != nil && !errors.Is(err, ErrKeyExists) {
				return nil, err
			}
		}
	}
	rows, err := a.rows(ctx)
	if err != nil {
		return nil, err
	}
	a.remember(valid, rows)
	return rows, nil
}

// remember records the rows of keys for Known.
func (a *Allocator) remember(keys []KeyInfo, rows map[string]KeyInfo) {
	a.knownMu.Lock()
	defer a.knownMu.Unlock()
	if a.known == nil {
		a.known = map[string]KeyInfo{}
	}
	for _, k := range keys {
		if r, ok := rows[k.Key]; ok {
			a.known[k.Key] = r
		}
	}
}

// Known returns the row EnsureKeys last saw for key, once: the second call
// reports false (the row may have changed since), so a caller that
// prepared many keys at once skips one store round trip per key.
func (a *Allocator) Known(key string) (KeyInfo, bool) {
	a.knownMu.Lock()
	defer a.knownMu.Unlock()
	r, ok := a.known[key]
	delete(a.known, key)
	if len(a.known) == 0 {
		a.known = nil // a map never shrinks: let the last read free it
	}
	return r, ok
}

// rowsFresh is how long RowReady trusts one listing of the store.
const rowsFresh = time.Second

// RowReady reports whether key's row can be read from the store, from one
// listing shared by every caller: a readiness probe over 10,000 keys asks
// the store once instead of 10,000 times. A listing is kept for a second,
// or ten times as long as it took when that is longer, and runs in the
// background under the store's own deadline rather than the caller's: a
// probe of 100,000 keys on a loaded machine gave up (its 2 s) before the
// listing was read, every time, so the server never reported ready. A
// caller whose ctx ends first gets ctx's error; a later one gets the
// listing.
func (a *Allocator) RowReady(ctx context.Context, key string) error {
	a.readyMu.Lock()
	l := a.readyCur
	if l == nil || a.opts.Clock.Mono()-l.at >= max(rowsFresh, 10*l.took) {
		if a.readyNext == nil {
			a.mu.Lock() // Close takes mu before it waits for wg
			if a.closed.Load() {
				a.mu.Unlock()
				a.readyMu.Unlock()
				return ErrClosed
			}
			a.wg.Add(1)
			a.mu.Unlock()
			a.readyNext = &rowListing{done: make(chan struct{})}
			go a.listRows(a.readyNext)
		}
		next := a.readyNext
		a.readyMu.Unlock()
		select {
		case <-next.done:
			l = next
		case <-ctx.Done():
			return ctx.Err()
		}
	} else {
		a.readyMu.Unlock()
	}
	if l.err != nil {
		return l.err
	}
	if _, ok := l.rows[key]; !ok {
		return fmt.Errorf("%w: %q", ErrUnknownKey, key)
	}
	return nil
}

// rowListing is one listing of the store's rows for RowReady.
type rowListing struct {
	done chan struct{}       // closed when the fields below are set
	rows map[string]struct{} // names only: 10,000 rows kept whole cost 1 MiB
	err  error
	at   time.Duration // Clock.Mono when it finished
	took time.Duration
}

// listRows lists the store into l and makes it RowReady's current listing.
func (a *Allocator) listRows(l *rowListing) {
	defer a.wg.Done()
	start := a.opts.Clock.Mono()
	list, err := a.store.List(a.ctx)
	if err != nil {
		l.err = err
	} else {
		l.rows = make(map[string]struct{}, len(list))
		for _, k := range list {
			l.rows[k.Key] = struct{}{}
		}
	}
	l.at = a.opts.Clock.Mono()
	l.took = l.at - start
	a.readyMu.Lock()
	a.readyCur, a.readyNext = l, nil
	a.readyMu.Unlock()
	close(l.done)
}

func (a *Allocator) rows(ctx context.Context) (map[string]KeyInfo, error) {
	list, err := a.store.List(ctx)
	if err != nil {
		return nil, err
	}
	m := make(map[string]KeyInfo, len(list))
	for _, k := range list {
		m[k.Key] = k
	}
	return m, nil
}

// Describe returns the store's row for key.
func (a *Allocator) Describe(ctx context.Context, key string) (KeyInfo, error) {
	if err := ValidateKey(key); err != nil {
		return KeyInfo{}, err
	}
	return a.store.Get(ctx, key)
}

// Keys returns every row of the store, ordered by key (the /db view).
func (a *Allocator) Keys(ctx context.Context) ([]KeyInfo, error) {
	rows, err := a.store.List(ctx)
	sort.Slice(rows, func(i, j int) bool { return rows[i].Key < rows[j].Key })
	return rows, err
}

// SetStep changes key's configured step in the store; this Allocator uses
// it from its next load on (other Allocators from their next load too, as
// the store reports the row's step with every segment).
func (a *Allocator) SetStep(ctx context.Context, key string, step int64) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := ValidateStep(step); err != nil {
		return fmt.Errorf("key %q: %w", key, err)
	}
	if err := a.store.SetStep(ctx, key, step); err != nil {
		return err
	}
	if k := a.cached(key); k != nil {
		k.mu.Lock()
		if k.loaded {
			k.step, k.minStep = step, step
		}
		k.mu.Unlock()
	}
	return nil
}

// DeleteKey removes key from the store and drops this Allocator's buffers
// for it (their IDs become gaps). Other Allocators keep serving their
// buffers and fail with ErrUnknownKey at their next load.
func (a *Allocator) DeleteKey(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := a.store.Delete(ctx, key); err != nil {
		return err
	}
	if k := a.cached(key); k != nil {
		k.mu.Lock()
		k.cur.Store(exhausted)
		k.next = nil
		k.loaded = false
		k.broadcastLocked()
		k.mu.Unlock()
		a.forget(k)
	}
	return nil
}
