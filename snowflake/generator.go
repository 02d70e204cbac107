package snowflake

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/internal/mutate"
)

// Errors a Generator returns.
var (
	// ErrClosed is returned by a Generator after Close.
	ErrClosed = errors.New("snowflake: generator closed")
	// ErrFenced is returned while the generator's Fence does not prove its
	// worker ID valid (the Clock's Mono is at or past Fence.ValidUntil).
	// Calls succeed again once ValidUntil moves past Mono.
	ErrFenced = errors.New("snowflake: worker lease not proven valid (fenced)")
	// ErrHorizon is wrapped by errors from the Horizon's Load or Extend: the
	// generator issues nothing stamped past the horizon it already holds.
	ErrHorizon = errors.New("snowflake: horizon")
	// ErrClockBehind is wrapped by *ClockBehindError.
	ErrClockBehind = errors.New("snowflake: clock moved backwards")
	// ErrInvalidSettings is wrapped by *FieldErrors about Settings.
	ErrInvalidSettings = errors.New("snowflake: invalid settings")
)

// ClockBehindError is returned when the wall clock reads further behind the
// last issued ID's time than the generator may wait out or bridge. Retrying
// later succeeds once the clock has caught up. It unwraps to ErrClockBehind.
type ClockBehindError struct {
	// Behind is how far the wall clock is behind the time stamped on the
	// last issued ID (or on the persisted horizon after a restart).
	Behind time.Duration
	// MaxWait is the longest rollback the generator waits out
	// (Settings.MaxRollbackWait); negative when it never waits.
	MaxWait time.Duration
}

// Error describes the distance and the limit.
func (e *ClockBehindError) Error() string {
	return fmt.Sprintf("snowflake: clock moved backwards: %v behind the last issued ID (waits out at most %v)", e.Behind, max(e.MaxWait, 0))
}

// Unwrap returns ErrClockBehind.
func (e *ClockBehindError) Unwrap() error { return ErrClockBehind }

// Overflow is what a Generator does when a tick's sequence is used up.
type Overflow int

const (
	// OverflowWait waits (cancellably, never holding a lock) for the next
	// tick of the wall clock. A call waits at most about one tick.
	OverflowWait Overflow = iota
	// OverflowBorrow issues from future ticks, at most Settings.BorrowLimit
	// ahead of the wall clock; at the limit it waits about one tick.
	// Generator.Ahead reports how far ahead it runs.
	OverflowBorrow
)

// Rollback is what a Generator does when the wall clock reads earlier than
// the last issued ID's time by more than it may run ahead.
type Rollback int

const (
	// RollbackWait waits when the clock is behind by at most
	// Settings.MaxRollbackWait (5 ms by default, as Leaf does) and otherwise
	// returns a *ClockBehindError carrying the distance.
	RollbackWait Rollback = iota
	// RollbackLogical keeps issuing on a logical clock that continues from
	// the last issued tick, up to Settings.LogicalLimit ahead of the wall
	// clock; beyond that it behaves like RollbackWait.
	RollbackLogical
)

