package monotonic

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/idmint/idmint/clock"
)

// Source issues strictly increasing IDs. Next reserves n consecutive IDs
// and returns the first: the caller owns [first, first+n). Every value is
// above every value any earlier completed Next returned, on any node
// sharing the Source's coordinator. Implementations are safe for
// concurrent use.
type Source interface {
	Next(ctx context.Context, n int64) (first int64, err error)
	Close() error
}

// Form says how IDs are built.
type Form int

const (
	// Counter issues 1, 2, 3, ...
	Counter Form = iota
	// Timestamp issues Unix milliseconds << LogicalBits | a logical
	// counter, never behind the last issued value.
	Timestamp
)

// LogicalBits is the width of the logical counter of the Timestamp form
// (TiDB PD uses 18 as well): 262,144 IDs per millisecond before the
// physical part runs ahead of the wall clock, and 45 bits of milliseconds,
// enough until the year 3084.
const LogicalBits = 18

const logicalMask = 1<<LogicalBits - 1

// ParseForm reads "counter" or "timestamp".
func ParseForm(s string) (Form, error) {
	switch strings.ToLower(s) {
	case "", "counter":
		return Counter, nil
	case "timestamp":
		return Timestamp, nil
	}
	return 0, fmt.Errorf("monotonic: form %q is not counter or timestamp", s)
}

// String returns "counter" or "timestamp".
func (f Form) String() string {
	if f == Timestamp {
		return "timestamp"
	}
	return "counter"
}

// Parts is a Timestamp-form ID taken apart.
type Parts struct {
	Time    time.Time // the physical part, millisecond precision, UTC
	Logical int64     // the logical counter
}

// Decode takes apart a Timestamp-form ID. It fails on a negative id.
func Decode(id int64) (Parts, error) {
	if id < 0 {
		return Parts{}, fmt.Errorf("monotonic: id %d is negative: not a timestamp-form id", id)
	}
	return Parts{Time: time.UnixMilli(id >> LogicalBits).UTC(), Logical: id & logicalMask}, nil
}

// Stamp returns the smallest Timestamp-form ID of the millisecond of t.
func Stamp(t time.Time) int64 { return t.UnixMilli() << LogicalBits }

// Errors.
var (
	// ErrFenced is returned while this node cannot prove it leads (its
	// lease expired on its own clock, or leadership moved) and no leader is
	// known to forward to. Retry later: a leader is being elected.
	ErrFenced = errors.New("monotonic: not the proven leader")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("monotonic: source closed")
	// ErrBadCount is returned for n < 1 or n beyond MaxCount.
	ErrBadCount = errors.New("monotonic: count out of range")
	// ErrBadConfig is returned by constructors for an invalid setting.
	ErrBadConfig = errors.New("monotonic: bad config")
	// ErrExhausted is returned when the next value would overflow int64.
	ErrExhausted = errors.New("monotonic: int64 space exhausted")
)

// MaxCount is the most IDs one Next may reserve.
const MaxCount = 1 << 20

// Defaults.
const (
	// DefaultWindow is how far (in values) a Counter bound runs ahead of
	// the last issued value.
	DefaultWindow = 100_000
	// DefaultTimeWindow is how far a Timestamp bound runs ahead of the wall
	// clock (TiDB PD's tso-save-interval is 3 s).
	DefaultTimeWindow = 3 * time.Second
)

// issuing holds the settings File and Etcd share, with their defaults:
// how IDs are built and how far the persisted bound runs ahead.
type issuing struct {
	Form       Form
	Window     int64
	TimeWindow time.Duration
	Clock      clock.Clock
}

// setDefaults fills zero values and rejects invalid ones.
func (s *issuing) setDefaults() error {
	if s.Form != Counter && s.Form != Timestamp {
		return fmt.Errorf("%w: form %d", ErrBadConfig, s.Form)
	}
	if s.Window == 0 {
		s.Window = DefaultWindow
	}
	if s.Window < 1 {
		return fmt.Errorf("%w: window %d is below 1", ErrBadConfig, s.Window)
	}
	if s.TimeWindow == 0 {
		s.TimeWindow = DefaultTimeWindow
	}
	if s.TimeWindow < time.Millisecond {
		return fmt.Errorf("%w: time window %v is below 1ms", ErrBadConfig, s.TimeWindow)
	}
	if s.Clock == nil {
		s.Clock = clock.NewReal()
	}
	return nil
}

