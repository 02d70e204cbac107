package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/testkit/testserver"
)

// The budget admits in arrival order, never beyond its limit, and a
// waiter that gives up leaves nothing held.
func TestAnswerBudget(t *testing.T) {
	b := newAnswerBudget(100)
	ctx := context.Background()
	if !b.acquire(ctx, 60, 0) || !b.acquire(ctx, 40, 0) {
		t.Fatal("a budget of 100 refused 60 + 40")
	}
	if b.acquire(ctx, 1, time.Millisecond) {
		t.Fatal("a spent budget admitted one more byte")
	}
	// A waiter for 50 is first in line: a later one for 10 does not pass
	// it even when 10 would fit.
	got50 := make(chan bool)
	go func() { got50 <- b.acquire(ctx, 50, 10*time.Second) }()
	testserver.Eventually(t, "the first waiter queued", 5*time.Second, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.waiters) == 1 })
	got10 := make(chan bool)
	go func() { got10 <- b.acquire(ctx, 10, 10*time.Second) }()
	testserver.Eventually(t, "the second waiter queued", 5*time.Second, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.waiters) == 2 })
	b.release(40) // 60 held: 50 does not fit, so neither goes
	select {
	case <-got10:
		t.Fatal("a later, smaller request passed the one waiting first")
	case <-time.After(20 * time.Millisecond): // a scheduling window, not a wait for an event
	}
	b.release(60) // 0 held: both fit
	for name, c := range map[string]chan bool{"50": got50, "10": got10} {
		select {
		case ok := <-c:
			if !ok {
				t.Fatalf("the waiter for %s was refused", name)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("the waiter for %s was not admitted within 5s", name)
		}
	}
	if got := b.inUse(); got != 60 {
		t.Fatalf("in use %d, want 60", got)
	}
	// Giving up (context or wait) holds nothing.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if b.acquire(cctx, 50, time.Minute) {
		t.Fatal("admitted with an ended context while spent")
	}
	b.release(60)
	if got := b.inUse(); got != 0 {
		t.Fatalf("in use %d after every release, want 0", got)
	}
	// An answer larger than the whole budget goes alone.
	if !b.acquire(ctx, 1000, 0) || b.inUse() != 100 {
		t.Fatalf("an answer over the limit: in use %d, want the whole budget", b.inUse())
	}
}

// A connection gives back what it owes as it writes, and all of it when
// it closes; it is stalled only while it owes and writes nothing.
func TestOwing(t *testing.T) {
	b := newAnswerBudget(1 << 20)
	var now time.Duration
	o := &owing{budget: b, now: func() time.Duration { return now }}
	b.acquire(context.Background(), 1000, 0)
	o.owe(1000)
	now = 5 * time.Second
	if !o.stalled(time.Second) {
		t.Fatal("owing 1000 bytes, none written for 5s: not stalled")
	}
	o.wrote(300)
	if o.stalled(time.Second) || b.inUse() != 700 {
		t.Fatalf("after writing 300: stalled %v, in use %d (want false, 700)", o.stalled(time.Second), b.inUse())
	}
	o.wrote(5000) // more than owed: headers, pings
	if b.inUse() != 0 || o.owed.Load() != 0 {
		t.Fatalf("after writing everything: in use %d, owed %d", b.inUse(), o.owed.Load())
	}
	b.acquire(context.Background(), 400, 0)
	o.owe(400)
	o.settleAll()
	if b.inUse() != 0 || o.owe(1) {
		t.Fatalf("after close: in use %d, or a closed connection took a debt", b.inUse())
	}
}

