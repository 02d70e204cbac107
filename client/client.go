package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"github.com/idmint/idmint/clock"
)

// Client draws IDs from idmint servers. It is safe for concurrent use.
// Close it to stop its background refills.
type Client struct {
	opts   Options
	pool   *pool
	clk    clock.Clock
	ctx    context.Context // the client's lifetime
	cancel context.CancelFunc

	last atomic.Pointer[keyState]             // the key of the last call: skips the map
	keys atomic.Pointer[map[string]*keyState] // copy on write
	mu   sync.Mutex                           // serialises writers of keys

	closed atomic.Bool
	wg     sync.WaitGroup // background refills

	// maxCount is the most IDs one request asks for: Options.MaxCount,
	// lowered when a server answers bad_count (its max_count is lower).
	// maxRange is the same for range requests, which servers take up to
	// 1,000,000 whatever their max_count (a range answer is two numbers).
	maxCount, maxRange atomic.Int64
}

// maxRangeCount is the servers' limit for one range request
// (server.MaxRangeCount).
const maxRangeCount = 1_000_000

// count returns how many IDs a request for want asks for.
func (c *Client) count(want int64) int { return int(min(want, c.maxCount.Load())) }

// rangeCount returns how many IDs a range request for want asks for.
func (c *Client) rangeCount(want int64) int { return int(min(want, c.maxRange.Load())) }

// fewer lowers the request size after a server refused n IDs with
// bad_count, and reports whether a smaller request is worth sending. The
// servers' max_count is not published, so the client halves until it fits.
func (c *Client) fewer(err error, n int) bool { return lower(&c.maxCount, err, n) }

// fewerInRange is fewer for range requests.
func (c *Client) fewerInRange(err error, n int) bool { return lower(&c.maxRange, err, n) }

func lower(limit *atomic.Int64, err error, n int) bool {
	var ce *Error
	if n <= 1 || !errors.As(err, &ce) || ce.Code != "bad_count" {
		return false
	}
	for {
		cur := limit.Load()
		if cur < int64(n) {
			return true // another request lowered it already
		}
		if limit.CompareAndSwap(cur, int64(n/2)) {
			return true
		}
	}
}

// New returns a client of the servers at endpoints: http://host:port,
// https://host:port, or a URL of a scheme of Options.Dialers, such as
// grpc://host:port and grpcs://host:port with package client/grpctransport
// (schemes may be mixed). It does not connect until the first call.
func New(endpoints []string, opts Options) (*Client, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("client: endpoints: none given; want at least one URL such as http://127.0.0.1:8080")
	}
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	c := &Client{opts: opts, clk: opts.Clock}
	c.maxCount.Store(int64(opts.MaxCount))
	c.maxRange.Store(max(int64(opts.MaxCount), maxRangeCount))
	c.pool = &pool{clk: opts.Clock, opts: &c.opts, hooks: &c.opts.Hooks}
	seen := map[string]bool{}
	for _, u := range endpoints {
		if seen[u] {
			c.closeTransports()
			return nil, fmt.Errorf("client: endpoints: %q is listed twice", u)
		}
		seen[u] = true
		t, err := newTransport(u, &c.opts)
		if err != nil {
			c.closeTransports()
			return nil, err
		}
		c.pool.eps = append(c.pool.eps, &endpoint{url: u, t: t, idx: len(c.pool.eps)})
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	m := map[string]*keyState{}
	c.keys.Store(&m)
	return c, nil
}

func (c *Client) closeTransports() {
	for _, e := range c.pool.eps {
		e.t.close()
	}
}

// Close stops background refills, waits for them and closes connections.
// IDs still buffered are dropped: gaps, never reissued. Calls after Close
// return ErrClosed once the buffer is empty.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.cancel()
	for _, k := range *c.keys.Load() {
		k.mu.Lock()
		k.releaseAllLocked(ErrClosed)
		k.mu.Unlock()
	}
	c.wg.Wait()
	c.closeTransports()
	return nil
}

// checkName mirrors the server's key-name rule (server.CheckName):
// letters and digits, then also . _ : -, at most 128 bytes.
func checkName(s string) error {
	if s == "" {
		return fmt.Errorf("%w: key: must not be empty", ErrBadKey)
	}
	if len(s) > 128 {
		return fmt.Errorf("%w: key: %d bytes, at most 128", ErrBadKey, len(s))
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: key: %q is not valid UTF-8", ErrBadKey, s)
	}
	for i, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || (i > 0 && (r == '.' || r == '_' || r == ':' || r == '-')) {
			continue
		}
		return fmt.Errorf("%w: key: %q: character %q at byte %d is not allowed (letters, digits, . _ : - only)", ErrBadKey, s, r, i)
	}
	return nil
}

