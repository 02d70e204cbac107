package segment

import (
	"context"
	"fmt"
	"math"
)

// RaiseFloor makes every number key serves from now on greater than
// floor, before the key serves anything: a team moving to idmint from
// database auto-increment or another ID service names the largest ID it
// already has, and no new ID may repeat one below it.
//
// It raises the witness's mark for the key's space to floor+1 first (so a
// store that later goes back below the floor, a failover or a restore, is
// raised again before a number is served), then the store's max_id
// (Store.Raise), and returns max_id as it was. Both are idempotent: a
// restart with the same floor changes nothing. A key that already leased
// only segments at or below the floor in this Allocator is refused (it
// has served numbers the floor forbids); so is a negative floor.
func (a *Allocator) RaiseFloor(ctx context.Context, key string, floor int64) (before int64, err error) {
	if floor < 0 {
		return 0, fmt.Errorf("%w: floor %d is negative", ErrBadMaxID, floor)
	}
	if err := ValidateKey(key); err != nil {
		return 0, err
	}
	if floor == math.MaxInt64 {
		return 0, fmt.Errorf("%w: floor %d leaves no number above it", ErrOverflow, floor)
	}
	if k := a.cached(key); k != nil {
		k.mu.Lock()
		loaded, high := k.loaded, k.high
		k.mu.Unlock()
		if loaded && high <= floor+1 {
			return 0, fmt.Errorf("segment: key %q already leased numbers up to %d in this process; a floor of %d must be set before it serves", key, high, floor)
		}
	}
	if w := a.opts.Witness; w != nil {
		space := WitnessSpace(key, a.opts.Delta, a.opts.Remainder)
		for try := 0; ; try++ {
			mark, err := w.Mark(ctx, space)
			if err != nil {
				return 0, fmt.Errorf("segment: key %q: read the witness mark: %w", key, err)
			}
			if mark > floor {
				break
			}
			if _, ok, err := w.Claim(ctx, space, mark, floor+1); err != nil {
				return 0, fmt.Errorf("segment: key %q: raise the witness mark to %d: %w", key, floor+1, err)
			} else if ok {
				break
			}
			// Another node claimed meanwhile; read the mark again.
			if try == maxRepairs {
				return 0, fmt.Errorf("segment: key %q: the witness mark kept moving while it was raised to %d", key, floor+1)
			}
		}
	}
	before, err = a.store.Raise(ctx, key, floor+1)
	if err != nil {
		return 0, fmt.Errorf("segment: key %q: raise the store to %d: %w", key, floor+1, err)
	}
	return before, nil
}