// With the budget spent, a large answer waits a second and is refused
// with 503 naming answer_budget, and a small one is still served; the
// key's IDs are not consumed by the refusal.
func TestAnswerBudgetRefusal(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.AnswerBudget = 64 << 10 })
	f.s.budget.acquire(context.Background(), 64<<10, 0)
	before := f.cs.get("order").next.Load()
	start := time.Now()
	w := do(f.h, req{target: "/v1/keys/order/ids?count=5000"})
	wantError(t, w, 503, CodeUnavailable, "answer_budget")
	if w.Header().Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	if took := time.Since(start); took < answerWait/2 {
		t.Errorf("refused after %v, before waiting for the budget", took)
	}
	if got := f.cs.get("order").next.Load(); got != before {
		t.Errorf("the refusal consumed IDs: counter %d -> %d", before, got)
	}
	if w := do(f.h, req{target: "/v1/keys/order/ids?count=3"}); w.Code != 200 {
		t.Fatalf("a small answer with the budget spent: %d %s", w.Code, w.Body)
	}
	f.s.budget.release(64 << 10)
	if w := do(f.h, req{target: "/v1/keys/order/ids?count=5000"}); w.Code != 200 {
		t.Fatalf("after the budget came back: %d %s", w.Code, w.Body)
	}
	if got := f.s.budget.inUse(); got != 0 {
		t.Fatalf("budget in use %d after the answer was written", got)
	}
}

// TestMemoryLimitGrowsWithKeys: the default soft memory limit leaves room
// for every key the server may hold, so a configuration of 100,000 keys
// does not start with its live heap above the limit (the collector then
// ran all the time: a 37 s start instead of 3 s).
func TestMemoryLimitGrowsWithKeys(t *testing.T) {
	small := &Config{Keys: map[string]KeyConfig{"order": {Strategy: "counter"}}}
	small.SetDefaults()
	if want := int64(96<<20 + DefaultMaxKeys*MemoryPerKey); small.MemoryLimit != want {
		t.Errorf("one key, max_keys %d: memory_limit %d; want %d", small.MaxKeys, small.MemoryLimit, want)
	}
	many := &Config{Keys: map[string]KeyConfig{}}
	for i := range 100000 {
		many.Keys[fmt.Sprintf("k%d", i)] = KeyConfig{Strategy: "segment"}
	}
	many.SetDefaults()
	if want := int64(96<<20 + 100000*MemoryPerKey); many.MemoryLimit != want {
		t.Errorf("100,000 keys: memory_limit %d; want %d (2.4 KiB of live heap each)", many.MemoryLimit, want)
	}
	set := &Config{MemoryLimit: 200 << 20, Keys: many.Keys}
	set.SetDefaults()
	if set.MemoryLimit != 200<<20 {
		t.Errorf("an explicit memory_limit became %d", set.MemoryLimit)
	}
}

// Out-of-range budget settings are refused naming the field and value.
func TestAnswerBudgetConfig(t *testing.T) {
	reg, _ := testRegistry()
	for _, c := range []struct {
		mutate func(*Config)
		field  string
	}{
		{func(c *Config) { c.AnswerBudget = 1000 }, "answer_budget"},
		{func(c *Config) { c.MemoryLimit = 1 << 20 }, "memory_limit"},
		{func(c *Config) { c.AnswerTimeout = Duration(time.Millisecond) }, "answer_timeout"},
	} {
		cfg := &Config{DataDir: t.TempDir(), Keys: map[string]KeyConfig{"order": {Strategy: "counter"}}}
		c.mutate(cfg)
		cfg.SetDefaults()
		err := cfg.Validate(reg)
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: Validate = %v, want a problem naming it", c.field, err)
		}
	}
	cfg := &Config{DataDir: t.TempDir(), MemoryLimit: -1, Keys: map[string]KeyConfig{"order": {Strategy: "counter"}}}
	cfg.SetDefaults()
	if err := cfg.Validate(reg); err != nil {
		t.Errorf("memory_limit -1: %v", err)
	}
	if cfg.AnswerBudget != DefaultAnswerBudget || cfg.AnswerTimeout != Duration(10*time.Second) {
		t.Errorf("defaults: answer_budget %d, answer_timeout %v", cfg.AnswerBudget, cfg.AnswerTimeout)
	}
}
