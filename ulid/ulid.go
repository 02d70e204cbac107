// Package ulid issues monotonic ULIDs and parses them with clear errors.
//
// A ULID (github.com/ulid/spec) is 128 bits: a 48-bit Unix millisecond
// timestamp and 80 random bits, written as 26 characters of Crockford
// base32. IDs are github.com/oklog/ulid/v2's ULID type, so its String,
// Timestamp, Compare and database methods apply; this package adds a
// generator that takes a clock.Clock and never fails on load.
//
// Monotonicity follows the specification: the first ULID of a millisecond
// has 80 fresh random bits, later ones in the same millisecond add 1 to the
// previous entropy, so they are strictly increasing and consecutive ULIDs
// of one millisecond are predictable from each other (use uuid.V4 when that
// matters). The specification makes overflow of the 80 bits an error; here
// the generator waits for the next millisecond instead (it would take ~2^79
// IDs on average in one millisecond).
package ulid

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	oklog "github.com/oklog/ulid/v2"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/internal/entropy"
	"github.com/idmint/idmint/internal/idtext"
	"github.com/idmint/idmint/internal/stamp"
)

// ULID is oklog/ulid's type.
type ULID = oklog.ULID

// crockford is the Crockford base32 alphabet of the specification.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

var (
	// ErrLength is returned by Parse for input that is not 26 characters.
	ErrLength = errors.New("ulid: wrong length")
	// ErrSyntax is returned by Parse for a character outside Crockford
	// base32 (0-9, A-Z without I, L, O, U; either case).
	ErrSyntax = errors.New("ulid: invalid character")
	// ErrRange is returned by Parse when the first character exceeds '7':
	// the value would not fit in 128 bits.
	ErrRange = errors.New("ulid: value out of range")
	// ErrSettings is returned by New for an invalid Settings field.
	ErrSettings = errors.New("ulid: invalid settings")
	// ErrExhausted is returned by Next when the 80-bit entropy overflowed
	// within one millisecond and the next is more than MaxWait away.
	ErrExhausted = errors.New("ulid: millisecond exhausted")
	// ErrTime is returned by Next when the clock is outside the 48-bit
	// millisecond range (1970..10889).
	ErrTime = errors.New("ulid: clock out of range")
)

// Parse decodes the 26-character form in either case. Errors wrap
// ErrLength, ErrSyntax or ErrRange and name the character and position.
func Parse(s string) (ULID, error) {
	if len(s) != oklog.EncodedSize {
		return ULID{}, fmt.Errorf("%w: %s has %d characters, want 26", ErrLength, idtext.Quote(s), len(s))
	}
	for i := range len(s) {
		c := s[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		if strings.IndexByte(crockford, c) < 0 {
			return ULID{}, fmt.Errorf("%w: %s: %q at position %d is not Crockford base32", ErrSyntax, idtext.Quote(s), s[i], i)
		}
	}
	if s[0] > '7' {
		return ULID{}, fmt.Errorf("%w: %s: first character %q exceeds '7', the largest 128-bit ULID is 7ZZZZZZZZZZZZZZZZZZZZZZZZZ", ErrRange, idtext.Quote(s), s[0])
	}
	id, err := oklog.ParseStrict(s)
	if err != nil {
		return ULID{}, fmt.Errorf("%w: %s: %v", ErrSyntax, idtext.Quote(s), err)
	}
	return id, nil
}

// Settings configures a Generator. The zero value is valid.
type Settings struct {
	// Clock stamps IDs. Nil means the real clock read through a 1 ms cache
	// (clock.Shared(): stamps never run ahead of the real time and lag it by at most 1 ms).
	Clock clock.Clock
	// Rand supplies entropy. Nil means crypto-seeded ChaCha8.
	Rand io.Reader
	// MaxWait bounds the wait for the next millisecond after an entropy
	// overflow; zero means 1 s, negative is invalid.
	MaxWait time.Duration
}

// Generator issues strictly increasing ULIDs. Safe for concurrent use.
type Generator struct {
	t   stamp.Millis
	src *entropy.Source // under t.Mu
	hi  uint16          // entropy of the last ID, under t.Mu: top 16 bits
	lo  uint64          // and low 64 bits
}

// New returns a Generator.
func New(s Settings) (*Generator, error) {
	if s.MaxWait < 0 {
		return nil, fmt.Errorf("%w: MaxWait = %v, want >= 0", ErrSettings, s.MaxWait)
	}
	if s.MaxWait == 0 {
		s.MaxWait = time.Second
	}
	if s.Clock == nil {
		s.Clock = clock.Shared()
	}
	return &Generator{t: stamp.Millis{Clk: s.Clock, MaxWait: s.MaxWait, Last: -1}, src: entropy.New(s.Rand)}, nil
}

// Next returns a ULID greater than every ULID this Generator returned
// before. If the wall clock steps back it keeps the last millisecond (Ahead
// reports the lead). It fails with ErrTime, ErrExhausted, ctx's error if ctx
// ends while it waits, or the error of Settings.Rand.
func (g *Generator) Next(ctx context.Context) (ULID, error) {
	for {
		g.t.Mu.Lock()
		now := g.t.Clk.Now()
		ms := now.UnixMilli()
		if ms < 0 || ms >= 1<<48 {
			g.t.Mu.Unlock()
			return ULID{}, fmt.Errorf("%w: %v is outside the 48-bit millisecond range", ErrTime, now)
		}
		if ms > g.t.Last {
			a, err := g.src.Uint64()
			var b uint64
			if err == nil {
				b, err = g.src.Uint64()
			}
			if err != nil {
				g.t.Mu.Unlock()
				return ULID{}, err
			}
			g.t.Last, g.hi, g.lo = ms, uint16(a), b
		} else if g.lo != ^uint64(0) {
			g.lo++
		} else if g.hi != ^uint16(0) {
			g.hi, g.lo = g.hi+1, 0
		} else {
			if err := g.t.Wait(ctx, now, func(held int64, wait time.Duration) error {
				return fmt.Errorf("%w: entropy overflowed in millisecond %d and the clock is %v from the next", ErrExhausted, held, wait)
			}); err != nil {
				return ULID{}, err
			}
			continue
		}
		var id ULID
		binary.BigEndian.PutUint64(id[0:8], uint64(g.t.Last)<<16|uint64(g.hi))
		binary.BigEndian.PutUint64(id[8:16], g.lo)
		g.t.Mu.Unlock()
		return id, nil
	}
}

// Ahead reports how far the last ULID's millisecond is ahead of the clock:
// zero unless the wall clock stepped back.
func (g *Generator) Ahead() time.Duration { return g.t.Ahead() }
