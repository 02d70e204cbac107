package client

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/testkit/testserver"
)

// A node that answers garbage, one that answers 500, one that never
// answers and one that refuses connections are routed around: every call
// succeeds from the one good node.
func TestRoutesAroundBadNodes(t *testing.T) {
	cl := newCluster()
	garbage, five, slow, good, gone := newFakeNode(t, cl), newFakeNode(t, cl), newFakeNode(t, cl), newFakeNode(t, cl), newFakeNode(t, cl)
	garbage.mode.Store(modeGarbage)
	five.mode.Store(mode500)
	slow.mode.Store(modeSlow)
	gone.down()
	var mu sync.Mutex
	var failovers, hedges int
	c := newClient(t, []string{garbage.url(), five.url(), slow.url(), gone.url(), good.url()}, Options{
		HedgeAfter: 50 * time.Millisecond,
		MinBatch:   10, MaxBatch: 10, // many refills, each a chance to pick a bad node
		Hooks: Hooks{
			Failover: func(FailoverEvent) { mu.Lock(); failovers++; mu.Unlock() },
			Hedge:    func(HedgeEvent) { mu.Lock(); hedges++; mu.Unlock() },
		},
	})
	ctx := testCtx(t)
	draws := make([][]int64, 4)
	var wg sync.WaitGroup
	for g := range draws {
		wg.Go(func() {
			for range 500 {
				id, err := c.Next(ctx, "order")
				if err != nil {
					t.Errorf("Next: %v", err)
					return
				}
				draws[g] = append(draws[g], id)
			}
		})
	}
	wg.Wait()
	checkDraws(t, draws, nil)
	st := c.Stats()
	mu.Lock()
	defer mu.Unlock()
	if failovers == 0 || int64(failovers) != st.Failovers {
		t.Errorf("failover hook called %d times, Stats says %d; want the same, above 0", failovers, st.Failovers)
	}
	if garbage.calls.Load() == 0 || five.calls.Load() == 0 {
		t.Errorf("the garbage and 500 nodes got %d and %d requests; the test wants them tried", garbage.calls.Load(), five.calls.Load())
	}
	for _, e := range st.Endpoints {
		if e.URL != good.url() && e.Failures == 0 && e.Requests > 0 {
			t.Errorf("endpoint %s: %d requests, no failure recorded", e.URL, e.Requests)
		}
	}
	// Breakers keep bad nodes out: far fewer requests reach them than
	// there were refills.
	if r := garbage.calls.Load() + five.calls.Load(); r > st.Keys[0].Refills {
		t.Errorf("bad nodes got %d requests over %d refills; their breakers should keep most away", r, st.Keys[0].Refills)
	}
}

// The slow node alone first: the hedge after HedgeAfter goes to the good
// node and wins; the slow node is counted as failing.
func TestHedge(t *testing.T) {
	cl := newCluster()
	slow, good := newFakeNode(t, cl), newFakeNode(t, cl)
	slow.mode.Store(modeSlow)
	c := newClient(t, []string{slow.url(), good.url()}, Options{HedgeAfter: 20 * time.Millisecond, BreakerThreshold: 1})
	// Make the round robin start at the slow node.
	for c.pool.rr.Load()%2 != 1 {
		c.pool.rr.Add(1)
	}
	if _, err := c.Next(testCtx(t), "order"); err != nil {
		t.Fatal(err)
	}
	st := c.Stats()
	if st.Hedges != 1 {
		t.Errorf("%d hedges; want 1", st.Hedges)
	}
	if st.Endpoints[0].Available || st.Endpoints[0].Failures != 1 {
		t.Errorf("slow endpoint: %+v; want its breaker open after losing a hedge", st.Endpoints[0])
	}
}

// With every node down the client serves what it holds, then returns
// ErrUnavailable within the context's deadline; once a node is back, it
// issues again.
func TestAllDownThenUp(t *testing.T) {
	cl := newCluster()
	a, b := newFakeNode(t, cl), newFakeNode(t, cl)
	c := newClient(t, []string{a.url(), b.url()}, Options{MinBatch: 1000, MaxBatch: 1000, MaxBackoff: 200 * time.Millisecond})
	ctx := testCtx(t)
	seen := map[int64]bool{}
	draw := func(ctx context.Context) error {
		id, err := c.Next(ctx, "order")
		if err == nil {
			if seen[id] {
				t.Fatalf("duplicate %d", id)
			}
			seen[id] = true
		}
		return err
	}
	for range 10 {
		if err := draw(ctx); err != nil {
			t.Fatal(err)
		}
	}
	testserver.Eventually(t, "the buffer to be refilled", 10*time.Second, func() bool { return c.Buffered("order") > 500 })
	a.mode.Store(mode503)
	b.mode.Store(mode503)
	held := c.Buffered("order")
	for i := range held {
		if err := draw(ctx); err != nil {
			t.Fatalf("ID %d of the %d held with every node down: %v", i, held, err)
		}
	}
	const wait = 300 * time.Millisecond
	dctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	start := time.Now()
	err := draw(dctx)
	took := time.Since(start)
	var we *WaitError
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &we) || we.Last == nil {
		t.Fatalf("Next with every node down = %v; want a WaitError with ErrUnavailable, DeadlineExceeded and the last failure", err)
	}
	var ce *Error
	if !errors.As(err, &ce) || ce.Status != 503 {
		t.Errorf("error %v does not carry the nodes' 503", err)
	}
	// Not a timing assertion on the machine's speed: a call that ignored
	// its deadline would wait out Options.Timeout (10 s).
	if took > wait+5*time.Second {
		t.Errorf("Next returned %v after its %v deadline", took, wait)
	}
	a.mode.Store(modeOK)
	testserver.Eventually(t, "Next to succeed once a node is back", 20*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return draw(ctx) == nil
	})
}

