package strategies

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idmint/idmint/ksuid"
	"github.com/idmint/idmint/objectid"
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/ulid"
	"github.com/idmint/idmint/uuid"
	"github.com/idmint/idmint/xid"
)

// textStrategies are the 96- and 128-bit formats issued as strings: every
// generator is local to this process and needs no lease (their uniqueness
// rests on randomness or on a per-process random value, as their
// specifications say).
func textStrategies() []server.Strategy {
	return []server.Strategy{
		{
			Name:    "uuid",
			Summary: "RFC 9562 UUIDs (options: version 7 (default), 4, 6 or 1)",
			Check: func(k server.KeyConfig, cfg *server.Config) []server.Problem {
				ps := unknownOptions(k, "version")
				if v, ok := k.Options["version"]; ok && v != "1" && v != "4" && v != "6" && v != "7" {
					ps = append(ps, server.Problem{Field: "options.version", Value: v, Message: "must be 1, 4, 6 or 7"})
				}
				return ps
			},
			New: func(ctx context.Context, env *server.Env, name string, k server.KeyConfig) (server.Issuer, error) {
				s := uuid.Settings{Clock: env.Clock}
				var next func(context.Context) (uuid.UUID, error)
				switch k.Options["version"] {
				case "1":
					g, err := uuid.NewV1(s)
					if err != nil {
						return nil, err
					}
					next = g.Next
				case "4":
					g, err := uuid.NewV4(s)
					if err != nil {
						return nil, err
					}
					next = g.Next
				case "6":
					g, err := uuid.NewV6(s)
					if err != nil {
						return nil, err
					}
					next = g.Next
				default:
					g, err := uuid.NewV7(s)
					if err != nil {
						return nil, err
					}
					next = g.Next
				}
				return &textKey{next: func(ctx context.Context) (string, error) {
					u, err := next(ctx)
					return u.String(), err
				}, decode: decodeUUID}, nil
			},
		},
		{
			Name:    "ulid",
			Summary: "ULIDs (48-bit ms time + 80 random bits, monotonic within a millisecond)",
			Check:   func(k server.KeyConfig, cfg *server.Config) []server.Problem { return unknownOptions(k) },
			New: func(ctx context.Context, env *server.Env, name string, k server.KeyConfig) (server.Issuer, error) {
				g, err := ulid.New(ulid.Settings{Clock: env.Clock})
				if err != nil {
					return nil, err
				}
				return &textKey{next: func(ctx context.Context) (string, error) {
					id, err := g.Next(ctx)
					return id.String(), err
				}, decode: decodeULID}, nil
			},
		},
		{
			Name:    "ksuid",
			Summary: "KSUIDs (32-bit seconds since 2014-05-13 + 128 random bits, base62)",
			Check:   func(k server.KeyConfig, cfg *server.Config) []server.Problem { return unknownOptions(k) },
			New: func(ctx context.Context, env *server.Env, name string, k server.KeyConfig) (server.Issuer, error) {
				g, err := ksuid.New(ksuid.Settings{Clock: env.Clock})
				if err != nil {
					return nil, err
				}
				return &textKey{next: func(ctx context.Context) (string, error) {
					id, err := g.Next(ctx)
					return id.String(), err
				}, decode: decodeKSUID}, nil
			},
		},
		{
			Name:    "objectid",
			Summary: "MongoDB ObjectIDs (12 bytes, hex)",
			Check:   func(k server.KeyConfig, cfg *server.Config) []server.Problem { return unknownOptions(k) },
			New: func(ctx context.Context, env *server.Env, name string, k server.KeyConfig) (server.Issuer, error) {
				g, err := objectid.New(objectid.Settings{Clock: env.Clock})
				if err != nil {
					return nil, err
				}
				return &textKey{next: func(ctx context.Context) (string, error) {
					id, err := g.Next(ctx)
					return id.String(), err
				}, decode: decodeObjectID}, nil
			},
		},
		{
			Name:    "xid",
			Summary: "xids (12 bytes, base32hex, rs/xid compatible)",
			Check:   func(k server.KeyConfig, cfg *server.Config) []server.Problem { return unknownOptions(k) },
			New: func(ctx context.Context, env *server.Env, name string, k server.KeyConfig) (server.Issuer, error) {
				g, err := xid.New(xid.Settings{Clock: env.Clock})
				if err != nil {
					return nil, err
				}
				return &textKey{next: func(ctx context.Context) (string, error) {
					id, err := g.Next(ctx)
					return id.String(), err
				}, decode: decodeXID}, nil
			},
		},
	}
}

type textKey struct {
	next   func(context.Context) (string, error)
	decode func(string) (server.Decoded, error)
}

func (k *textKey) NextStrings(ctx context.Context, dst []string) error {
	for i := range dst {
		s, err := k.next(ctx)
		if err != nil {
			return &retryable{err, time.Second}
		}
		dst[i] = s
	}
	return nil
}

func (k *textKey) Decode(id string) (server.Decoded, error) { return k.decode(id) }
func (k *textKey) Close(ctx context.Context) error          { return nil }

func textLayouts() []server.Layout {
	return []server.Layout{
		{Name: "uuid", Decode: decodeUUID},
		{Name: "objectid", Decode: decodeObjectID},
		{Name: "xid", Decode: decodeXID},
		{Name: "ulid", Decode: decodeULID},
		{Name: "ksuid", Decode: decodeKSUID},
	}
}

func decodeUUID(s string) (server.Decoded, error) {
	u, err := uuid.Parse(s)
	if err != nil {
		return server.Decoded{}, err
	}
	d := server.Decoded{Layout: "uuid", Extra: map[string]string{"version": strconv.Itoa(u.Version())}}
	if t, ok := u.Time(); ok {
		d.Time = t
	}
	if seq, ok := u.ClockSeq(); ok {
		d.Sequence = int64(seq)
	}
	if n, ok := u.Node(); ok {
		d.Extra["node"] = fmt.Sprintf("%x", n[:])
	}
	return d, nil
}

func decodeObjectID(s string) (server.Decoded, error) {
	id, err := objectid.Parse(s)
	if err != nil {
		return server.Decoded{}, err
	}
	r := id.Random()
	return server.Decoded{Layout: "objectid", Time: id.Time(), Sequence: int64(id.Counter()),
		Extra: map[string]string{"random": fmt.Sprintf("%x", r[:])}}, nil
}

func decodeXID(s string) (server.Decoded, error) {
	id, err := xid.Parse(strings.ToLower(s))
	if err != nil {
		return server.Decoded{}, err
	}
	m := id.Machine()
	return server.Decoded{Layout: "xid", Time: id.Time(), Sequence: int64(id.Counter()), Node: int64(id.Pid()),
		Extra: map[string]string{"machine": fmt.Sprintf("%x", m)}}, nil
}

func decodeULID(s string) (server.Decoded, error) {
	id, err := ulid.Parse(s)
	if err != nil {
		return server.Decoded{}, err
	}
	e := id.Entropy()
	return server.Decoded{Layout: "ulid", Time: time.UnixMilli(int64(id.Time())).UTC(),
		Extra: map[string]string{"entropy": fmt.Sprintf("%x", e)}}, nil
}

func decodeKSUID(s string) (server.Decoded, error) {
	id, err := ksuid.Parse(s)
	if err != nil {
		return server.Decoded{}, err
	}
	return server.Decoded{Layout: "ksuid", Time: id.Time().UTC(),
		Extra: map[string]string{"payload": fmt.Sprintf("%x", id.Payload())}}, nil
}