// sameString is a == b, quicker when both share their bytes (the usual
// case: a caller passes the same string constant every time).
func sameString(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}

// key returns the state of key name, creating it on first use.
func (c *Client) key(name string) (*keyState, error) {
	if k, ok := (*c.keys.Load())[name]; ok {
		if c.last.Load() != k {
			c.last.Store(k)
		}
		return k, nil
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	c.mu.Lock()
	old := *c.keys.Load()
	k, ok := old[name]
	if !ok {
		k = &keyState{name: name, c: c}
		k.token = c.opts.Token
		if t, ok := c.opts.Tokens[name]; ok {
			k.token = t
		}
		m := make(map[string]*keyState, len(old)+1)
		for n, v := range old {
			m[n] = v
		}
		m[name] = k
		c.keys.Store(&m)
	}
	c.mu.Unlock()
	c.last.Store(k)
	return k, nil
}

// Next returns one new ID of key. Served from the buffer it costs one
// atomic add and allocates nothing; otherwise it waits for a refill, at
// most until ctx's deadline (Options.Timeout without one). IDs one Client
// returns for a key are unique; within one refill of a segment key they
// increase.
func (c *Client) Next(ctx context.Context, key string) (int64, error) {
	k := c.last.Load()
	if k == nil || !sameString(k.name, key) {
		var err error
		if k, err = c.key(key); err != nil {
			return 0, err
		}
	}
	if ch := k.cur.Load(); ch != nil {
		if i := ch.next.Add(1) - 1; i < ch.n {
			if i == ch.low {
				k.kick()
			}
			if ch.ids != nil {
				return ch.ids[i], nil
			}
			return ch.first + i, nil
		}
	}
	return c.nextSlow(ctx, k)
}

func (c *Client) nextSlow(ctx context.Context, k *keyState) (int64, error) {
	var one [1]int64
	if k.mode.Load() == modeDirect {
		// One ID from a shared request, with nothing to allocate; after
		// a failure, retry like any call.
		if c.closed.Load() {
			return 0, ErrClosed
		}
		id, err := k.coalescedOne(ctx)
		if err == nil {
			return id, nil
		}
		if err := c.retry(ctx, k, one[:], 0, err); err != nil {
			return 0, err
		}
		return one[0], nil
	}
	if err := c.fill(ctx, k, one[:], 0); err != nil {
		return 0, err
	}
	return one[0], nil
}

// NextN fills dst with new IDs of key. On error the content of dst is
// undefined (IDs it holds are gaps, never reissued).
func (c *Client) NextN(ctx context.Context, key string, dst []int64) error {
	if len(dst) == 0 {
		return nil
	}
	k, err := c.key(key)
	if err != nil {
		return err
	}
	got := k.take(dst)
	if got == len(dst) {
		return nil
	}
	return c.fill(ctx, k, dst, got)
}

// Range reserves up to n contiguous IDs of a segment key: [first,
// first+count), 1 <= count <= n. Like the server's range call, count may
// be less than n where a buffered range ends. Keys without contiguous
// ranges give ErrNoRanges.
func (c *Client) Range(ctx context.Context, key string, n int64) (first, count int64, err error) {
	if n < 1 || n > 1<<40 {
		return 0, 0, fmt.Errorf("client: Range: n: %d is out of range: must be between 1 and 2^40", n)
	}
	k, err := c.key(key)
	if err != nil {
		return 0, 0, err
	}
	ctx, cancel := c.bound(ctx)
	defer cancel()
	for {
		switch k.mode.Load() {
		case modeBatch, modeDirect:
			return 0, 0, fmt.Errorf("%w: key %q uses strategy %q; use Next or NextN", ErrNoRanges, key, k.strategyName())
		case modeText:
			return 0, 0, k.textErr()
		}
		if ch := k.cur.Load(); ch != nil {
			want := n
			if ch.ids != nil {
				want = 1
			}
			// reserve, not an add of n: a retry on a used-up chunk must
			// not move its counter (2^23 retries of 2^40 wrapped it).
			if i, got := ch.reserve(want); got > 0 {
				if i <= ch.low && ch.low < i+got {
					k.kick()
				}
				if ch.ids != nil {
					return ch.ids[i], 1, nil
				}
				return ch.first + i, got, nil
			}
			if k.promote(ch) {
				continue
			}
		} else if k.promote(nil) {
			continue
		}
		if c.closed.Load() {
			return 0, 0, ErrClosed
		}
		w := &waiter{want: n}
		switch err := k.line(ctx, w); {
		case err == nil:
			return w.first, w.count, nil
		case err != errLookAgain:
			return 0, 0, err
		}
	}
}

// bound gives ctx the default deadline when it has none.
func (c *Client) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.opts.Timeout)
}