// A call that finds every endpoint backing off still says why: its error
// carries the failure that opened the breakers (the nodes' 503), not only
// "backing off". The client's clock stands still, so the second call meets
// open breakers whatever the machine's speed.
func TestAllBackingOffCarriesLastFailure(t *testing.T) {
	cl := newCluster()
	a, b := newFakeNode(t, cl), newFakeNode(t, cl)
	a.mode.Store(mode503)
	b.mode.Store(mode503)
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := newClient(t, []string{a.url(), b.url()}, Options{Clock: fc, HedgeAfter: -1, BreakerThreshold: 1})
	for i := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, err := c.Next(ctx, "order")
		cancel()
		var ce *Error
		if !errors.Is(err, ErrUnavailable) || !errors.As(err, &ce) || ce.Status != 503 {
			t.Fatalf("call %d with every node answering 503: %v; want ErrUnavailable carrying the 503", i+1, err)
		}
	}
	if got := a.calls.Load() + b.calls.Load(); got != 2 {
		t.Errorf("%d requests; want 2 (the second call must find both breakers open)", got)
	}
}

// Retry-After keeps an endpoint out of rotation at least that long (on the
// client's clock), and 429 is retried elsewhere.
func TestRetryAfter(t *testing.T) {
	cl := newCluster()
	limited, good := newFakeNode(t, cl), newFakeNode(t, cl)
	limited.mode.Store(mode429)
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := newClient(t, []string{limited.url(), good.url()}, Options{Clock: fc, HedgeAfter: -1, BreakerThreshold: 5})
	for c.pool.rr.Load()%2 != 1 {
		c.pool.rr.Add(1)
	}
	if _, err := c.Next(testCtx(t), "order"); err != nil {
		t.Fatalf("Next with one node rate limiting: %v", err)
	}
	avail := func() bool { return c.Stats().Endpoints[0].Available }
	if limited.calls.Load() != 1 || avail() {
		t.Fatalf("limited node: %d calls, available %v; want 1 call and its breaker open (Retry-After: 7)", limited.calls.Load(), avail())
	}
	fc.Advance(6 * time.Second)
	if avail() {
		t.Fatal("endpoint back in rotation 6 s after Retry-After: 7")
	}
	fc.Advance(2 * time.Second)
	if !avail() {
		t.Fatal("endpoint still out of rotation 8 s after Retry-After: 7")
	}
}

func TestOptionsAndEndpoints(t *testing.T) {
	for _, tc := range []struct {
		eps  []string
		opts Options
		want string
	}{
		{nil, Options{}, "endpoints: none given"},
		{[]string{"ftp://x:1"}, Options{}, `scheme "ftp"`},
		{[]string{"127.0.0.1:8080"}, Options{}, "want http://host:port"},
		{[]string{"http://a:1", "http://a:1"}, Options{}, "listed twice"},
		{[]string{"http://a:1?x=1"}, Options{}, "query"},
		{[]string{"http://a:1"}, Options{MaxCount: 2_000_000}, "Options.MaxCount: 2000000"},
		{[]string{"http://a:1"}, Options{MinBatch: 10, MaxBatch: 5}, "Options.MaxBatch: 5"},
		{[]string{"http://a:1"}, Options{Timeout: -1}, "Options.Timeout"},
	} {
		if _, err := New(tc.eps, tc.opts); err == nil || !contains(err.Error(), tc.want) {
			t.Errorf("New(%v, %+v) = %v; want an error containing %q", tc.eps, tc.opts, err, tc.want)
		}
	}
}

func TestClose(t *testing.T) {
	cl := newCluster()
	n := newFakeNode(t, cl)
	c := newClient(t, []string{n.url()}, Options{})
	if _, err := c.Next(testCtx(t), "order"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Next(testCtx(t), "mono"); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := c.NextN(testCtx(t), "order", make([]int64, 100000)); !errors.Is(err, ErrClosed) {
		t.Errorf("NextN after Close = %v; want ErrClosed", err)
	}
	if _, err := c.Next(testCtx(t), "mono"); !errors.Is(err, ErrClosed) {
		t.Errorf("Next of a monotonic key after Close = %v; want ErrClosed", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// A node that failed and came back gets requests again once its backoff
// has passed: the half-open probe goes first.
func TestRecoveredNodeRejoins(t *testing.T) {
	cl := newCluster()
	flaky, good := newFakeNode(t, cl), newFakeNode(t, cl)
	flaky.mode.Store(mode500)
	c := newClient(t, []string{flaky.url(), good.url()}, Options{MinBatch: 10, MaxBatch: 10, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, BreakerThreshold: 1})
	ctx := testCtx(t)
	testserver.Eventually(t, "the flaky node to fail", 10*time.Second, func() bool {
		_, err := c.Next(ctx, "order")
		return err == nil && !c.Stats().Endpoints[0].Available
	})
	flaky.mode.Store(modeOK)
	before := flaky.calls.Load()
	testserver.Eventually(t, "the recovered node to serve again", 10*time.Second, func() bool {
		if _, err := c.Next(ctx, "order"); err != nil {
			t.Fatal(err)
		}
		return flaky.calls.Load() > before+3 && c.Stats().Endpoints[0].Available
	})
}
