package worker

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idmint/idmint/clock"
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
	release(ctx context.Context) error
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

	valid atomic.Int64 // Mono nanoseconds until which the lease is proven

	done     chan struct{}
	doneOnce sync.Once
	errMu    sync.Mutex
	err      error

	hmu     sync.Mutex // serialises Extend
	horizon time.Time  // the highest horizon recorded in the coordinator

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
		horizon: horizon, every: s.interval,
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
	l.confirm(sent)
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
// until which the lease is proven valid: the sending time of the last
// keepalive the coordinator confirmed, plus TTL, minus the margin. It is
// zero once the lease is lost or closed, and the maximum Duration for leases
// that cannot expire (static, file).
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
	l.hmu.Lock()
	defer l.hmu.Unlock()
	return l.horizon, nil
}

// Extend records a horizon of at least until in the coordinator (durably:
// fsync'd or acknowledged by a quorum), with a write conditional on this
// lease's generation, and returns the horizon now recorded. A holder that
// lost the lease cannot move the horizon: Extend then returns an error
// wrapping ErrLeaseLost and the horizon it had. Extend never lowers the
// horizon; an until at or below it returns at once.
func (l *Lease) Extend(ctx context.Context, until time.Time) (time.Time, error) {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	if err := l.Err(); err != nil {
		return l.horizon, err
	}
	if !until.After(l.horizon) {
		return l.horizon, nil
	}
	got, err := l.b.store(ctx, until)
	if err != nil {
		if errors.Is(err, ErrLeaseLost) {
			l.lose(err)
		}
		return l.horizon, err
	}
	if got.After(l.horizon) {
		l.horizon = got
	}
	return l.horizon, nil
}

// Release lowers the recorded horizon to last, the time stamped on the last
// ID the generator issued, when the generator closes cleanly (it makes the
// Lease a snowflake.Releaser). The next holder of the worker ID then starts
// right after that ID instead of waiting out the whole lead. Like Extend, it
// writes only while the lease is held, conditional on its generation.
func (l *Lease) Release(ctx context.Context, last time.Time) error {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	if err := l.Err(); err != nil {
		return err
	}
	if !last.Before(l.horizon) {
		return nil
	}
	got, err := l.b.lower(ctx, last)
	if err != nil {
		if errors.Is(err, ErrLeaseLost) {
			l.lose(err)
		}
		return err
	}
	l.horizon = got
	return nil
}

// Close stops the keepalives, releases the worker ID in the coordinator
// (the recorded horizon stays, for the next holder) and closes Done. It is
// idempotent; later calls return nil.
func (l *Lease) Close() error {
	first := false
	l.finish(ErrClosed, &first)
	if !first {
		return nil
	}
	l.cancel()
	l.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	return l.b.release(ctx)
}

func (l *Lease) finish(err error, first *bool) {
	l.doneOnce.Do(func() {
		l.valid.Store(0)
		l.errMu.Lock()
		l.err = err
		l.errMu.Unlock()
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
func (l *Lease) confirm(sent time.Duration) {
	v := int64(sent + l.ttl - l.margin)
	for {
		old := l.valid.Load()
		if old >= v || l.Err() != nil {
			return
		}
		if l.valid.CompareAndSwap(old, v) {
			return
		}
	}
}

func (l *Lease) run(ctx context.Context) {
	defer l.wg.Done()
	for {
		if err := l.clk.Sleep(ctx, l.every); err != nil {
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
			l.confirm(sent)
		case errors.Is(err, ErrLeaseLost):
			l.lose(err)
			return
		default:
			l.log.Warn("worker keepalive failed; lease valid until its deadline", "err", err,
				"valid_for", time.Duration(l.valid.Load())-l.clk.Mono())
		}
	}
}