// fill is the slow path of Next and NextN: take from the buffer, wait for
// refills (or, for keys that are not prefetched, share a request with
// concurrent calls), retry with backoff, until dst[got:] is full or ctx
// ends.
func (c *Client) fill(ctx context.Context, k *keyState, dst []int64, got int) error {
	if c.closed.Load() {
		return ErrClosed
	}
	// A call of a key that is not prefetched first joins a shared
	// request as it is: that request is bounded by Options.Timeout
	// itself, and a context with a timer of its own per call was a third
	// of the client's CPU at a million calls a second.
	var failed error
	if k.mode.Load() == modeDirect {
		n, err := k.coalesced(ctx, dst[got:])
		if got += n; err == nil && got == len(dst) {
			return nil
		}
		failed = err
	}
	return c.retry(ctx, k, dst, got, failed)
}

// retry is fill after a first attempt that failed (failed; nil when
// none was made), with ctx bounded by Options.Timeout when it has no
// deadline.
func (c *Client) retry(ctx context.Context, k *keyState, dst []int64, got int, failed error) error {
	ctx, cancel := c.bound(ctx)
	defer cancel()
	var last error
	if failed != nil {
		if err := c.backoff(ctx, k, failed, &last); err != nil {
			return err
		}
	}
	for {
		got += k.take(dst[got:])
		if got == len(dst) {
			return nil
		}
		switch k.mode.Load() {
		case modeText:
			return k.textErr()
		case modeDirect:
			if c.closed.Load() {
				return ErrClosed
			}
			n, err := k.coalesced(ctx, dst[got:])
			got += n
			if err == nil {
				continue
			}
			if err := c.backoff(ctx, k, err, &last); err != nil {
				return err
			}
			continue
		}
		if c.closed.Load() {
			return ErrClosed
		}
		w := &waiter{dst: dst[got:]}
		err := k.line(ctx, w)
		got += w.got
		if err != nil && err != errLookAgain {
			return err
		}
	}
}

// backoff handles a failed attempt: a permanent failure is returned; a
// retryable one is remembered and waited out (until the soonest endpoint
// may be tried again, at least MinBackoff), unless ctx ends first.
func (c *Client) backoff(ctx context.Context, k *keyState, err error, last *error) error {
	if ctx.Err() != nil {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			*last = err
		}
		return &WaitError{Key: k.name, Ctx: ctx.Err(), Last: *last}
	}
	if !retryable(err) {
		return fmt.Errorf("client: key %q: %w", k.name, err)
	}
	*last = err
	d := c.opts.MinBackoff
	var u *unavailable
	if errors.As(err, &u) && u.retryAt > 0 {
		d = max(d, u.retryAt-c.clk.Mono())
	}
	if c.clk.Sleep(ctx, d) != nil {
		return &WaitError{Key: k.name, Ctx: ctx.Err(), Last: *last}
	}
	return nil
}

// WaitError is returned when a call's context ends before it got its IDs:
// every endpoint failed, refused or was backing off. It wraps
// ErrUnavailable, the context's error and the last endpoint failure.
type WaitError struct {
	Key  string
	Ctx  error // context.DeadlineExceeded or context.Canceled
	Last error // the last failure, nil if no attempt finished
}

func (e *WaitError) Error() string {
	s := fmt.Sprintf("client: key %q: no IDs before the context ended (%v)", e.Key, e.Ctx)
	if e.Last != nil {
		return s + "; last failure: " + e.Last.Error()
	}
	return s + "; no endpoint answered"
}

func (e *WaitError) Unwrap() []error {
	out := []error{ErrUnavailable, e.Ctx}
	if e.Last != nil {
		out = append(out, e.Last)
	}
	return out
}

// Buffered returns how many IDs of key the client holds.
func (c *Client) Buffered(key string) int64 {
	k, ok := (*c.keys.Load())[key]
	if !ok {
		return 0
	}
	return k.buffered()
}

