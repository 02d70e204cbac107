// Package servertest holds the test doubles the tests of the server's
// surfaces (server/leaf, ...) share: strategies whose issuers are
// in-memory counters with switches to make them refuse, and a server built
// over them with a fake clock. Requests to it go through reqtest.
package servertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/server"
)

// Tokens the default fixture's keys and admin use.
const (
	AdminToken = "admin-token-0123456789"
	KeyToken   = "order-token-0123456789"
)

// Counter is an issuer over an in-memory sequence with every optional
// capability, and switches to make it refuse.
type Counter struct {
	Name    string
	Next    atomic.Int64 // the last ID issued
	Size    atomic.Int64 // the step
	Fail    atomic.Bool  // NextInt64s, NextRange and StoreRow fail with a retryable error
	Unready atomic.Bool  // Ready fails
	Closed  atomic.Bool
}

// ErrUnavailable is the retryable refusal of a failing Counter.
type ErrUnavailable struct{}

func (ErrUnavailable) Error() string             { return "counter: store unavailable" }
func (ErrUnavailable) RetryAfter() time.Duration { return 3 * time.Second }

// NextInt64s issues the next len(dst) numbers.
func (c *Counter) NextInt64s(ctx context.Context, dst []int64) error {
	if c.Closed.Load() {
		return errors.New("counter: closed")
	}
	if c.Fail.Load() {
		return ErrUnavailable{}
	}
	end := c.Next.Add(int64(len(dst)))
	for i := range dst {
		dst[i] = end - int64(len(dst)) + int64(i) + 1
	}
	return nil
}

// NextRange issues up to n numbers, at most 64 (a segment ends there).
func (c *Counter) NextRange(ctx context.Context, n int64) (int64, int64, error) {
	if c.Fail.Load() {
		return 0, 0, ErrUnavailable{}
	}
	n = min(n, 64)
	return c.Next.Add(n) - n + 1, n, nil
}

// Decode reads n as time 1,700,000,000,000 + n ms, node n%7, sequence n.
func (c *Counter) Decode(id string) (server.Decoded, error) {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n < 0 {
		return server.Decoded{}, fmt.Errorf("counter: bad id %q", id)
	}
	return server.Decoded{Layout: "counter", Time: time.UnixMilli(1_700_000_000_000 + n), Node: n % 7, Sequence: n}, nil
}

// CacheView is one buffer from the last ID to last+step.
func (c *Counter) CacheView() server.CacheView {
	return server.CacheView{Key: c.Name, Value0: c.Next.Load(), Step0: c.Size.Load(), Max0: c.Next.Load() + c.Size.Load(), InitOk: true}
}

// StoreRow is the row that buffer came from.
func (c *Counter) StoreRow(ctx context.Context) (server.StoreRow, error) {
	if c.Fail.Load() {
		return server.StoreRow{}, ErrUnavailable{}
	}
	return server.StoreRow{Key: c.Name, MaxID: c.Next.Load() + c.Size.Load(), Step: c.Size.Load(), UpdateTime: time.Unix(0, 0).UTC()}, nil
}

// Ready fails while Unready is set.
func (c *Counter) Ready(ctx context.Context) error {
	if c.Unready.Load() {
		return errors.New("counter: lease not held")
	}
	return nil
}

// Step is the step (a server.Stepper).
func (c *Counter) Step() int64 { return c.Size.Load() }

// SetStep changes the step; 13 is refused as the request's fault.
func (c *Counter) SetStep(ctx context.Context, n int64) error {
	if n == 13 {
		return &server.InputError{Field: "step", Err: errors.New("counter: step 13 is unlucky")}
	}
	c.Size.Store(n)
	return nil
}

// Stats reports the step as segment_step.
func (c *Counter) Stats() []server.Stat {
	return []server.Stat{{Name: "segment_step", Help: "step", Value: float64(c.Size.Load())}}
}

// Close makes every later NextInt64s fail.
func (c *Counter) Close(ctx context.Context) error { c.Closed.Store(true); return nil }

// Text is an issuer of the strings T-1, T-2, ...
type Text struct{ n atomic.Int64 }

// NextStrings issues the next len(dst) strings.
func (t *Text) NextStrings(ctx context.Context, dst []string) error {
	for i := range dst {
		dst[i] = "T-" + strconv.FormatInt(t.n.Add(1), 10)
	}
	return nil
}

// Close does nothing.
func (t *Text) Close(ctx context.Context) error { return nil }