// Settings configures a Generator. Every zero value has a documented default.
type Settings struct {
	// Node gives the value of every node field of the layout, by name. Each
	// must be set and fit its field; there is no default (a default node is
	// how replicas end up as duplicates of each other).
	Node map[string]int64
	// Clock is the time source. Nil means clock.NewReal().
	Clock clock.Clock
	// Overflow is the sequence-exhaustion policy. Zero is OverflowWait.
	Overflow Overflow
	// BorrowLimit bounds how far ahead of the wall clock OverflowBorrow may
	// stamp IDs. Zero means 1 s; it must cover at least one tick.
	BorrowLimit time.Duration
	// Rollback is the clock-rollback policy. Zero is RollbackWait.
	Rollback Rollback
	// MaxRollbackWait is the longest clock rollback waited out rather than
	// reported. Zero means 5 ms; negative means never wait.
	MaxRollbackWait time.Duration
	// LogicalLimit bounds how far ahead of the wall clock RollbackLogical
	// may run. Zero means 1 s; it must cover at least one tick.
	LogicalLimit time.Duration
	// Horizon, when set, records how far ahead IDs may be stamped
	// (design.md U3/U6): the generator loads it before the first ID, starts
	// strictly after it, and extends it before stamping past it. Nil means
	// no horizon (a restart with the clock set back may reissue IDs).
	Horizon Horizon
	// HorizonLead is how far past the current time each Extend asks for.
	// Zero means 3 s. Extension starts in the background once half the
	// lead is left, so callers block on it only if it is slow.
	HorizonLead time.Duration
	// Fence, when set, is consulted on every ID (reading Clock.Mono fresh):
	// no ID is returned while Mono >= Fence.ValidUntil().
	Fence Fence
	// Coarse is the period of the clock.Cached the fast path stamps IDs
	// from, when Clock is a *clock.Real (or a *clock.Cached, whose own
	// period then applies). Zero means 1 ms, served by clock.Shared();
	// negative means read the clock on every ID (one clock read and a
	// division more per ID: 40-150 ns here), which servers should use for
	// precise stamps. Other clocks (clock.Fake) are read on every ID.
	Coarse time.Duration
	// Rand returns a uniform value in [0, n) for random sequence starts.
	// Nil means math/rand/v2's Int64N.
	Rand func(n int64) int64
	// Go, when set, starts the generator's background goroutines (horizon
	// extensions): Go(f) must run f in a new goroutine. A deterministic
	// simulation uses it to know when they are running. Nil means the go
	// statement.
	Go func(f func())
	// Mutations puts known, fixed mistakes back into the generator, for the
	// module's own simulation tests; its type is internal to the module, so
	// other code can set only nil (no mistakes).
	Mutations *mutate.Set
}

const (
	defaultLimit     = time.Second
	defaultMaxWait   = 5 * time.Millisecond
	defaultLead      = 3 * time.Second
	defaultCoarse    = time.Millisecond
	noTick           = math.MinInt64
	refreshEvery     = 64 // the fast path re-reads the clock every this many IDs
	noHorizon        = math.MaxInt64
	beforeAnyHorizon = -1 << 62
	releaseTimeout   = 5 * time.Second
	extendBackoff    = 100 * time.Millisecond
)

// Generator issues IDs for one node of a Layout. It is safe for concurrent
// use; every ID it returns is greater than every ID it returned before. It
// never sleeps or does I/O while holding a lock: its state is one atomic
// word, and waits (next tick, small rollback, horizon extension) happen
// outside any lock.
//
// Stamps: with a *clock.Real and Settings.Coarse >= 0, IDs are stamped
// from a clock.Cached's Recent reading (one atomic load), re-read from the
// clock every 64 IDs, so the per-ID cost stays at one compare-and-swap. A
// stamp never leads the clock (except as Borrow/Logical allow) and lags it
// by the cache's period plus the delay before its refresher goroutine gets
// a CPU: 1-2 ms on an idle machine, tens of milliseconds with every core
// busy; at high rates the re-read every 64 IDs keeps it within
// microseconds. With Coarse < 0 every ID reads the clock. Sequence
// exhaustion, rollback and horizon decisions always read the clock itself.
// Waits (next tick, rollback) use the Clock's SleepUntil, which parks.
type Generator struct {
	layout    Layout
	clk       clock.Clock
	coarse    bool
	cc        *clock.Cached // the fast path's cache, when coarse
	sb        uint
	seqMask   int64
	timeShift uint
	seqShift  uint
	node      int64
	refresh   int64
	borrow    int64 // ticks OverflowBorrow may run ahead of the wall clock
	logical   int64 // ticks RollbackLogical may run ahead; 0 when RollbackWait
	maxWait   time.Duration
	startK    int64
	rnd       func(int64) int64
	spawn     func(func())
	mut       *mutate.Set
	fence     Fence
	horizon   Horizon
	lead      time.Duration
	leadTicks int64
	ctx       context.Context
	cancel    context.CancelFunc
	_         [64]byte
	state     atomic.Int64 // last reserved (tick<<sb | seq); -1 before the first
	_         [56]byte
	seenNanos atomic.Int64 // the cc reading seenTick was computed from
	seenTick  atomic.Int64 // tick of seenNanos, or noTick
	limit     atomic.Int64 // fast path stamps no tick above this
	hz        atomic.Int64 // hard horizon tick
	closed    atomic.Bool
	retryAt   atomic.Int64 // Mono before which no background extension is retried
	mu        sync.Mutex   // guards inflight, loaded, goroutine starts; never held across I/O or waits
	inflight  *extension
	loaded    bool
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
	floor     atomic.Int64 // the state a loaded horizon raised us to; nothing issued while state == floor
}

