package clock

import (
	"context"
	"time"
)

// Clock is a source of wall and monotonic time plus a cancellable sleep.
// Implementations are safe for concurrent use.
type Clock interface {
	// Now returns the current wall-clock time. It may go backwards.
	Now() time.Time
	// Mono returns the time elapsed on a monotonic clock since an arbitrary
	// origin fixed for the life of the Clock. It never decreases.
	Mono() time.Duration
	// Sleep waits until Mono has advanced by at least d, or until ctx is
	// done, in which case it returns ctx.Err(). A non-positive d returns at
	// once (nil unless ctx is already done).
	Sleep(ctx context.Context, d time.Duration) error
	// SleepUntil waits until Mono reaches until, or until ctx is done, in
	// which case it returns ctx.Err(). An until already reached returns at
	// once (nil unless ctx is already done).
	SleepUntil(ctx context.Context, until time.Duration) error
}

// start is the process-wide origin of the monotonic deadlines the real
// clock's wait primitive works in, whatever Real they came from.
var start = time.Now()

func sinceStart() time.Duration { return time.Since(start) }

// Real is the system clock. The zero value is not usable; call NewReal.
//
// Waits are idle and precise: every Real in the process shares one wait
// primitive in which the goroutine with the earliest pending deadline parks
// (a runtime timer for all but the last ~2 ms, then, on Linux, a
// nanosleep with 1 µs timer slack) and spins only through the last ~10 µs;
// every other waiter parks on a channel closed when that wait ends. So a
// wait ends within microseconds of its deadline, and any number of
// goroutines waiting for the next tick cost at most one spinning goroutine,
// for at most ~10 µs per wait.
type Real struct {
	origin time.Time     // carries Go's monotonic reading
	off    time.Duration // origin - start
}

// NewReal returns the system clock. Its Mono origin is the moment of the call.
func NewReal() *Real {
	o := time.Now()
	return &Real{origin: o, off: o.Sub(start)}
}

// Now returns time.Now().
func (r *Real) Now() time.Time { return time.Now() }

// Mono returns the monotonic time elapsed since NewReal.
func (r *Real) Mono() time.Duration { return time.Since(r.origin) }

// Sleep waits for d or until ctx is done; see SleepUntil.
func (r *Real) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	return r.SleepUntil(ctx, r.Mono()+d)
}

// SleepUntil waits until Mono reaches until, or ctx is done. It parks
// rather than spins (see Real); it ends within microseconds of until when
// the process gets a CPU, and notices ctx within about 2 ms.
func (r *Real) SleepUntil(ctx context.Context, until time.Duration) error {
	return realGate.SleepUntil(ctx, until+r.off)
}
