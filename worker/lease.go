package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/internal/mutate"
)

// backend is what a coordinator does for a Lease.
type backend interface {
	// keepalive confirms the lease with the coordinator. It returns an
	// error wrapping ErrLeaseLost when the coordinator says the lease is
	// gone, any other error when it could not tell.
	keepalive(ctx context.Context) error
	// store records a horizon of at least until, conditional on the lease
	// still being held (its generation), and returns the value recorded
	// (rounded up to the coordinator's resolution).
	store(ctx context.Context, until time.Time) (time.Time, error)
	// lower records exactly last as the horizon, below the recorded one,
	// conditional on the lease still being held, and returns the value
	// recorded (rounded up to the coordinator's resolution).
	lower(ctx context.Context, last time.Time) (time.Time, error)
	// release gives the worker ID back (best effort) and frees resources.
	// The Lease calls it exactly once, on Close, whether or not the lease
	// was lost before: a coordinator may still hold something for it.
	release(ctx context.Context) error
}

// storeConfirmer is a backend whose successful store proves the lease the
// way a keepalive does (ZooKeeper: every request renews the session that
// holds the lock).
type storeConfirmer interface {
	storeConfirms() bool
}

// Lease is one holding of a worker ID. Safe for concurrent use.
//
// Its Load, Extend and ValidUntil methods make it a snowflake.Horizon and a
// snowflake.Fence.
type Lease struct {
	id, gen int64
	holder  string
	b       backend
	clk     clock.Clock
	ttl     time.Duration
	margin  time.Duration
	timeout time.Duration
	every   time.Duration // keepalive period
	log     *slog.Logger
	mut     *mutate.Set

	// valid is the Mono reading (ns) until which the lease is proven. It
	// is 0 once the lease is lost or closed, and confirm never moves it
	// from 0, so a confirmation racing the loss cannot revive it.
	valid atomic.Int64

	done        chan struct{}
	doneOnce    sync.Once
	errMu       sync.Mutex
	err         error
	releaseOnce sync.Once

	writing chan struct{} // a one-slot semaphore: one horizon write at a time
	hmu     sync.Mutex    // guards horizon; never held during I/O
	horizon time.Time     // the highest horizon recorded in the coordinator

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// forever is the ValidUntil of leases that cannot expire (static, file).
const forever = time.Duration(math.MaxInt64)

// newLease builds a Lease. sent is the Mono reading taken before the
// acquiring request was sent; expiring says whether the lease needs
// keepalives (false for static and file leases, which never expire).
func newLease(s settings, id, gen int64, horizon time.Time, b backend, sent time.Duration, expiring bool) *Lease {
	l := &Lease{
		id: id, gen: gen, holder: s.holder, b: b, clk: s.clock,
		ttl: s.ttl, margin: s.margin, timeout: min(s.timeout, s.ttl-s.margin),
		log: s.logger.With("worker_id", id, "generation", gen), done: make(chan struct{}),
		horizon: horizon, every: s.interval, writing: make(chan struct{}, 1), mut: s.mut,
	}
	if l.every <= 0 {
		l.every = s.ttl / 3
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	if !expiring {
		l.valid.Store(int64(forever))
		return l
	}
	l.valid.Store(max(int64(sent+l.ttl-l.margin), 1))
	l.wg.Add(1)
	go l.run(ctx)
	return l
}

// ID returns the worker ID this lease holds.
func (l *Lease) ID() int64 { return l.id }

// Generation returns the fencing token of this holding: it is larger than
// the generation of every earlier holding of the same worker ID.
func (l *Lease) Generation() int64 { return l.gen }

// Holder returns the name this process is registered under.
func (l *Lease) Holder() string { return l.holder }

// Done returns a channel closed when the lease is known lost or closed;
// Err then says which. A lease whose coordinator is unreachable is not
// Done: its ValidUntil stops moving, and it recovers if the coordinator
// confirms it again before it expires there.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err returns nil while Done is open, then ErrLeaseLost (wrapped with the
// reason) or ErrClosed.
func (l *Lease) Err() error {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	return l.err
}

// ValidUntil returns the Mono time (of the Clock given to the assigner)
// until which the lease is proven valid: the sending time (never the reply
// time) of the last keepalive the coordinator confirmed, plus TTL, minus
// the margin. With ZooKeeper a confirmed horizon write counts as a
// keepalive, since every request renews the session. It is zero once the
// lease is lost or closed, for good: a confirmation that arrives later does
// not revive it. It is the maximum Duration for leases that cannot expire
// (static, file).
func (l *Lease) ValidUntil() time.Duration { return time.Duration(l.valid.Load()) }

// Clock returns the clock ValidUntil is a reading of; a generator fenced
// by this lease must read Mono from the same clock.
func (l *Lease) Clock() clock.Clock { return l.clk }

// Valid reports whether the lease is proven valid now.
func (l *Lease) Valid() bool { return l.clk.Mono() < l.ValidUntil() }

// Load returns the horizon recorded for this worker ID: the previous
// holder's when the lease was acquired, raised by every Extend since. It is
// the zero time when none was ever recorded. It does no I/O.
func (l *Lease) Load(ctx context.Context) (time.Time, error) {
	return l.recorded(), nil
}

func (l *Lease) recorded() time.Time {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	return l.horizon
}

// startWrite waits for the one horizon write slot, no longer than ctx.
func (l *Lease) startWrite(ctx context.Context) error {
	select {
	case l.writing <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("worker: horizon write of worker id %d: %w", l.id, ctx.Err())
	}
}

func (l *Lease) endWrite() { <-l.writing }

// Extend records a horizon of at least until in the coordinator (durably:
// fsync'd or acknowledged by a quorum), with a write conditional on this
// lease's generation, and returns the horizon now recorded. A holder that
// lost the lease cannot move the horizon: Extend then returns an error
// wrapping ErrLeaseLost and the horizon it had. Extend never lowers the
// horizon; an until at or below it returns at once. It gives up after the
// configured timeout even when ctx has no deadline.
func (l *Lease) Extend(ctx context.Context, until time.Time) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	if err := l.startWrite(ctx); err != nil {
		return l.recorded(), err
	}
	defer l.endWrite()
	h := l.recorded()
	if err := l.Err(); err != nil {
		return h, err
	}
	if !until.After(h) {
		return h, nil
	}
	sent := l.clk.Mono()
	got, err := l.b.store(ctx, until)
	if err != nil {
		if errors.Is(err, ErrLeaseLost) {
			l.lose(err)
		}
		return h, err
	}
	if c, ok := l.b.(storeConfirmer); ok && c.storeConfirms() {
		l.confirm(sent)
	}
	l.hmu.Lock()
	defer l.hmu.Unlock()
	if got.After(l.horizon) {
		l.horizon = got
	}
	return l.horizon, nil
}

// Release lowers the recorded horizon to last, the time stamped on the last
// ID the generator issued, when the generator closes cleanly (it makes the
// Lease a snowflake.Releaser). The next holder of the worker ID then starts
// right after that ID instead of waiting out the whole lead. Like Extend, it
// writes only while the lease is held, conditional on its generation, and
// gives up after the configured timeout.
func (l *Lease) Release(ctx context.Context, last time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	if err := l.startWrite(ctx); err != nil {
		return err
	}
	defer l.endWrite()
	if err := l.Err(); err != nil {
		return err
	}
	if !last.Before(l.recorded()) {
		return nil
	}
	got, err := l.b.lower(ctx, last)
	if err != nil {
		if errors.Is(err, ErrLeaseLost) {
			l.lose(err)
		}
		return err
	}
	l.hmu.Lock()
	l.horizon = got
	l.hmu.Unlock()
	return nil
}

// Close stops the keepalives, releases the worker ID in the coordinator
// (the recorded horizon stays, for the next holder) and closes Done. A lost
// lease must be closed too: the release then frees what the coordinator
// may still hold for it (a ZooKeeper lock of this process's live session),
// so the worker ID can be acquired again. The release runs exactly once,
// within the configured timeout; Close is idempotent and later calls
// return nil.
func (l *Lease) Close() error {
	first := false
	l.finish(ErrClosed, &first)
	l.cancel()
	l.wg.Wait()
	var err error
	l.releaseOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
		defer cancel()
		err = l.b.release(ctx)
	})
	return err
}

