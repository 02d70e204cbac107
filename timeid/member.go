package timeid

import (
	"context"
	"fmt"
	"time"
)

// Member issues timestamp + member ID IDs, the seed survey's scheme: the
// body is the member ID itself (up to 22 bits). One member gets at most one
// ID per millisecond from one generator (a second request waits for the
// next millisecond), so IDs are unique as long as each member is served by
// one generator at a time.
//
// The leak: anyone holding an ID reads the member ID and the millisecond
// of the action straight out of it (Decode needs no key), and the number of
// IDs per member reveals their activity — operating data the business may
// not want public. Gene keeps the sharding benefit without this leak.
// Safe for concurrent use.
type Member struct {
	c    *core
	used map[uint64]struct{}
}

// NewMember returns a Member generator.
func NewMember(s Settings) (*Member, error) {
	c, err := newCore(s)
	if err != nil {
		return nil, err
	}
	return &Member{c: c, used: map[uint64]struct{}{}}, nil
}

// Next returns an ID for member, which must be below 2^22 (ErrMember
// otherwise: truncating it would make two members collide). It fails with
// ErrTime, ErrExhausted or ctx's error while waiting.
func (g *Member) Next(ctx context.Context, member uint64) (int64, error) {
	if member >= 1<<BodyBits {
		return 0, fmt.Errorf("%w: member %d does not fit in %d bits", ErrMember, member, BodyBits)
	}
	return g.c.next(ctx, func(fresh bool) (uint64, bool, error) {
		if fresh {
			clear(g.used)
		}
		if _, dup := g.used[member]; dup {
			return 0, false, nil
		}
		g.used[member] = struct{}{}
		return member, true, nil
	})
}

// Decode splits an ID of this generator's layout; Parts.Member is the
// member ID in clear.
func (g *Member) Decode(id int64) (Parts, error) {
	t, body, err := g.c.decodeTime(id)
	return Parts{Time: t, Member: body}, err
}

// Ahead reports how far the last millisecond is ahead of the clock.
func (g *Member) Ahead() time.Duration { return g.c.ahead() }
