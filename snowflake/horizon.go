package snowflake

import (
	"context"
	"time"
)

// Horizon records how far ahead in time a generator may stamp IDs
// (design.md U3 and U6). A Generator never issues an ID stamped after the
// horizon most recently returned by Extend, and a new Generator on the same
// Horizon starts strictly after the horizon Load returns, whatever its own
// clock says. That is what makes a restart, or a handover of a worker ID to
// another process with a slower clock, safe.
//
// Implementations: FileHorizon in this package (a single process on one
// machine); the worker package provides coordinator-backed ones (SQL, etcd,
// ZooKeeper) whose writes are fenced by the lease's generation.
//
// How a Generator calls it: Load once, before its first ID; Extend from one
// goroutine at a time, never while holding a lock, with until set
// Settings.HorizonLead past the later of the current time and the last
// stamped tick. Extend starts in the background once half the lead is left,
// so a fast implementation never delays an ID; callers block on it only when
// they reach the recorded horizon. The context passed is cancelled by
// Generator.Close.
type Horizon interface {
	// Load returns the horizon recorded by the previous holder, or the zero
	// time when none was ever recorded.
	Load(ctx context.Context) (time.Time, error)
	// Extend durably records a horizon of at least until (fsync'd, or
	// acknowledged by a quorum) and returns the horizon now recorded. It
	// fails when it cannot prove the write was made by the current holder
	// (for example after a lost lease); the generator then issues nothing
	// stamped past the horizon it already had.
	Extend(ctx context.Context, until time.Time) (time.Time, error)
}

// Releaser is a Horizon that can be lowered when its holder stops cleanly.
// Generator.Close calls Release with the time stamped on the last ID it
// issued, after it has made sure it issues no more: the next holder then
// starts right after that ID instead of after the whole lead, so a graceful
// restart waits for nothing. A holder that crashes never releases, and its
// successor waits out the recorded horizon (at most the lead).
type Releaser interface {
	// Release records last as the horizon, even though it is below the
	// horizon recorded so far. Like Extend, it must fail rather than write
	// when it cannot prove the caller still holds the horizon.
	Release(ctx context.Context, last time.Time) error
}

// Fence tells a generator whether its worker ID is still provably its own
// (design.md U4). A generator with a Fence issues nothing once the Clock's
// Mono reading reaches ValidUntil, and resumes when ValidUntil moves past it
// again (the lease was re-confirmed).
type Fence interface {
	// ValidUntil returns the Mono time, as read from the generator's Clock,
	// until which the lease is proven valid. A zero or past value means the
	// generator must not issue.
	ValidUntil() time.Duration
}
