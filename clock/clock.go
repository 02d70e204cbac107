package clock

import (
	"context"
	"runtime"
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
}

// precise is the longest sleep Real serves by yielding instead of a timer.
// The Go runtime cannot wake a timer much sooner than ~1 ms on Linux
// (measured on the 2-core CI machine: a 100 µs time.Sleep takes 1.1 ms on
// average, 2 ms at worst), which would cost a 1 ms-tick generator half its
// capacity. Below this bound Real.Sleep yields the processor in a loop:
// precise to a few microseconds, at the price of keeping one core busy for
// at most this long.
const precise = 2 * time.Millisecond

// spinFinal is the tail of a short Real.Sleep spent spinning rather than
// yielding: a yield can cost microseconds when other goroutines are runnable.
const spinFinal = 20 * time.Microsecond

// Real is the system clock. The zero value is not usable; call NewReal.
type Real struct {
	origin time.Time // carries Go's monotonic reading
}

// NewReal returns the system clock. Its Mono origin is the moment of the call.
func NewReal() *Real { return &Real{origin: time.Now()} }

// Now returns time.Now().
func (r *Real) Now() time.Time { return time.Now() }

// Mono returns the monotonic time elapsed since NewReal.
func (r *Real) Mono() time.Duration { return time.Since(r.origin) }

// Sleep waits for d or until ctx is done. Waits shorter than 2 ms are served
// by yielding in a loop rather than by a timer, so they end within
// microseconds of d instead of rounding up to the runtime's ~1 ms timer
// granularity.
func (r *Real) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	if d < precise {
		end := r.Mono() + d
		for {
			left := end - r.Mono()
			if left <= 0 {
				return nil
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			// Yield while there is time for other goroutines to run; spin
			// through the last few microseconds, where a yield's own cost
			// would make the wake-up late.
			if left > spinFinal {
				runtime.Gosched()
			}
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
