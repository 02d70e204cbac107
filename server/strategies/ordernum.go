package strategies

import (
	"context"
	"fmt"
	"strconv"

	"github.com/idmint/idmint/ordernum"
	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/server"
)

// ordernumStrategy issues order numbers: a unique sequence from a segment
// row of the key's store, encrypted with FF1 into a fixed-length, readable
// number (design.md "order numbers"). Its keys deliberately have no
// decoder: decoding reveals the sequence, i.e. the volume the format hides.
func ordernumStrategy() server.Strategy {
	return server.Strategy{
		Name: "ordernum",
		Summary: "fixed-length readable order numbers: FF1 over a segment sequence (options: format, e.g. length=16 or " +
			"alphabet=base32,length=12,prefix=K,date=yyMMdd; key: 128/192/256-bit secret, hex or base64; key_version)",
		Check: func(k server.KeyConfig, cfg *server.Config) []server.Problem {
			ps := unknownOptions(k, "format", "key", "key_version", "description")
			if _, err := ordernum.ParseFormat(k.Options["format"]); err != nil {
				ps = append(ps, server.Problem{Field: "options.format", Value: k.Options["format"], Message: err.Error()})
			}
			v, p := intOption(k, "key_version", 0, 0, 31)
			if p != nil {
				ps = append(ps, *p)
			}
			if _, err := ordernum.ParseKey(int(v), k.Options["key"]); err != nil {
				ps = append(ps, server.Problem{Field: "options.key", Value: "(redacted)", Message: err.Error()})
			}
			if k.Step != 0 {
				if err := segment.ValidateStep(k.Step); err != nil {
					ps = append(ps, server.Problem{Field: "step", Value: fmt.Sprint(k.Step), Message: err.Error()})
				}
			}
			return ps
		},
		New: func(ctx context.Context, env *server.Env, name string, k server.KeyConfig) (server.Issuer, error) {
			f, err := ordernum.ParseFormat(k.Options["format"])
			if err != nil {
				return nil, err
			}
			v, _ := strconv.Atoi(k.Options["key_version"])
			key, err := ordernum.ParseKey(v, k.Options["key"])
			if err != nil {
				return nil, err
			}
			codec, err := ordernum.New(f, key)
			if err != nil {
				return nil, err
			}
			a, err := openAllocator(ctx, env, k.Store)
			if err != nil {
				return nil, err
			}
			if err := ensureRow(ctx, a, name, k.Step, k.Options["description"]); err != nil {
				return nil, err
			}
			sk, err := a.Key(name)
			if err != nil {
				return nil, err
			}
			return &ordernumKey{seq: &segmentKey{a: a, k: sk, name: name}, codec: codec, env: env}, nil
		},
	}
}

type ordernumKey struct {
	seq   *segmentKey
	codec *ordernum.Codec
	env   *server.Env
}

func (o *ordernumKey) NextStrings(ctx context.Context, dst []string) error {
	seqs := make([]int64, len(dst))
	if err := o.seq.NextInt64s(ctx, seqs); err != nil {
		return err
	}
	day := o.env.Clock.Now()
	for i, s := range seqs {
		n, err := o.codec.Encode(uint64(s), day)
		if err != nil {
			// Capacity of the format used up (per day with a date part):
			// refuse rather than wrap.
			return err
		}
		dst[i] = n
	}
	return nil
}

func (o *ordernumKey) Ready(ctx context.Context) error { return o.seq.Ready(ctx) }
func (o *ordernumKey) Stats() []server.Stat            { return o.seq.Stats() }
func (o *ordernumKey) Close(ctx context.Context) error { return nil }
