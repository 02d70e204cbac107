package monotonic

import (
	"context"
	"fmt"
)

// Witness keeps high-water marks outside the store a source keeps its
// bound in (the bound file, the etcd prefix); package witness implements
// it (the node's data directory, etcd, ZooKeeper, SQL, Multi).
//
// A source with a Witness raises the mark of its Space to every bound it
// persists before it issues a value up to that bound, and starts strictly
// above the mark. A store that forgets (a key moved from its bound file to
// etcd, another etcd prefix, etcd restored from an older snapshot) then
// cannot make the key issue a value again.
type Witness interface {
	// Mark returns the space's mark, 0 when it has none.
	Mark(ctx context.Context, space string) (int64, error)
	// Claim raises the space's mark to `to` if it is at most `from`, and
	// returns (to, true) once that is durable; otherwise it changes
	// nothing and returns the mark, which is above from, and false.
	Claim(ctx context.Context, space string, from, to int64) (mark int64, ok bool, err error)
}

// WitnessSpace names a monotonic key's space in a witness: "monotonic/KEY".
func WitnessSpace(key string) string { return "monotonic/" + key }

// raiseMark makes the space's mark at least target.
func raiseMark(ctx context.Context, w Witness, space string, target int64) error {
	for {
		m, err := w.Mark(ctx, space)
		if err != nil {
			return fmt.Errorf("monotonic: witness %q: read the mark: %w", space, err)
		}
		// Claim even when m already reaches target: with several
		// witnesses m is the largest mark, and the claim raises the rest.
		to := max(m, target)
		_, ok, err := w.Claim(ctx, space, m, to)
		if err != nil {
			return fmt.Errorf("monotonic: witness %q: raise the mark from %d to %d: %w", space, m, to, err)
		}
		if ok {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("monotonic: witness %q: raise the mark to %d: %w", space, target, err)
		}
	}
}

// readMark returns the space's mark (0 without a witness).
func readMark(ctx context.Context, w Witness, space string) (int64, error) {
	if w == nil {
		return 0, nil
	}
	m, err := w.Mark(ctx, space)
	if err != nil {
		return 0, fmt.Errorf("monotonic: witness %q: read the mark: %w", space, err)
	}
	return m, nil
}

// ReadBoundFile returns the bound a File source recorded at path, 0 when
// there is no file. A file that holds anything but a non-negative integer
// is an error: the start is not guessed. An Etcd source of the same key
// takes it as its Floor, so a single node growing into a cluster starts
// above what it issued alone.
func ReadBoundFile(path string) (int64, error) { return readBound(path) }