// finish ends the lease once: Err is set before ValidUntil drops to 0, and
// confirm never raises it from 0.
func (l *Lease) finish(err error, first *bool) {
	l.doneOnce.Do(func() {
		l.errMu.Lock()
		l.err = err
		l.errMu.Unlock()
		l.valid.Store(0)
		close(l.done)
		*first = true
	})
}

func (l *Lease) lose(err error) {
	first := false
	l.finish(err, &first)
	if first {
		l.log.Warn("worker lease lost", "err", err)
		l.cancel()
	}
}

// confirm records that a keepalive sent at Mono time sent was confirmed.
// It never moves ValidUntil back, nor away from 0 (lost or closed).
func (l *Lease) confirm(sent time.Duration) {
	v := int64(sent + l.ttl - l.margin)
	for {
		old := l.valid.Load()
		if (old == 0 && !l.mut.Has(mutate.LeaseReviveAfterLoss)) || old >= v {
			return
		}
		if l.valid.CompareAndSwap(old, v) {
			return
		}
	}
}

func (l *Lease) run(ctx context.Context) {
	defer l.wg.Done()
	next := l.every
	for {
		if err := l.clk.Sleep(ctx, next); err != nil {
			return
		}
		sent := l.clk.Mono()
		kctx, cancel := context.WithTimeout(ctx, l.timeout)
		err := l.b.keepalive(kctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			if l.mut.Has(mutate.LeaseDeadlineFromReply) {
				sent = l.clk.Mono()
			}
			l.confirm(sent)
		case errors.Is(err, ErrLeaseLost):
			l.lose(err)
			return
		default:
			if left := l.ValidUntil() - l.clk.Mono(); left > 0 {
				l.log.Warn("worker keepalive failed; lease valid until its deadline", "err", err, "valid_for", left)
			} else {
				l.log.Warn("worker keepalive failed; lease expired: issuing is fenced until the coordinator confirms it",
					"err", err, "expired_for", -left)
			}
		}
		// Keep the period from one send to the next, so a slow reply does
		// not stretch the gap between confirmations; a tenth of it at least.
		next = max(l.every-(l.clk.Mono()-sent), l.every/10)
	}
}
