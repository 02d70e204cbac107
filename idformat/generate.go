package idformat

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/flake128"
	"github.com/idmint/idmint/ksuid"
	"github.com/idmint/idmint/objectid"
	"github.com/idmint/idmint/timeid"
	"github.com/idmint/idmint/ulid"
	"github.com/idmint/idmint/uuid"
	"github.com/idmint/idmint/xid"
)

// Generator is the small interface every generator of this family satisfies
// once adapted by NewGenerator: what `idmint gen` and the server need.
type Generator interface {
	// Next issues one ID in its canonical text form. Every format's
	// generator is safe for concurrent use and never returns an ID twice
	// (probabilistically so for uuid-v4, ksuid and timeid-random, whose
	// package docs give the odds).
	Next(ctx context.Context) (string, error)
	// Ahead reports how far the generator's last timestamp is ahead of its
	// clock (zero for formats without a timestamp).
	Ahead() time.Duration
}

// MemberGenerator issues IDs derived from a member ID (timeid-member,
// timeid-gene).
type MemberGenerator interface {
	// NextFor issues one ID for member, as decimal text.
	NextFor(ctx context.Context, member string) (string, error)
	// Ahead is as for Generator.
	Ahead() time.Duration
}

// GenSettings configures NewGenerator; each format uses the fields it has.
// The zero value suits every format except flake128 and timeid-gene, whose
// Worker must be chosen (distinct per running generator) and timeid-gene's
// Key.
type GenSettings struct {
	Clock  clock.Clock // nil: the format's default (the real clock)
	Rand   io.Reader   // nil: crypto-seeded ChaCha8
	Worker uint64      // flake128 (48 bits), timeid-gene (4 bits by default)
	Key    []byte      // timeid-gene: 16-byte secret gene key
}

// GeneratorFormats lists the names NewGenerator accepts.
func GeneratorFormats() []string {
	return []string{"uuid-v1", "uuid-v4", "uuid-v6", "uuid-v7", ULID, KSUID, XID, ObjectID, Flake128, TimeRandom}
}

// NewGenerator returns a Generator for a format named by GeneratorFormats.
// Errors name the format, or the setting the format's constructor rejected.
func NewGenerator(format string, s GenSettings) (Generator, error) {
	switch format {
	case "uuid-v1", "uuid-v4", "uuid-v6", "uuid-v7":
		us := uuid.Settings{Clock: s.Clock, Rand: s.Rand}
		var g interface {
			Next(context.Context) (uuid.UUID, error)
		}
		var err error
		ahead := func() time.Duration { return 0 }
		switch format {
		case "uuid-v1":
			v, e := uuid.NewV1(us)
			g, err = v, e
			if e == nil {
				ahead = v.Ahead
			}
		case "uuid-v4":
			g, err = uuid.NewV4(us)
		case "uuid-v6":
			v, e := uuid.NewV6(us)
			g, err = v, e
			if e == nil {
				ahead = v.Ahead
			}
		default:
			v, e := uuid.NewV7(us)
			g, err = v, e
			if e == nil {
				ahead = v.Ahead
			}
		}
		if err != nil {
			return nil, err
		}
		return adapt(g.Next, ahead), nil
	case ULID:
		g, err := ulid.New(ulid.Settings{Clock: s.Clock, Rand: s.Rand})
		if err != nil {
			return nil, err
		}
		return adapt(g.Next, g.Ahead), nil
	case KSUID:
		g, err := ksuid.New(ksuid.Settings{Clock: s.Clock, Rand: s.Rand})
		if err != nil {
			return nil, err
		}
		return adapt(g.Next, func() time.Duration { return 0 }), nil
	case XID:
		g, err := xid.New(xid.Settings{Clock: s.Clock, Rand: s.Rand})
		if err != nil {
			return nil, err
		}
		return adapt(g.Next, g.Ahead), nil
	case ObjectID:
		g, err := objectid.New(objectid.Settings{Clock: s.Clock, Rand: s.Rand})
		if err != nil {
			return nil, err
		}
		return adapt(g.Next, g.Ahead), nil
	case Flake128:
		g, err := flake128.New(s.Worker, flake128.Settings{Clock: s.Clock})
		if err != nil {
			return nil, err
		}
		return adapt(g.Next, g.Ahead), nil
	case TimeRandom:
		g, err := timeid.NewRandom(timeid.RandomSettings{Settings: timeid.Settings{Clock: s.Clock}, Rand: s.Rand})
		if err != nil {
			return nil, err
		}
		return adapt(func(ctx context.Context) (decimal, error) {
			n, err := g.Next(ctx)
			return decimal(n), err
		}, g.Ahead), nil
	}
	return nil, fmt.Errorf("%w: %q has no generator; known: %s", ErrFormat, format, strings.Join(GeneratorFormats(), ", "))
}

// NewMemberGenerator returns a MemberGenerator for timeid-member or
// timeid-gene. Member IDs are decimal for timeid-member and any text for
// timeid-gene.
func NewMemberGenerator(format string, s GenSettings) (MemberGenerator, error) {
	ts := timeid.Settings{Clock: s.Clock}
	switch format {
	case TimeMember:
		g, err := timeid.NewMember(ts)
		if err != nil {
			return nil, err
		}
		return memberGen{g.Ahead, func(ctx context.Context, m string) (int64, error) {
			n, err := strconv.ParseUint(m, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%w: member %q is not a decimal integer", timeid.ErrMember, m)
			}
			return g.Next(ctx, n)
		}}, nil
	case TimeGene:
		g, err := timeid.NewGene(s.Worker, timeid.GeneSettings{Settings: ts, Key: s.Key})
		if err != nil {
			return nil, err
		}
		return memberGen{g.Ahead, func(ctx context.Context, m string) (int64, error) { return g.Next(ctx, []byte(m)) }}, nil
	}
	return nil, fmt.Errorf("%w: %q has no member generator; known: %s, %s", ErrFormat, format, TimeMember, TimeGene)
}

type decimal int64

func (d decimal) String() string { return strconv.FormatInt(int64(d), 10) }

type adapted[T fmt.Stringer] struct {
	next  func(context.Context) (T, error)
	ahead func() time.Duration
}

func adapt[T fmt.Stringer](next func(context.Context) (T, error), ahead func() time.Duration) Generator {
	return adapted[T]{next, ahead}
}

func (a adapted[T]) Next(ctx context.Context) (string, error) {
	id, err := a.next(ctx)
	if err != nil {
		return "", err
	}
	return id.String(), nil
}

func (a adapted[T]) Ahead() time.Duration { return a.ahead() }

type memberGen struct {
	ahead func() time.Duration
	next  func(context.Context, string) (int64, error)
}

func (m memberGen) NextFor(ctx context.Context, member string) (string, error) {
	n, err := m.next(ctx, member)
	if err != nil {
		return "", err
	}
	return strconv.FormatInt(n, 10), nil
}

func (m memberGen) Ahead() time.Duration { return m.ahead() }