type extension struct {
	done chan struct{}
	err  error
}

func settingsErr(field, value, format string, args ...any) error {
	return &FieldError{Field: field, Value: value, Reason: fmt.Sprintf(format, args...), Err: ErrInvalidSettings}
}

// New returns a Generator for layout l with settings s. It validates every
// setting and node value (errors are *FieldErrors naming the field), and
// refuses a layout whose epoch is in the future or whose End has passed
// (ErrEpochInFuture, ErrLayoutExpired). New does no I/O: a Horizon is
// loaded by the first call that needs an ID.
func New(l Layout, s Settings) (*Generator, error) {
	if l.IsZero() {
		return nil, layoutErr("layout", "", "zero Layout: build one with NewLayout, ParseLayout or Lookup")
	}
	g := &Generator{layout: l, clk: s.Clock, sb: l.seqBits, seqMask: 1<<l.seqBits - 1,
		timeShift: l.timeShift, seqShift: l.seqShift, startK: l.seqStart, rnd: s.Rand,
		fence: s.Fence, horizon: s.Horizon, spawn: s.Go, mut: s.Mutations}
	if g.clk == nil {
		g.clk = clock.NewReal()
	}
	if err := l.Check(g.clk.Now()); err != nil {
		return nil, err
	}
	node, err := l.nodeBits(s.Node, true)
	if err != nil {
		return nil, err
	}
	g.node = node
	ticks := func(field string, d time.Duration) (int64, error) {
		if d < 0 {
			return 0, settingsErr(field, d.String(), "must not be negative")
		}
		if d == 0 {
			d = defaultLimit
		}
		n := int64(d / l.unit)
		if n < 1 {
			return 0, settingsErr(field, d.String(), "is shorter than one tick (%v) of layout %s", l.unit, l.name)
		}
		return n, nil
	}
	switch s.Overflow {
	case OverflowWait:
	case OverflowBorrow:
		if g.borrow, err = ticks("BorrowLimit", s.BorrowLimit); err != nil {
			return nil, err
		}
	default:
		return nil, settingsErr("Overflow", strconv.Itoa(int(s.Overflow)), "must be OverflowWait or OverflowBorrow")
	}
	switch s.Rollback {
	case RollbackWait:
	case RollbackLogical:
		if g.logical, err = ticks("LogicalLimit", s.LogicalLimit); err != nil {
			return nil, err
		}
	default:
		return nil, settingsErr("Rollback", strconv.Itoa(int(s.Rollback)), "must be RollbackWait or RollbackLogical")
	}
	g.maxWait = s.MaxRollbackWait
	if g.maxWait == 0 {
		g.maxWait = defaultMaxWait
	}
	g.lead = s.HorizonLead
	switch {
	case g.lead < 0:
		return nil, settingsErr("HorizonLead", g.lead.String(), "must not be negative")
	case g.lead == 0:
		g.lead = defaultLead
	}
	g.leadTicks = int64(g.lead / l.unit)
	switch c := g.clk.(type) {
	case *clock.Real:
		switch {
		case s.Coarse == 0 || s.Coarse == defaultCoarse:
			g.cc = clock.Shared()
		case s.Coarse > 0:
			g.cc = clock.NewCached(c, s.Coarse)
		}
	case *clock.Cached:
		if s.Coarse >= 0 {
			g.cc = c
		}
	}
	g.coarse = g.cc != nil
	if g.rnd == nil {
		g.rnd = rand.Int64N
	}
	g.refresh = min(refreshEvery-1, g.seqMask)
	g.state.Store(-1)
	g.floor.Store(-2)
	g.seenTick.Store(noTick)
	g.seenNanos.Store(noTick)
	g.ctx, g.cancel = context.WithCancel(context.Background())
	if g.horizon == nil {
		g.loaded = true
		g.hz.Store(noHorizon)
		g.limit.Store(l.maxTick)
	} else {
		g.hz.Store(beforeAnyHorizon)
		g.limit.Store(beforeAnyHorizon)
	}
	return g, nil
}