// Counters are the Counters a Registry's strategies built, by key.
type Counters struct {
	mu sync.Mutex
	m  map[string]*Counter
}

// Get returns the Counter of the key called name, or nil.
func (cs *Counters) Get(name string) *Counter {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.m[name]
}

// Issued is how many IDs each Counter has issued, by key.
func (cs *Counters) Issued() map[string]int64 {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	out := make(map[string]int64, len(cs.m))
	for name, c := range cs.m {
		out[name] = c.Next.Load()
	}
	return out
}

// Registry registers "counter" (also as "snowflake", so Leaf's snowflake
// route has something to serve), "text" (strings) and the layout "plain"
// (a bare number). A counter starts with step max(Step, 1000); a key with
// the option broken=yes fails to open, and the option "bad" fails the
// counter's Check.
func Registry() (*server.Registry, *Counters) {
	cs := &Counters{m: map[string]*Counter{}}
	reg := server.NewRegistry()
	mk := func(ctx context.Context, env *server.Env, name string, k server.KeyConfig) (server.Issuer, error) {
		if k.Options["broken"] == "yes" {
			return nil, errors.New("counter: cannot open store")
		}
		c := &Counter{Name: name}
		c.Size.Store(max(k.Step, 1000))
		cs.mu.Lock()
		cs.m[name] = c
		cs.mu.Unlock()
		return c, nil
	}
	check := func(k server.KeyConfig, cfg *server.Config) []server.Problem {
		if v, ok := k.Options["bad"]; ok {
			return []server.Problem{{Field: "options.bad", Value: v, Message: "must not be set"}}
		}
		return nil
	}
	Must(reg.Register(server.Strategy{Name: "counter", New: mk, Check: check}))
	Must(reg.Register(server.Strategy{Name: "snowflake", New: mk}))
	Must(reg.Register(server.Strategy{Name: "text", New: func(context.Context, *server.Env, string, server.KeyConfig) (server.Issuer, error) {
		return &Text{}, nil
	}}))
	Must(reg.RegisterLayout(server.Layout{Name: "plain", Decode: func(id string) (server.Decoded, error) {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			return server.Decoded{}, fmt.Errorf("plain: %q is not a number", id)
		}
		return server.Decoded{Layout: "plain", Sequence: n}, nil
	}}))
	return reg, cs
}

// Must panics on err: for registrations that cannot fail.
func Must(err error) {
	if err != nil {
		panic(err)
	}
}

// Fixture is a server over a Registry with a fake clock at
// 2026-01-01T00:00:00Z, closed when the test ends.
type Fixture struct {
	S   *server.Server
	H   http.Handler // the public handler
	Adm http.Handler // the admin handler
	Cs  *Counters
	Clk *clock.Fake
}

// DefaultKeys are the keys of New's config: counters "order", "snowflake",
// "secret" (KeyToken) and "slow" (2 requests a second), and the text key
// "note".
func DefaultKeys() map[string]server.KeyConfig {
	return map[string]server.KeyConfig{
		"order":     {Strategy: "counter"},
		"snowflake": {Strategy: "snowflake"},
		"note":      {Strategy: "text"},
		"secret":    {Strategy: "counter", Tokens: []string{KeyToken}},
		"slow":      {Strategy: "counter", RateLimit: 2},
	}
}

// New builds a Fixture over Registry's strategies with DefaultKeys, which
// mutate may change, serving surfaces.
func New(t testing.TB, mutate func(*server.Config), surfaces ...server.NewSurface) *Fixture {
	reg, cs := Registry()
	return NewReg(t, reg, cs, mutate, surfaces...)
}

// NewReg is New over a registry the test built (cs may be nil). Keys
// created through the admin API are kept in the data directory's
// keys.json.
func NewReg(t testing.TB, reg *server.Registry, cs *Counters, mutate func(*server.Config), surfaces ...server.NewSurface) *Fixture {
	t.Helper()
	cfg := &server.Config{DataDir: t.TempDir(), Keys: DefaultKeys()}
	if mutate != nil {
		mutate(cfg)
	}
	cfg.SetDefaults()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := server.New(context.Background(), server.Options{Config: cfg, Registry: reg, Clock: clk,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		KeyStore: &server.FileKeyStore{Path: filepath.Join(cfg.DataDir, "keys.json")}, Surfaces: surfaces})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return &Fixture{S: s, H: s.Handler(), Adm: s.AdminHandler(), Cs: cs, Clk: clk}
}
