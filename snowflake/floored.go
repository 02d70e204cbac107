package snowflake

import (
	"context"
	"fmt"
	"time"
)

// Floored is a Horizon (a worker lease, usually) whose Load answers at
// least Floor and at least the horizon kept in Local, a file on the
// node's own disk: a coordinator whose record went backwards (an
// operator's set, a snapshot restore, a Leaf node writing its clock)
// cannot make a new generator stamp what an earlier one of this node may
// have stamped. Extend and Release write the coordinator first, then the
// file; the generator stamps only up to what both hold.
type Floored struct {
	Horizon Horizon
	// Floor is a horizon the caller knows from before (node.Node keeps
	// the last one each of its leases on the worker ID recorded).
	Floor time.Time
	// Local, when set, also keeps the horizon.
	Local *FileHorizon
}

// Load returns the largest of the coordinator's horizon, Floor and the
// file's.
func (f Floored) Load(ctx context.Context) (time.Time, error) {
	h, err := f.Horizon.Load(ctx)
	if err != nil {
		return h, err
	}
	if f.Floor.After(h) {
		h = f.Floor
	}
	if f.Local != nil {
		lh, err := f.Local.Load(ctx)
		if err != nil {
			return h, fmt.Errorf("local horizon: %w", err)
		}
		if lh.After(h) {
			h = lh
		}
	}
	return h, nil
}

// Extend records the horizon in the coordinator, then in the file.
func (f Floored) Extend(ctx context.Context, until time.Time) (time.Time, error) {
	h, err := f.Horizon.Extend(ctx, until)
	if err != nil || f.Local == nil {
		return h, err
	}
	// The generator stamps up to what this returns: the file must hold it
	// too before it does.
	if _, err := f.Local.Extend(ctx, h); err != nil {
		lh, lerr := f.Local.Load(ctx)
		if lerr != nil {
			return time.Time{}, fmt.Errorf("local horizon: %w (and reading it back: %v)", err, lerr)
		}
		return lh, fmt.Errorf("local horizon: %w", err)
	}
	return h, nil
}

// Release lowers the coordinator's horizon (when it can be lowered), then
// the file's.
func (f Floored) Release(ctx context.Context, last time.Time) error {
	if r, ok := f.Horizon.(Releaser); ok {
		if err := r.Release(ctx, last); err != nil {
			return err
		}
	}
	if f.Local != nil {
		return f.Local.Release(ctx, last)
	}
	return nil
}
