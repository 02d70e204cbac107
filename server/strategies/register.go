package strategies

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/snowflake"
)

// Register adds every strategy this package adapts, the built-in snowflake
// layouts and the UUID-family formats as decode layouts, and the builder for
// layouts written in a config's `layouts:` section.
func Register(reg *server.Registry) error {
	var errs []error
	for _, s := range all() {
		errs = append(errs, reg.Register(s))
	}
	for _, l := range snowflake.Layouts() {
		errs = append(errs, reg.RegisterLayout(snowflakeLayout(l.Name(), l)))
	}
	for _, l := range textLayouts() {
		errs = append(errs, reg.RegisterLayout(l))
	}
	errs = append(errs, reg.RegisterLayout(server.Layout{Name: "monotonic", Decode: decodeMonotonic}))
	reg.OnStart(regionStart)
	reg.SetLayoutBuilder(func(name, spec string) (server.Layout, error) {
		l, err := snowflake.ParseLayout(spec)
		if err != nil {
			return server.Layout{}, err
		}
		return snowflakeLayout(name, l), nil
	})
	return errors.Join(errs...)
}

func all() []server.Strategy {
	return append([]server.Strategy{snowflakeStrategy(), withLeafTable(segmentStrategy()), ordernumStrategy(), ticketStrategy(), redisStrategy(), monotonicStrategy()}, textStrategies()...)
}

// typed fills st's Check and New from one parse of a key's fields:
// parse validates them, returning every problem and the options it read
// as a typed value O, and build makes the issuer from that value. Check
// is parse without the value; New parses through the same function and
// refuses a key with problems, so an option's meaning and default are
// written once, and no option reaches an issuer unchecked or read again
// with its error dropped.
func typed[O any](st server.Strategy,
	parse func(k server.KeyConfig, cfg *server.Config) (O, []server.Problem),
	build func(ctx context.Context, env *server.Env, name string, k server.KeyConfig, o O) (server.Issuer, error),
) server.Strategy {
	st.Check = func(k server.KeyConfig, cfg *server.Config) []server.Problem {
		_, ps := parse(k, cfg)
		return ps
	}
	st.New = func(ctx context.Context, env *server.Env, name string, k server.KeyConfig) (server.Issuer, error) {
		o, ps := parse(k, env.Config)
		if len(ps) > 0 {
			return nil, &server.ValidationError{Problems: ps}
		}
		return build(ctx, env, name, k, o)
	}
	return st
}

// retryable marks an issuer's refusal with how long a client should wait.
type retryable struct {
	err   error
	after time.Duration
}

func (e *retryable) Error() string             { return e.err.Error() }
func (e *retryable) Unwrap() error             { return e.err }
func (e *retryable) RetryAfter() time.Duration { return e.after }

// unknownOptions reports options not in allowed.
func unknownOptions(k server.KeyConfig, allowed ...string) []server.Problem {
	var ps []server.Problem
	for name, v := range k.Options {
		ok := false
		for _, a := range allowed {
			ok = ok || a == name
		}
		if !ok {
			ps = append(ps, server.Problem{Field: "options." + name, Value: v, Message: fmt.Sprintf("unknown option for strategy %q", k.Strategy)})
		}
	}
	return ps
}

func intOption(k server.KeyConfig, name string, def, lo, hi int64) (int64, *server.Problem) {
	v, ok := k.Options[name]
	if !ok {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, &server.Problem{Field: "options." + name, Value: v, Message: fmt.Sprintf("must be a whole number between %d and %d", lo, hi)}
	}
	return n, nil
}
