package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// counter is a test strategy: an in-memory sequence with every optional
// capability, and switches to make it refuse.
type counter struct {
	name   string
	next   atomic.Int64
	step   atomic.Int64
	fail   atomic.Bool            // NextInt64s/NextRange fail with a retryable error
	unrdy  atomic.Bool            // Ready fails
	leak   atomic.Pointer[string] // NextInt64s and Ready fail with this text
	block  chan struct{}          // non-nil: NextInt64s signals it, then waits for its ctx and fails with ctx.Err()
	closed atomic.Bool
}

type retryErr struct{}

func (retryErr) Error() string             { return "counter: store unavailable" }
func (retryErr) RetryAfter() time.Duration { return 3 * time.Second }

func (c *counter) NextInt64s(ctx context.Context, dst []int64) error {
	if c.closed.Load() {
		return errors.New("counter: closed")
	}
	if c.fail.Load() {
		return retryErr{}
	}
	if p := c.leak.Load(); p != nil {
		return errors.New(*p)
	}
	if c.block != nil {
		c.block <- struct{}{}
		<-ctx.Done()
		return fmt.Errorf("counter: waiting for the store: %w", ctx.Err())
	}
	end := c.next.Add(int64(len(dst)))
	for i := range dst {
		dst[i] = end - int64(len(dst)) + int64(i) + 1
	}
	return nil
}

func (c *counter) NextRange(ctx context.Context, n int64) (int64, int64, error) {
	if c.fail.Load() {
		return 0, 0, retryErr{}
	}
	n = min(n, 64) // a segment of 64 ends here
	return c.next.Add(n) - n + 1, n, nil
}

func (c *counter) Decode(id string) (Decoded, error) {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n < 0 {
		return Decoded{}, fmt.Errorf("counter: bad id %q", id)
	}
	return Decoded{Layout: "counter", Time: time.UnixMilli(1_700_000_000_000 + n), Node: n % 7, Sequence: n}, nil
}

func (c *counter) Step() int64 { return c.step.Load() }
func (c *counter) SetStep(ctx context.Context, s int64) error {
	if s == 13 {
		return &InputError{Field: "step", Err: errors.New("counter: step 13 is unlucky")}
	}
	c.step.Store(s)
	return nil
}
func (c *counter) CacheView() CacheView {
	return CacheView{Key: c.name, Value0: c.next.Load(), Step0: c.step.Load(), Max0: c.next.Load() + c.step.Load(), InitOk: true}
}
func (c *counter) StoreRow(ctx context.Context) (StoreRow, error) {
	if c.fail.Load() {
		return StoreRow{}, retryErr{}
	}
	return StoreRow{Key: c.name, MaxID: c.next.Load() + c.step.Load(), Step: c.step.Load(), UpdateTime: time.Unix(0, 0).UTC()}, nil
}
func (c *counter) Ready(ctx context.Context) error {
	if c.unrdy.Load() {
		return errors.New("counter: lease not held")
	}
	if p := c.leak.Load(); p != nil {
		return errors.New(*p)
	}
	return nil
}
func (c *counter) Stats() []Stat {
	return []Stat{{Name: "segment_step", Help: "step", Value: float64(c.step.Load())}}
}
func (c *counter) Close(ctx context.Context) error { c.closed.Store(true); return nil }

// text is a test strategy issuing strings.
type text struct{ n atomic.Int64 }

func (t *text) NextStrings(ctx context.Context, dst []string) error {
	for i := range dst {
		dst[i] = "T-" + strconv.FormatInt(t.n.Add(1), 10)
	}
	return nil
}
func (t *text) Close(ctx context.Context) error { return nil }

// testRegistry registers "counter" (also under the name "snowflake", so
// Leaf's snowflake routes have something to serve) and "text".
type counters struct {
	mu sync.Mutex
	m  map[string]*counter
}

func (cs *counters) get(name string) *counter {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.m[name]
}

// issued is how many IDs each counter has issued, by key.
func (cs *counters) issued() map[string]int64 {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	out := make(map[string]int64, len(cs.m))
	for name, c := range cs.m {
		out[name] = c.next.Load()
	}
	return out
}

func testRegistry() (*Registry, *counters) {
	cs := &counters{m: map[string]*counter{}}
	reg := NewRegistry()
	mk := func(ctx context.Context, env *Env, name string, k KeyConfig) (Issuer, error) {
		if k.Options["broken"] == "yes" {
			return nil, errors.New("counter: cannot open store")
		}
		c := &counter{name: name}
		c.step.Store(max(k.Step, 1000))
		cs.mu.Lock()
		cs.m[name] = c
		cs.mu.Unlock()
		return c, nil
	}
	check := func(k KeyConfig, cfg *Config) []Problem {
		if v, ok := k.Options["bad"]; ok {
			return []Problem{{Field: "options.bad", Value: v, Message: "must not be set"}}
		}
		return nil
	}
	must(reg.Register(Strategy{Name: "counter", New: mk, Check: check}))
	must(reg.Register(Strategy{Name: "snowflake", New: mk}))
	must(reg.Register(Strategy{Name: "text", New: func(ctx context.Context, env *Env, name string, k KeyConfig) (Issuer, error) {
		return &text{}, nil
	}}))
	must(reg.RegisterLayout(Layout{Name: "plain", Decode: func(id string) (Decoded, error) {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			return Decoded{}, fmt.Errorf("plain: %q is not a number", id)
		}
		return Decoded{Layout: "plain", Sequence: n}, nil
	}}))
	return reg, cs
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
