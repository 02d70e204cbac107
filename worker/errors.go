package worker

import (
	"errors"
	"fmt"
)

// ErrLeaseLost is returned by Extend, and by Err once Done is closed, when
// the coordinator no longer recognises this lease: it expired, or its
// worker ID was given to another holder. The holder must stop issuing and
// acquire a new lease.
var ErrLeaseLost = errors.New("worker: lease lost")

// ErrClosed is returned by a Lease or Assigner used after Close.
var ErrClosed = errors.New("worker: closed")

// ErrHeld is returned by Acquire when the worker ID this process must use
// (static, file, Leaf node for this address) is held by another live
// process.
var ErrHeld = errors.New("worker: worker id held by another process")

// ErrNoHorizon is returned by Acquire of a static, ip or mac assigner
// given neither a horizon file nor WithMemoryHorizon: it has no
// coordinator to keep its time horizon in, so a restart with the clock set
// back would repeat IDs (design.md U6).
var ErrNoHorizon = errors.New("worker: no place to keep the time horizon")

// ErrBadURL is wrapped by every error Open returns for a coordinator URL it
// cannot use; the message names the field and the value.
var ErrBadURL = errors.New("worker: bad coordinator url")

// ErrBadOption is wrapped by errors about an Option value (TTL, margin,
// timeout); the message names the option and the value.
var ErrBadOption = errors.New("worker: bad option")

// NoFreeIDError is returned by Acquire when every worker ID in the range is
// held. errors.Is(err, ErrNoFreeID) reports it.
type NoFreeIDError struct {
	InUse int64 // how many worker IDs are held now
	Max   int64 // the highest worker ID the layout allows
}

// ErrNoFreeID matches a *NoFreeIDError with errors.Is.
var ErrNoFreeID = errors.New("worker: no free worker id")

func (e *NoFreeIDError) Error() string {
	return fmt.Sprintf("worker: no free worker id: %d of %d in use (ids 0..%d); wait for a holder's lease to expire or widen the layout's worker field", e.InUse, e.Max+1, e.Max)
}

// Is makes errors.Is(err, ErrNoFreeID) true.
func (e *NoFreeIDError) Is(target error) bool { return target == ErrNoFreeID }

// RangeError is returned when a worker ID falls outside 0..Max, the range
// the layout's worker field can hold. errors.Is(err, ErrOutOfRange) reports
// it.
type RangeError struct {
	ID, Max int64
	Source  string // where the ID came from: "static", "zookeeper sequence", ...
}

// ErrOutOfRange matches a *RangeError with errors.Is.
var ErrOutOfRange = errors.New("worker: worker id out of range")

func (e *RangeError) Error() string {
	return fmt.Sprintf("worker: worker id %d (from %s) is out of range 0..%d for this layout", e.ID, e.Source, e.Max)
}

// Is makes errors.Is(err, ErrOutOfRange) true.
func (e *RangeError) Is(target error) bool { return target == ErrOutOfRange }

func checkRange(id, max int64, source string) error {
	if max < 0 {
		return fmt.Errorf("%w: max worker id %d is negative", ErrBadOption, max)
	}
	if id < 0 || id > max {
		return &RangeError{ID: id, Max: max, Source: source}
	}
	return nil
}