// KeyStats describes one key's buffer.
type KeyStats struct {
	Key          string
	Strategy     string // "" until the first answer
	Prefetched   bool   // false for monotonic, text and unknown strategies
	Buffered     int64  // IDs held
	Batch        int64  // IDs the next refill request asks for, at most
	Refills      int64  // refill requests that brought IDs
	RefillErrors int64  // refill requests that brought none
	// Target is the prefetch distance: the IDs the client keeps held or
	// asked for ahead of its callers, DrawRate × (2 × RefillLatency +
	// HedgeAfter) within MinBatch and MaxPrefetch.
	Target int64
	// DrawRate is the estimated draw, in IDs per second (doubled while
	// calls wait for refills).
	DrawRate float64
	// RefillLatency is the slowest of the last 64 refill requests that
	// brought IDs, failovers and hedges included.
	RefillLatency time.Duration
	// InFlight is how many refill requests are running (at most
	// MaxRefills).
	InFlight int
	// Waits counts the calls (Next, NextN, Range) that found the buffer
	// empty and waited for a refill; WaitTotal is their waiting in all and
	// WaitMax the longest. A call served from the buffer is not counted.
	Waits              int64
	WaitTotal, WaitMax time.Duration
	// WaitBuckets is a histogram of those waits, cumulative like
	// Prometheus's: Count calls waited at most UpTo (50µs to 10s); the
	// others waited longer.
	WaitBuckets []WaitBucket
	// Requests counts the requests sent to endpoints for calls of a key
	// that is not prefetched (concurrent calls share one; a failover or
	// a hedge is one more).
	Requests int64
	// Resets counts the times the buffer was dropped because an answer
	// said the key changed: another strategy, or a new generation on
	// one endpoint (deleted and created again there).
	Resets int64
	// Leader is the node name answers gave as the key's leader (a
	// monotonic key on etcd); "" when none did.
	Leader string
}

// WaitBucket is one bucket of KeyStats.WaitBuckets.
type WaitBucket struct {
	UpTo  time.Duration
	Count int64 // calls that waited at most UpTo
}

// EndpointStats describes one endpoint's health.
type EndpointStats struct {
	URL       string
	Node      string // the node name its answers give; "" until one did
	Available bool   // its circuit breaker is closed
	Requests  int64
	Failures  int64
	LastError string // of the current run of failures
}

// Stats is a snapshot of a client's buffers and endpoints.
type Stats struct {
	Keys      []KeyStats
	Endpoints []EndpointStats
	Failovers int64 // requests moved to another endpoint after a failure
	Hedges    int64 // requests also sent to a second endpoint for being slow
}

// Stats returns a snapshot of buffers, endpoints and counters.
func (c *Client) Stats() Stats {
	var s Stats
	for _, k := range *c.keys.Load() {
		m := k.mode.Load()
		ks := KeyStats{Key: k.name, Prefetched: m == modeRange || m == modeBatch}
		k.mu.Lock()
		ks.Strategy, ks.Buffered, ks.InFlight = k.strategy, k.levelLocked(), k.inflight
		if ks.Prefetched {
			ks.Batch, ks.Target, ks.DrawRate, ks.RefillLatency = k.batchLocked(), k.target, k.rate, k.latMax
		}
		k.mu.Unlock()
		ks.Waits, ks.WaitTotal, ks.WaitMax = k.waits.n.Load(), time.Duration(k.waits.total.Load()), time.Duration(k.waits.max.Load())
		ks.WaitBuckets = make([]WaitBucket, len(waitBounds))
		var sum int64
		for i, b := range waitBounds {
			sum += k.waits.buckets[i].Load()
			ks.WaitBuckets[i] = WaitBucket{UpTo: b, Count: sum}
		}
		ks.Refills, ks.RefillErrors = k.refills.Load(), k.refillErrors.Load()
		ks.Requests, ks.Resets, ks.Leader = k.requests.Load(), k.resets.Load(), k.leaderName()
		s.Keys = append(s.Keys, ks)
	}
	now := c.clk.Mono()
	for _, e := range c.pool.eps {
		closed, _ := e.state(now, c.opts.BreakerThreshold)
		es := EndpointStats{URL: e.url, Node: e.nodeName(), Available: closed, Requests: e.requests.Load(), Failures: e.failures.Load()}
		e.mu.Lock()
		if e.lastErr != nil {
			es.LastError = e.lastErr.Error()
		}
		e.mu.Unlock()
		s.Endpoints = append(s.Endpoints, es)
	}
	s.Failovers, s.Hedges = c.pool.failovers.Load(), c.pool.hedges.Load()
	return s
}
