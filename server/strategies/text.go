package strategies

import (
	"context"
	"strconv"
	"time"

	"github.com/idmint/idmint/idformat"
	"github.com/idmint/idmint/server"
)

// textStrategies are the formats issued as strings (the UUID family,
// 128-bit flakes) and time+random, all through idformat: the one place that
// builds their generators and decodes them, for the CLI and the server
// alike. Every generator is local to this process and needs no lease: their
// uniqueness rests on randomness, a per-process random value or (flake128)
// the worker option, as their package docs say.
func textStrategies() []server.Strategy {
	return []server.Strategy{
		typed(server.Strategy{
			Name:    "uuid",
			Summary: "RFC 9562 UUIDs (options: version 7 (default), 4, 6 or 1)",
		}, func(k server.KeyConfig, cfg *server.Config) (string, []server.Problem) {
			ps := unknownOptions(k, "version")
			v, ok := k.Options["version"]
			if !ok {
				v = "7"
			}
			if v != "1" && v != "4" && v != "6" && v != "7" {
				ps = append(ps, server.Problem{Field: "options.version", Value: v, Message: "must be 1, 4, 6 or 7"})
			}
			return "uuid-v" + v, ps
		}, func(ctx context.Context, env *server.Env, name string, k server.KeyConfig, format string) (server.Issuer, error) {
			return newTextKey(env, format, idformat.UUID, 0)
		}),
		simpleText("ulid", idformat.ULID, "ULIDs (48-bit ms time + 80 random bits, monotonic within a millisecond)"),
		simpleText("ksuid", idformat.KSUID, "KSUIDs (32-bit seconds since 2014-05-13 + 128 random bits, base62)"),
		simpleText("objectid", idformat.ObjectID, "MongoDB ObjectIDs (12 bytes, hex; at most 2^24 per second, then a wait)"),
		simpleText("xid", idformat.XID, "xids (12 bytes, base32hex, rs/xid compatible; never wraps its counter)"),
		simpleText("timeid-random", idformat.TimeRandom, "63-bit ms time + random bits (decimal); collisions across processes have the probability its docs give"),
		typed(server.Strategy{
			Name:    "flake128",
			Summary: "128-bit Boundary flakes: 64-bit ms + 48-bit worker + 16-bit sequence (options: worker, distinct per running server)",
		}, func(k server.KeyConfig, cfg *server.Config) (uint64, []server.Problem) {
			ps := unknownOptions(k, "worker")
			w, p := intOption(k, "worker", -1, 0, 1<<48-1)
			if p != nil {
				ps = append(ps, *p)
			} else if _, ok := k.Options["worker"]; !ok {
				ps = append(ps, server.Problem{Field: "options.worker", Message: "required: a 48-bit worker ID no other running generator of this key uses"})
			}
			return uint64(max(w, 0)), ps
		}, func(ctx context.Context, env *server.Env, name string, k server.KeyConfig, worker uint64) (server.Issuer, error) {
			return newTextKey(env, idformat.Flake128, idformat.Flake128, worker)
		}),
	}
}

// simpleText is a text strategy without options.
func simpleText(name, format, summary string) server.Strategy {
	return server.Strategy{
		Name:    name,
		Summary: summary,
		Check:   func(k server.KeyConfig, cfg *server.Config) []server.Problem { return unknownOptions(k) },
		New: func(ctx context.Context, env *server.Env, _ string, k server.KeyConfig) (server.Issuer, error) {
			return newTextKey(env, format, format, 0)
		},
	}
}

func newTextKey(env *server.Env, genFormat, decFormat string, worker uint64) (*textKey, error) {
	// The server's clock as given, never a cached one: the server stamps
	// within 2 ms of the request even with the cores busy (a read costs
	// ~50 ns, a fraction of a percent of a request).
	s := idformat.GenSettings{Worker: worker, Clock: env.Clock}
	g, err := idformat.NewGenerator(genFormat, s)
	if err != nil {
		return nil, err
	}
	return &textKey{gen: g, format: decFormat}, nil
}

type textKey struct {
	gen    idformat.Generator
	format string // idformat decoder name
}

func (k *textKey) NextStrings(ctx context.Context, dst []string) error {
	for i := range dst {
		s, err := k.gen.Next(ctx)
		if err != nil {
			return &retryable{err, time.Second}
		}
		dst[i] = s
	}
	return nil
}

func (k *textKey) Decode(id string) (server.Decoded, error) { return decodeText(k.format, id) }
func (k *textKey) Close(ctx context.Context) error          { return nil }

// textLayouts makes every idformat format a /v1/decode layout.
func textLayouts() []server.Layout {
	var ls []server.Layout
	for _, f := range idformat.Formats() {
		ls = append(ls, server.Layout{Name: f, Decode: func(id string) (server.Decoded, error) { return decodeText(f, id) }})
	}
	return ls
}

// decodeText decodes id as format with idformat and presents its parts.
func decodeText(format, id string) (server.Decoded, error) {
	p, err := idformat.ParseAs(format, id)
	if err != nil {
		return server.Decoded{}, err
	}
	d := server.Decoded{Layout: p.Format, Time: p.Time, Extra: map[string]string{}}
	if p.HasSeq {
		d.Sequence = int64(p.Sequence)
	}
	if p.Format == idformat.Flake128 {
		// flake128's node is its 48-bit worker (hex in p.Node): the
		// answer's numeric node is that worker, as for snowflake keys.
		if w, err := strconv.ParseUint(p.Node, 16, 48); err == nil {
			d.Node = int64(w)
		}
	}
	for _, f := range p.Fields() {
		switch f.Name {
		case "format", "time", "sequence":
		default:
			d.Extra[f.Name] = f.Value
		}
	}
	return d, nil
}