// Layout returns the generator's layout.
func (g *Generator) Layout() Layout { return g.layout }

// Remaining returns how long the layout can still stamp IDs, by the
// generator's clock: Layout().End() minus now, 0 once it has run out. Log it
// at start-up so nobody is surprised the way uid-generator's users were.
func (g *Generator) Remaining() time.Duration { return g.layout.Remaining(g.clk.Now()) }

// id places a reserved (tick, seq) state into the layout with the node.
func (g *Generator) id(s int64) int64 {
	return (s>>g.sb)<<g.timeShift | (s&g.seqMask)<<g.seqShift | g.node
}

func (g *Generator) start() int64 {
	if g.startK == 0 {
		return 0
	}
	// Reduce whatever a custom Rand returns into [0, k): a value outside it
	// would spill into the time field.
	return int64(uint64(g.rnd(g.startK)) % uint64(g.startK))
}

// Next returns a new ID, greater than every ID this generator returned
// before. It waits, honouring ctx, only when the tick's sequence is used up
// (OverflowWait, or OverflowBorrow at its limit), when the clock moved back
// by at most MaxRollbackWait, or when a horizon extension is in flight; ctx
// does not affect a call that need not wait. Errors: *ClockBehindError,
// ErrFenced, ErrLayoutExpired, ErrHorizon (wrapped), ErrClosed, ctx.Err().
// On error the returned ID is 0 and must not be used.
func (g *Generator) Next(ctx context.Context) (int64, error) {
	if g.coarse {
		t := g.seenTick.Load()
		if n := g.cc.Recent(); n != g.seenNanos.Load() {
			t = g.see(n)
		}
		old := g.state.Load()
		next := old + 1
		if t > old>>g.sb {
			next = t<<g.sb | g.start()
		}
		nt := int64(uint64(next) >> g.sb)
		if nt <= t+g.borrow && nt <= g.limit.Load() && g.state.CompareAndSwap(old, next) {
			if next&g.refresh == 0 {
				g.see(g.cc.Refresh().UnixNano())
			}
			if g.fence != nil && g.clk.Mono() >= g.fence.ValidUntil() {
				return 0, ErrFenced // the reserved ID is dropped: a gap, never a reuse
			}
			return g.id(next), nil
		}
	}
	first, _, err := g.reserve(ctx, 1)
	if err != nil {
		return 0, err
	}
	return g.id(first), nil
}

// NextN fills dst with new IDs, strictly increasing and greater than every
// ID this generator returned before, and returns how many it wrote. It reads
// the clock once per run of IDs sharing a tick rather than once per ID. On
// error it returns the number written before the error; those are valid.
func (g *Generator) NextN(ctx context.Context, dst []int64) (int, error) {
	n := 0
	step := int64(1) << g.seqShift
	for n < len(dst) {
		first, count, err := g.reserve(ctx, int64(len(dst)-n))
		if err != nil {
			return n, err
		}
		id := g.id(first)
		for end := n + int(count); n < end; n++ {
			dst[n] = id
			id += step
		}
	}
	return n, nil
}

