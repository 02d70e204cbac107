package timeid

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/idmint/idmint/internal/entropy"
)

// RandomSettings configures a Random generator.
type RandomSettings struct {
	Settings
	// Rand supplies the random bits. Nil means crypto-seeded ChaCha8.
	Rand io.Reader
	// Bits is the width of the random field, 1..22; zero means 22. Smaller
	// widths give shorter IDs (41+Bits bits) and more collisions.
	Bits int
}

// Random issues timestamp + random IDs. One Random never returns the same ID
// twice: it remembers the values drawn in the current millisecond, redraws
// a repeat, and waits for the next millisecond once half the 2^Bits values
// are used. IDs from different generators (processes, machines) collide
// with CollisionProbability(n, Bits) for n IDs in one millisecond: check
// uniqueness in the database, as the seed survey warns, or use Gene or a
// snowflake. Safe for concurrent use.
type Random struct {
	c    *core
	src  *entropy.Source
	bits int
	used map[uint64]struct{}
}

// NewRandom returns a Random generator.
func NewRandom(s RandomSettings) (*Random, error) {
	if s.Bits < 0 || s.Bits > BodyBits {
		return nil, fmt.Errorf("%w: Bits = %d, want 1..%d", ErrSettings, s.Bits, BodyBits)
	}
	if s.Bits == 0 {
		s.Bits = BodyBits
	}
	c, err := newCore(s.Settings)
	if err != nil {
		return nil, err
	}
	return &Random{c: c, src: entropy.New(s.Rand), bits: s.Bits, used: map[uint64]struct{}{}}, nil
}

// Next returns a new ID: milliseconds since Epoch shifted left by 22, plus
// Bits random bits. It fails with ErrTime, ErrExhausted, ctx's error while
// waiting, or the error of RandomSettings.Rand.
func (g *Random) Next(ctx context.Context) (int64, error) {
	return g.c.next(ctx, func(fresh bool) (uint64, bool, error) {
		if fresh {
			clear(g.used)
		}
		if len(g.used) >= 1<<g.bits/2+1 {
			return 0, false, nil
		}
		for {
			r, err := g.src.Uint64()
			if err != nil {
				return 0, false, err
			}
			v := r >> (64 - g.bits)
			if _, dup := g.used[v]; !dup {
				g.used[v] = struct{}{}
				return v, true, nil
			}
		}
	})
}

// Decode splits an ID of this generator's layout.
func (g *Random) Decode(id int64) (Parts, error) {
	t, body, err := g.c.decodeTime(id)
	return Parts{Time: t, Random: body}, err
}

// Ahead reports how far the last millisecond is ahead of the clock: zero
// unless the wall clock stepped back.
func (g *Random) Ahead() time.Duration { return g.c.ahead() }
