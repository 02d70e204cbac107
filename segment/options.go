package segment

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/idmint/idmint/clock"
)

// Options configure an Allocator. The zero value is Leaf's behaviour:
// load at 10 % used, dynamic step up to 1,000,000, unknown keys refused.
type Options struct {
	// Clock times loads for the dynamic step and paces retries.
	// nil means clock.NewReal().
	Clock clock.Clock

	// LoadAt is the share of a segment used before the next one is loaded
	// in the background, in (0, 1]. 0 means 0.1 (Leaf loads when less than
	// 90 % is idle); Tinyid uses 0.2.
	LoadAt float64

	// Step is the dynamic step policy.
	Step StepPolicy

	// AutoCreate makes an unknown key a new row (with AutoCreateStep and
	// max_id DefaultMaxID) instead of ErrUnknownKey.
	AutoCreate bool
	// AutoCreateStep is the step of auto-created keys; 0 means 1000.
	AutoCreateStep int64

	// Delta and Remainder are Tinyid's options: the Allocator issues only
	// numbers n with n mod Delta == Remainder, so Delta 2 Remainder 1 gives
	// odd numbers, and N allocators on N separate stores with Delta N and
	// Remainders 0..N-1 split one number line without sharing a store.
	// Delta 0 means 1 (every number). Remainder must be in [0, Delta).
	Delta, Remainder int64

	// LoadTimeout bounds each store call. 0 means 5 s.
	LoadTimeout time.Duration
	// RetryMin and RetryMax bound the backoff between failed loads; it
	// doubles from RetryMin up to RetryMax. 0 means 50 ms and 5 s.
	RetryMin, RetryMax time.Duration

	// Witness, when set, keeps every key's high-water mark in a second
	// failure domain (package witness: the node's data directory, the
	// cluster's coordinator, another database). A segment is served only
	// after the witness let it claim its range, so a store that forgets
	// writes it acknowledged (a failover to a lagging replica, a restored
	// backup) cannot make two segments overlap: the Allocator raises such a
	// store above the mark (Store.Raise) and allocates again. nil: only
	// this Allocator's memory guards against a store that went back.
	Witness Witness

	// CloseStore makes Allocator.Close close the store as well.
	CloseStore bool

	// Logger receives one line when a key's store starts failing (with
	// how many IDs its buffers still hold: an outage the double buffer
	// absorbs is otherwise invisible) and one when it answers again. nil
	// discards them.
	Logger *slog.Logger
}

// StepPolicy is the dynamic step rule. The zero value is Leaf's: after a
// segment that lasted less than Grow (15 min) the next step doubles, up to
// Max (1,000,000); after one that lasted Shrink (30 min) or more it
// halves, never below the key's configured step. A segment "lasts" from
// its load to the next load, as in Leaf.
type StepPolicy struct {
	// Fixed turns the dynamic step off: every load leases the key's
	// configured step.
	Fixed bool
	// Max caps the step. 0 means 1,000,000. A key configured above Max
	// keeps its own step.
	Max int64
	// Grow: a segment lasting less doubles the step. 0 means 15 min.
	Grow time.Duration
	// Shrink: a segment lasting this long or longer halves it. 0 means
	// 30 min.
	Shrink time.Duration
}

// withDefaults returns o with zero values replaced and validated.
func (o Options) withDefaults() (Options, error) {
	if o.Clock == nil {
		o.Clock = clock.NewReal()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.LoadAt == 0 {
		o.LoadAt = 0.1
	}
	if !(o.LoadAt > 0 && o.LoadAt <= 1) {
		return o, fmt.Errorf("%w: LoadAt %v is not in (0, 1]", ErrBadOptions, o.LoadAt)
	}
	if o.Step.Max == 0 {
		o.Step.Max = 1_000_000
	}
	if o.Step.Max < 1 || o.Step.Max > MaxStep {
		return o, fmt.Errorf("%w: Step.Max %d is not in [1, %d]", ErrBadOptions, o.Step.Max, MaxStep)
	}
	if o.Step.Grow == 0 {
		o.Step.Grow = 15 * time.Minute
	}
	if o.Step.Shrink == 0 {
		o.Step.Shrink = 30 * time.Minute
	}
	if o.Step.Grow < 0 || o.Step.Shrink < o.Step.Grow {
		return o, fmt.Errorf("%w: Step.Grow %v and Step.Shrink %v: want 0 <= Grow <= Shrink", ErrBadOptions, o.Step.Grow, o.Step.Shrink)
	}
	if o.AutoCreateStep == 0 {
		o.AutoCreateStep = 1000
	}
	if err := ValidateStep(o.AutoCreateStep); err != nil {
		return o, fmt.Errorf("%w: AutoCreateStep: %v", ErrBadOptions, err)
	}
	if o.Delta == 0 {
		o.Delta = 1
	}
	if o.Delta < 1 || o.Delta > MaxStep {
		return o, fmt.Errorf("%w: Delta %d is not in [1, %d]", ErrBadOptions, o.Delta, MaxStep)
	}
	if o.Remainder < 0 || o.Remainder >= o.Delta {
		return o, fmt.Errorf("%w: Remainder %d is not in [0, Delta %d)", ErrBadOptions, o.Remainder, o.Delta)
	}
	if o.LoadTimeout == 0 {
		o.LoadTimeout = 5 * time.Second
	}
	if o.RetryMin == 0 {
		o.RetryMin = 50 * time.Millisecond
	}
	if o.RetryMax == 0 {
		o.RetryMax = 5 * time.Second
	}
	if o.LoadTimeout < 0 || o.RetryMin < 0 || o.RetryMax < o.RetryMin {
		return o, fmt.Errorf("%w: LoadTimeout %v, RetryMin %v, RetryMax %v: want positive, RetryMin <= RetryMax", ErrBadOptions, o.LoadTimeout, o.RetryMin, o.RetryMax)
	}
	return o, nil
}

// nextStep applies the policy: cur is the step of the last segment, min
// the key's configured step, lasted how long the last segment lasted.
func (p StepPolicy) nextStep(cur, min int64, lasted time.Duration) int64 {
	step := cur
	switch {
	case lasted < p.Grow:
		if step <= p.Max/2 {
			step *= 2
		}
	case lasted >= p.Shrink:
		if step/2 >= min {
			step /= 2
		}
	}
	if step < min {
		step = min
	}
	return step
}