// reserve is the precise path: it reads the clock, decides whether IDs can
// be issued now, waits (outside any lock) when the policy says so, and
// reserves up to want consecutive states within one tick. It returns the
// first state and how many were reserved.
func (g *Generator) reserve(ctx context.Context, want int64) (int64, int64, error) {
	for {
		if g.closed.Load() {
			return 0, 0, ErrClosed
		}
		if g.fence != nil && g.clk.Mono() >= g.fence.ValidUntil() {
			return 0, 0, ErrFenced
		}
		// Load the state before reading the clock: every tick in it then
		// comes from a clock reading no later than ours, so tick > p means a
		// real rollback (or borrowing), not a goroutine preempted between
		// its clock read and its state load.
		old := g.state.Load()
		tick := old >> g.sb
		var now time.Time
		var p int64
		if g.coarse {
			now = g.cc.Refresh() // the precise reading, shared with the fast path
			p = g.see(now.UnixNano())
		} else {
			now = g.clk.Now()
			p = g.layout.tickOf(now)
		}
		var first int64
		if p > tick {
			first = p<<g.sb | g.start()
		} else {
			first = old + 1
		}
		ft := int64(uint64(first) >> g.sb)
		if ft > g.layout.maxTick || p > g.layout.maxTick {
			return 0, 0, fmt.Errorf("%w: layout %s cannot stamp past %s (%d bits of %v)", ErrLayoutExpired,
				g.layout.name, g.layout.End().Format(time.RFC3339), g.layout.timeBits, g.layout.unit)
		}
		allow := g.borrow
		if g.logical > 0 && tick > p {
			allow = max(allow, g.logical)
		}
		if ft > p+allow {
			if tick > p+allow {
				// The clock is behind what was issued, beyond what we may bridge.
				wait := g.layout.tickTime(tick - allow).Sub(now)
				maxWait := g.maxWait
				if old == g.floor.Load() {
					// Nothing issued yet past a recorded horizon: the previous
					// holder stamped at most its lead (plus what it could
					// borrow) ahead of its clock, so waiting that out is the
					// expected cost of a crash restart, not a rollback.
					maxWait = max(maxWait, 0) + g.lead + time.Duration(max(g.borrow, g.logical)+1)*g.layout.unit
				}
				if maxWait < 0 || wait > maxWait {
					return 0, 0, &ClockBehindError{Behind: g.layout.tickTime(tick).Sub(now), MaxWait: maxWait}
				}
				if err := g.clk.Sleep(ctx, wait); err != nil {
					return 0, 0, err
				}
				continue
			}
			// Sequence used up as far ahead as allowed: wait for the next tick.
			if err := g.clk.Sleep(ctx, g.layout.tickTime(ft-allow).Sub(now)); err != nil {
				return 0, 0, err
			}
			continue
		}
		if ft > g.hz.Load() {
			if err := g.awaitHorizon(ctx); err != nil {
				return 0, 0, err
			}
			continue
		}
		count := min(want, g.seqMask-first&g.seqMask+1)
		if !g.state.CompareAndSwap(old, first+count-1) {
			continue
		}
		if g.horizon != nil && ft > g.limit.Load() && !g.closed.Load() {
			g.startExtension(true) // ahead of need, in the background
		}
		if g.fence != nil && g.clk.Mono() >= g.fence.ValidUntil() {
			return 0, 0, ErrFenced
		}
		return first, count, nil
	}
}

// Ahead returns how far the time stamped on the last issued ID is ahead of
// the wall clock: 0 normally, up to BorrowLimit when OverflowBorrow has
// borrowed from future ticks, up to LogicalLimit after a bridged rollback.
func (g *Generator) Ahead() time.Duration {
	s := g.state.Load()
	if s < 0 || g.closed.Load() {
		return 0
	}
	return max(g.layout.tickTime(s>>g.sb).Sub(g.clk.Now()), 0)
}

// Horizon returns the latest time the generator may currently stamp on an
// ID under its recorded horizon, or the zero time when it has no Horizon or
// has not recorded one yet.
func (g *Generator) Horizon() time.Time {
	h := g.hz.Load()
	if h == noHorizon || h <= beforeAnyHorizon {
		return time.Time{}
	}
	return g.layout.tickTime(h)
}

// Close stops the generator's background goroutines and waits for them.
// Calls after Close return ErrClosed. When the Horizon is a Releaser and the
// generator loaded it, Close records the time of the last issued ID as the
// horizon (bounded by releaseTimeout), so the next holder need not wait out
// the lead; it returns that error, if any. Close is idempotent.
func (g *Generator) Close() error {
	g.closeOnce.Do(func() {
		g.mu.Lock()
		g.closed.Store(true)
		g.limit.Store(beforeAnyHorizon)
		g.mu.Unlock()
		g.cancel()
		g.wg.Wait()
		g.limit.Store(beforeAnyHorizon)
		// From here no CAS on the state can succeed: a caller that passed
		// the limit check before Close sees its CAS fail and then ErrClosed.
		// last therefore covers every ID ever returned.
		last := g.state.Swap(math.MaxInt64)
		r, ok := g.horizon.(Releaser)
		g.mu.Lock()
		loaded := g.loaded
		g.mu.Unlock()
		if !ok || !loaded || last < 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		if err := r.Release(ctx, g.layout.tickTime(last>>g.sb)); err != nil {
			g.closeErr = fmt.Errorf("%w: release: %w", ErrHorizon, err)
		}
	})
	return g.closeErr
}

