package clock

import (
	"context"
	"sync"
	"time"
)

// Fake is a Clock for tests. Its wall time and monotonic time move only when
// the test says so: Advance moves both forwards, Step moves the wall clock
// alone (forwards or backwards) to simulate NTP steps and clock rollback.
// Sleepers wake when Mono reaches their deadline. Safe for concurrent use.
type Fake struct {
	mu       sync.Mutex
	wall     time.Time
	mono     time.Duration
	sleepers []*sleeper
	changed  chan struct{} // closed and replaced whenever sleepers change
}

type sleeper struct {
	until time.Duration
	done  chan struct{}
}

// NewFake returns a Fake whose wall clock reads start and whose Mono is 0.
func NewFake(start time.Time) *Fake {
	return &Fake{wall: start, changed: make(chan struct{})}
}

// Now returns the fake wall time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wall
}

// Mono returns the fake monotonic time.
func (f *Fake) Mono() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mono
}

// Sleep blocks until Advance has moved Mono by d, or ctx is done.
func (f *Fake) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	return f.SleepUntil(ctx, f.Mono()+d)
}

// SleepUntil blocks until Advance has moved Mono to until, or ctx is done.
func (f *Fake) SleepUntil(ctx context.Context, until time.Duration) error {
	return f.park(ctx, until, nil)
}

// park is SleepUntil that also returns (nil) when wake is closed. Every
// goroutine in it counts in Sleepers.
func (f *Fake) park(ctx context.Context, until time.Duration, wake <-chan struct{}) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	if until <= f.mono {
		f.mu.Unlock()
		return nil
	}
	s := &sleeper{until: until, done: make(chan struct{})}
	f.sleepers = append(f.sleepers, s)
	f.notifyLocked()
	f.mu.Unlock()
	select {
	case <-s.done:
		return nil
	case <-wake:
		f.mu.Lock()
		f.removeLocked(s)
		f.mu.Unlock()
		return nil
	case <-ctx.Done():
		f.mu.Lock()
		f.removeLocked(s)
		f.mu.Unlock()
		return ctx.Err()
	}
}

// Advance moves the wall and monotonic clocks forwards by d and wakes every
// sleeper whose deadline has come. A negative d is ignored: use Step to move
// the wall clock back.
func (f *Fake) Advance(d time.Duration) {
	if d < 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wall = f.wall.Add(d)
	f.mono += d
	kept := f.sleepers[:0]
	for _, s := range f.sleepers {
		if s.until <= f.mono {
			close(s.done)
		} else {
			kept = append(kept, s)
		}
	}
	for i := len(kept); i < len(f.sleepers); i++ {
		f.sleepers[i] = nil
	}
	f.sleepers = kept
	f.notifyLocked()
}

// Step moves the wall clock alone by d, which may be negative (a clock
// rollback). Mono and sleepers are not affected, as with a real NTP step.
func (f *Fake) Step(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wall = f.wall.Add(d)
}

// Set sets the wall clock to t, leaving Mono unchanged.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wall = t
}

// Sleepers returns how many goroutines are blocked in Sleep.
func (f *Fake) Sleepers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sleepers)
}

// WaitForSleepers blocks until at least n goroutines are blocked in Sleep,
// or ctx is done. Tests use it instead of time.Sleep to know that the code
// under test has reached its wait before they Advance the clock.
func (f *Fake) WaitForSleepers(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		got, ch := len(f.sleepers), f.changed
		f.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (f *Fake) removeLocked(s *sleeper) {
	for i, o := range f.sleepers {
		if o == s {
			f.sleepers = append(f.sleepers[:i], f.sleepers[i+1:]...)
			break
		}
	}
	f.notifyLocked()
}

func (f *Fake) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}
