package witness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxSpaceLen is the longest space name in bytes.
const MaxSpaceLen = 200

// Errors.
var (
	// ErrBadSpace: a space name is empty, too long, not UTF-8 or holds a
	// control character.
	ErrBadSpace = errors.New("witness: bad space name")
	// ErrBadClaim: Claim was asked to move a mark down (to < from) or
	// Raise to a negative target.
	ErrBadClaim = errors.New("witness: bad claim")
	// ErrCorrupt: a witness's stored state cannot be read back; nothing is
	// served from it until an operator looks.
	ErrCorrupt = errors.New("witness: stored marks are corrupt")
	// ErrClosed: the witness was closed.
	ErrClosed = errors.New("witness: closed")
)

// Witness keeps one mark per space. Implementations are safe for
// concurrent use, make a change durable before they return it, and never
// lower a mark.
type Witness interface {
	// Mark returns the space's mark, 0 when it has none.
	Mark(ctx context.Context, space string) (int64, error)
	// Claim raises the space's mark to `to` if it is at most `from`, and
	// returns (to, true) once that is durable. Otherwise it changes
	// nothing and returns the mark, which is above from, and false.
	// ErrBadClaim when to < from.
	Claim(ctx context.Context, space string, from, to int64) (mark int64, ok bool, err error)
	// String names the witness for logs ("data directory /srv/idmint",
	// "etcd 10.0.0.1:2379/idmint/app/marks/").
	String() string
	// Close releases the witness's resources.
	Close() error
}

// Raise makes the space's mark at least target and returns the mark, which
// may be higher when someone raised it further. In a Multi every member
// ends at least at target.
func Raise(ctx context.Context, w Witness, space string, target int64) (int64, error) {
	if target < 0 {
		return 0, fmt.Errorf("%w: space %q: raise to %d", ErrBadClaim, space, target)
	}
	for {
		m, err := w.Mark(ctx, space)
		if err != nil {
			return 0, err
		}
		// Claim even when m already reaches target: in a Multi, m is the
		// largest member's mark, and the claim raises the others to it.
		to := max(m, target)
		_, ok, err := w.Claim(ctx, space, m, to)
		if err != nil {
			return 0, err
		}
		if ok {
			return to, nil
		}
		// Raised meanwhile: read the marks again.
		if err := ctx.Err(); err != nil {
			return 0, err
		}
	}
}

// ValidateSpace returns nil when space can name a mark.
func ValidateSpace(space string) error {
	switch {
	case space == "":
		return fmt.Errorf("%w: empty", ErrBadSpace)
	case len(space) > MaxSpaceLen:
		return fmt.Errorf("%w: %q... is %d bytes, longer than %d", ErrBadSpace, space[:16], len(space), MaxSpaceLen)
	case !utf8.ValidString(space):
		return fmt.Errorf("%w: %q is not UTF-8", ErrBadSpace, space)
	case strings.IndexFunc(space, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		return fmt.Errorf("%w: %q holds a control character", ErrBadSpace, space)
	}
	return nil
}

func checkClaim(space string, from, to int64) error {
	if err := ValidateSpace(space); err != nil {
		return err
	}
	if to < from || from < 0 {
		return fmt.Errorf("%w: space %q: claim from %d to %d", ErrBadClaim, space, from, to)
	}
	return nil
}

// Multi is a witness made of several: a claim succeeds only when it
// succeeds in every one, and a mark is the largest of theirs. A claim that
// fails in one may have raised the others; that costs a gap, never a
// repeat.
type Multi []Witness

// Mark returns the largest mark of every witness; any error fails it.
func (m Multi) Mark(ctx context.Context, space string) (int64, error) {
	var best int64
	for _, w := range m {
		v, err := w.Mark(ctx, space)
		if err != nil {
			return 0, err
		}
		best = max(best, v)
	}
	return best, nil
}

// Claim claims in every witness in order; it stops at the first refusal or
// error.
func (m Multi) Claim(ctx context.Context, space string, from, to int64) (int64, bool, error) {
	if err := checkClaim(space, from, to); err != nil {
		return 0, false, err
	}
	for _, w := range m {
		v, ok, err := w.Claim(ctx, space, from, to)
		if err != nil {
			return 0, false, err
		}
		if !ok {
			return v, false, nil
		}
	}
	return to, true, nil
}

// String lists the witnesses.
func (m Multi) String() string {
	s := make([]string, len(m))
	for i, w := range m {
		s[i] = w.String()
	}
	return strings.Join(s, " + ")
}

// Close closes every witness.
func (m Multi) Close() error {
	var errs []error
	for _, w := range m {
		errs = append(errs, w.Close())
	}
	return errors.Join(errs...)
}