// see computes the tick of the cached reading n (Unix nanoseconds) and
// publishes it to the fast path. The pair is not updated atomically: a
// racing caller may pair n with the tick of another reading, which is
// still a reading of the clock, and never later than it.
func (g *Generator) see(n int64) int64 {
	t := g.layout.tickOf(time.Unix(0, n))
	g.seenTick.Store(t)
	g.seenNanos.Store(n)
	return t
}

// awaitHorizon starts (or joins) a horizon extension and waits for it.
func (g *Generator) awaitHorizon(ctx context.Context) error {
	e := g.startExtension(false)
	if e == nil {
		return ErrClosed
	}
	select {
	case <-e.done:
		return e.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startExtension returns the extension in flight, starting one if none is.
// It returns nil after Close, and for an early (ahead of need) extension
// within extendBackoff of a failed one.
func (g *Generator) startExtension(early bool) *extension {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inflight != nil {
		return g.inflight
	}
	if g.closed.Load() || early && g.clk.Mono() < time.Duration(g.retryAt.Load()) {
		return nil
	}
	e := &extension{done: make(chan struct{})}
	g.inflight = e
	g.wg.Add(1)
	if g.spawn != nil {
		g.spawn(func() { g.runExtension(e) })
	} else {
		go g.runExtension(e)
	}
	return e
}

func (g *Generator) runExtension(e *extension) {
	defer g.wg.Done()
	err := g.extend(g.ctx)
	if err != nil {
		// Do not retry ahead of need more often than this; callers that
		// reach the recorded horizon still retry (and see the error).
		g.retryAt.Store(int64(g.clk.Mono() + extendBackoff))
	}
	g.mu.Lock()
	g.inflight = nil
	e.err = err
	close(e.done)
	g.mu.Unlock()
}

// extend loads the horizon on first use (raising the state so the next ID is
// stamped strictly after it) and records a new horizon HorizonLead past the
// later of now and the last issued tick. It runs in its own goroutine, one
// at a time, holding no lock during I/O.
func (g *Generator) extend(ctx context.Context) error {
	g.mu.Lock()
	loaded := g.loaded
	g.mu.Unlock()
	if !loaded {
		h, err := g.horizon.Load(ctx)
		if err != nil {
			return fmt.Errorf("%w: load: %w", ErrHorizon, err)
		}
		if !h.IsZero() {
			floor := g.layout.tickOf(h) + 1
			if floor > g.layout.maxTick {
				return fmt.Errorf("%w: recorded horizon %s is past layout %s's end %s: %w", ErrHorizon,
					h.UTC().Format(time.RFC3339Nano), g.layout.name, g.layout.End().Format(time.RFC3339), ErrLayoutExpired)
			}
			want := floor<<g.sb - 1
			for {
				old := g.state.Load()
				if old >= want || g.state.CompareAndSwap(old, want) {
					break
				}
			}
			g.floor.Store(want)
		}
		g.mu.Lock()
		g.loaded = true
		g.mu.Unlock()
	}
	base := max(g.layout.tickOf(g.clk.Now()), g.state.Load()>>g.sb)
	ahead := max(g.borrow, g.logical)
	target := g.layout.tickTime(base + ahead + 1).Add(g.lead)
	h, err := g.horizon.Extend(ctx, target)
	if err != nil {
		return fmt.Errorf("%w: extend to %s: %w", ErrHorizon, target.Format(time.RFC3339Nano), err)
	}
	ht := min(g.layout.tickOf(h), g.layout.maxTick)
	if g.mut.Has(mutate.PastHorizon) {
		ht++
	}
	for {
		old := g.hz.Load()
		if ht <= old || g.hz.CompareAndSwap(old, ht) {
			break
		}
	}
	ht = g.hz.Load()
	g.mu.Lock()
	if !g.closed.Load() {
		g.limit.Store(min(ht-g.leadTicks/2, g.layout.maxTick))
	}
	g.mu.Unlock()
	if ht < base {
		return fmt.Errorf("%w: Extend(%s) recorded only %s", ErrHorizon, target.Format(time.RFC3339Nano), h.UTC().Format(time.RFC3339Nano))
	}
	return nil
}