// persister durably records a bound, conditional on the right to issue
// (it checks that right itself and returns ErrFenced without it).
type persister func(ctx context.Context, bound int64) error

// core issues values from memory below a persisted bound. One core is one
// leadership term: its valid func says whether the term is still proven.
type core struct {
	form    Form
	clk     clock.Clock
	window  int64         // Counter
	twindow time.Duration // Timestamp
	persist persister
	valid   func() bool
	timeout time.Duration

	mu     sync.Mutex
	last   int64 // last issued
	bound  int64 // persisted: nothing above it is issued
	closed bool

	writing chan struct{} // one bound write at a time
	bg      sync.WaitGroup
	stop    chan struct{}
	once    sync.Once
}

func newCore(form Form, clk clock.Clock, window int64, twindow, timeout time.Duration, start int64, p persister, valid func() bool) *core {
	return &core{
		form: form, clk: clk, window: window, twindow: twindow, persist: p, valid: valid, timeout: timeout,
		last: start, bound: start, writing: make(chan struct{}, 1), stop: make(chan struct{}),
	}
}

// target is the bound to persist so that end can be issued and a window
// of headroom remains.
func (c *core) target(end int64) int64 {
	if c.form == Timestamp {
		w := Stamp(c.clk.Now().Add(c.twindow)) | logicalMask
		return max(w, end+int64(c.twindow/time.Millisecond)<<LogicalBits)
	}
	if end > math.MaxInt64-c.window {
		return math.MaxInt64
	}
	return end + c.window
}

// low reports whether the headroom above end is under half a window.
func (c *core) low(end, bound int64) bool {
	if c.form == Timestamp {
		return bound-Stamp(c.clk.Now()) < int64(c.twindow/2/time.Millisecond)<<LogicalBits
	}
	return bound-end < c.window/2
}

func (c *core) next(ctx context.Context, n int64) (int64, error) {
	if n < 1 || n > MaxCount {
		return 0, fmt.Errorf("%w: %d is not in 1..%d", ErrBadCount, n, MaxCount)
	}
	for {
		c.mu.Lock()
		if !c.valid() {
			c.mu.Unlock()
			return 0, ErrFenced
		}
		if c.last > math.MaxInt64-n {
			c.mu.Unlock()
			return 0, ErrExhausted
		}
		first := c.last + 1
		if c.form == Timestamp {
			if s := Stamp(c.clk.Now()); s > first {
				first = s
			}
		}
		end := first + n - 1
		if end <= c.bound {
			c.last = end
			low := c.low(end, c.bound)
			c.mu.Unlock()
			if low {
				c.extendAsync(end)
			}
			return first, nil
		}
		want := c.target(end)
		c.mu.Unlock()
		if err := c.extend(ctx, want); err != nil {
			return 0, err
		}
	}
}

// extend persists a bound of at least want (one write at a time).
func (c *core) extend(ctx context.Context, want int64) error {
	select {
	case c.writing <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.stop:
		return ErrClosed
	}
	defer func() { <-c.writing }()
	return c.write(ctx, want)
}

func (c *core) write(ctx context.Context, want int64) error {
	c.mu.Lock()
	done := c.bound >= want
	c.mu.Unlock()
	if done {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout) // persist checks its own right to write
	defer cancel()
	if err := c.persist(ctx, want); err != nil {
		return err
	}
	c.mu.Lock()
	if want > c.bound {
		c.bound = want
	}
	c.mu.Unlock()
	return nil
}

// extendAsync raises the bound in the background when no write is under
// way, so callers rarely wait for one.
func (c *core) extendAsync(end int64) {
	select {
	case c.writing <- struct{}{}:
	default:
		return
	}
	c.mu.Lock()
	closed := c.closed
	if !closed {
		c.bg.Add(1)
	}
	c.mu.Unlock()
	if closed {
		<-c.writing
		return
	}
	go func() {
		defer c.bg.Done()
		defer func() { <-c.writing }()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-c.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		_ = c.write(ctx, c.target(end)) // a failure is retried by the next caller, synchronously
	}()
}

// headroom returns the bound minus the last issued value.
func (c *core) headroom() (last, bound int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last, c.bound
}

// close stops background writes and waits for them.
func (c *core) close() {
	c.once.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		close(c.stop)
	})
	c.bg.Wait()
}
