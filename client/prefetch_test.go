package client

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/testkit/testserver"
)

// gatedRanges is an endpoint of a segment key whose range requests are
// answered by the test: each takes the next count from answers and
// answers that many IDs, counted on from 1.
type gatedRanges struct {
	next    atomic.Int64
	answers chan int64
	waiting atomic.Int64 // range requests waiting for an answer
}

func (g *gatedRanges) rangeOf(ctx context.Context, _, _ string, n int) (int64, int64, meta, error) {
	g.waiting.Add(1)
	defer g.waiting.Add(-1)
	select {
	case count := <-g.answers:
		count = min(count, int64(n))
		return g.next.Add(count) - count + 1, count, meta{strategy: "segment"}, nil
	case <-ctx.Done():
		return 0, 0, meta{}, &Error{Endpoint: "gated", Message: ctx.Err().Error(), Retryable: true}
	}
}

func (g *gatedRanges) ids(context.Context, string, string, int) ([]int64, bool, meta, error) {
	return []int64{g.next.Add(1)}, false, meta{strategy: "segment"}, nil // the probe
}

func (g *gatedRanges) close() {}

func (k *keyState) inLine() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.waiters)
}

// TestWaitersServedInOrder: calls that find the buffer empty are served
// in the order they came, each refill going to the first in line; a call
// that comes later, or comes back for more, waits behind them. Before,
// every waiter was woken together and newcomers raced them for the
// refilled IDs, so a waiter could lose them again and again.
func TestWaitersServedInOrder(t *testing.T) {
	g := &gatedRanges{answers: make(chan int64)}
	c := newClient(t, []string{"http://127.0.0.1:1"}, Options{HedgeAfter: -1, MinBatch: 10, MaxBatch: 100})
	c.pool.eps[0].t = g
	ctx := testCtx(t)
	if id, err := c.Next(ctx, "order"); err != nil || id != 1 {
		t.Fatalf("first Next = %d, %v; want the probe's ID 1", id, err)
	}
	k := (*c.keys.Load())["order"]

	// served[i] gets the IDs call i was given, once it returns.
	const calls = 8
	served := make([]chan []int64, calls)
	failed := make([]chan error, calls)
	join := func(i, n int) {
		served[i], failed[i] = make(chan []int64, 1), make(chan error, 1)
		before := k.inLine()
		go func() {
			dst := make([]int64, n)
			if err := c.NextN(ctx, "order", dst); err != nil {
				failed[i] <- err
				return
			}
			served[i] <- dst
		}()
		testserver.Eventually(t, fmt.Sprintf("call %d to join the line behind %d", i, before), 10*time.Second, func() bool { return k.inLine() == before+1 })
	}
	answer := func(count int64) {
		select {
		case g.answers <- count:
		case <-time.After(10 * time.Second):
			t.Fatalf("no refill request waited for an answer of %d IDs", count)
		}
	}
	expect := func(i int, want ...int64) {
		t.Helper()
		select {
		case got := <-served[i]:
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("call %d got %v; want %v", i, got, want)
			}
		case err := <-failed[i]:
			t.Fatalf("call %d: %v", i, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("call %d not served; %d calls in line", i, k.inLine())
		}
	}
	nothingYet := func(i int) {
		t.Helper()
		select {
		case got := <-served[i]:
			t.Fatalf("call %d served %v before the calls ahead of it", i, got)
		default:
		}
	}

	// Call 0 wants 3 IDs, the others 1.
	join(0, 3)
	for i := 1; i < 5; i++ {
		join(i, 1)
	}
	answer(2) // IDs 2, 3: both to call 0, which keeps its place
	testserver.Eventually(t, "call 0 to get two of its three IDs", 10*time.Second, func() bool {
		k.mu.Lock()
		defer k.mu.Unlock()
		return len(k.waiters) == 5 && k.waiters[0].got == 2
	})
	nothingYet(1)
	answer(3) // 4 to call 0, 5 and 6 to calls 1 and 2
	expect(0, 2, 3, 4)
	expect(1, 5)
	expect(2, 6)
	// Newcomers join behind calls 3 and 4.
	join(5, 1)
	join(6, 2)
	join(7, 1)
	for i, want := range [][]int64{{7}, {8}, {9}, {10, 11}, {12}} {
		nothingYet(7)
		answer(int64(len(want)))
		expect(3+i, want...)
	}
	if n := k.inLine(); n != 0 {
		t.Fatalf("%d calls still in line", n)
	}
}

// A call whose context ends leaves the line, and the next one is served.
func TestWaiterLeavesLine(t *testing.T) {
	g := &gatedRanges{answers: make(chan int64)}
	c := newClient(t, []string{"http://127.0.0.1:1"}, Options{HedgeAfter: -1, MinBatch: 1, MaxBatch: 1})
	c.pool.eps[0].t = g
	ctx := testCtx(t)
	if _, err := c.Next(ctx, "order"); err != nil {
		t.Fatal(err)
	}
	k := (*c.keys.Load())["order"]
	short, cancel := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() {
		_, err := c.Next(short, "order")
		gaveUp <- err
	}()
	testserver.Eventually(t, "the first call to wait", 10*time.Second, func() bool { return k.inLine() == 1 })
	next := make(chan int64, 1)
	go func() {
		id, err := c.Next(ctx, "order")
		if err != nil {
			t.Error(err)
		}
		next <- id
	}()
	testserver.Eventually(t, "the second call to wait", 10*time.Second, func() bool { return k.inLine() == 2 })
	cancel()
	if err := <-gaveUp; err == nil {
		t.Fatal("a call whose context ended in line got an ID")
	}
	if n := k.inLine(); n != 1 {
		t.Fatalf("%d calls in line after one gave up; want 1", n)
	}
	g.answers <- 1
	if id := <-next; id != 2 {
		t.Fatalf("the call behind the one that gave up got %d; want 2", id)
	}
	// Three waits: for the probe, and the two calls here.
	if st := keyStats(c, "order"); st.Waits != 3 || st.WaitMax <= 0 || st.WaitTotal < st.WaitMax {
		t.Errorf("stats after three waits: %d waits, max %v, total %v", st.Waits, st.WaitMax, st.WaitTotal)
	}
}

// The prefetch distance follows the draw: rate × (2 × refill latency +
// HedgeAfter), bounded by MinBatch and MaxPrefetch; it grows with the
// rate, doubles when calls wait, and shrinks when the draw slows.
func TestPrefetchDistance(t *testing.T) {
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := newClient(t, []string{"http://127.0.0.1:1"}, Options{Clock: fc, HedgeAfter: 200 * time.Millisecond, MinBatch: 100, MaxBatch: 10_000, MaxPrefetch: 1_000_000})
	k := &keyState{c: c}
	k.latMax = 50 * time.Millisecond // cover: 2×50 ms + 200 ms = 0.3 s
	// draw takes n IDs over d and returns the distance.
	draw := func(n int64, d time.Duration, hungry bool) int64 {
		fc.Advance(d)
		k.supplied += n
		k.hungry = hungry
		k.observeLocked(fc.Mono(), 0)
		return k.targetLocked()
	}
	k.observeLocked(fc.Mono(), 0)
	if got := k.targetLocked(); got != 100 {
		t.Fatalf("distance before any draw: %d; want MinBatch 100", got)
	}
	steps := []struct {
		n       int64
		d       time.Duration
		hungry  bool
		lo, hi  int64
		meaning string
	}{
		{10_000, 100 * time.Millisecond, false, 29_000, 30_000, "100,000 IDs/s × 0.3 s"},
		{100_000, 100 * time.Millisecond, false, 299_000, 300_000, "1 M IDs/s: ten times as far"},
		{100_000, 100 * time.Millisecond, true, 599_000, 600_000, "a call waited: twice as far"},
		{1_000_000, 100 * time.Millisecond, false, 1_000_000, 1_000_000, "10 M IDs/s: MaxPrefetch"},
		{0, 10 * time.Millisecond, false, 1_000_000, 1_000_000, "a pause of 10 ms: about the same"},
		{1000, 4 * time.Second, false, 400_000, 410_000, "4 s of a slow draw: e^-2 of 10 M IDs/s"},
		{0, time.Minute, false, 100, 100, "a minute idle: MinBatch"},
	}
	for i, s := range steps {
		if got := draw(s.n, s.d, s.hungry); got < s.lo || got > s.hi {
			t.Fatalf("step %d (%s): distance %d; want %d..%d", i, s.meaning, got, s.lo, s.hi)
		}
	}
	// A slower refill latency moves it out.
	draw(100_000, 100*time.Millisecond, false)
	k.rate = 1e6
	k.latMax = 400 * time.Millisecond
	if got := k.targetLocked(); got != 1_000_000 {
		t.Errorf("1 M IDs/s with 400 ms refills: distance %d; want 1,000,000 (1 s of draw, at MaxPrefetch)", got)
	}
	k.latMax = 100 * time.Millisecond
	if got := k.targetLocked(); got < 399_000 || got > 400_000 {
		t.Errorf("1 M IDs/s with 100 ms refills: distance %d; want 400,000", got)
	}
}

// slowRanges is an endpoint of a segment key that answers range requests
// after a delay, with at most per IDs each (a server's segment ends), and
// counts the requests in flight at once.
type slowRanges struct {
	memTransport
	delay    time.Duration
	per      int64
	inflight atomic.Int64
	most     atomic.Int64
	asked    atomic.Int64 // IDs asked for by requests in flight
	mostAsk  atomic.Int64
}

func (s *slowRanges) rangeOf(ctx context.Context, key, token string, n int) (int64, int64, meta, error) {
	in := s.inflight.Add(1)
	a := s.asked.Add(int64(n))
	defer s.inflight.Add(-1)
	defer s.asked.Add(-int64(n))
	for m := s.most.Load(); in > m && !s.most.CompareAndSwap(m, in); m = s.most.Load() {
	}
	for m := s.mostAsk.Load(); a > m && !s.mostAsk.CompareAndSwap(m, a); m = s.mostAsk.Load() {
	}
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return 0, 0, meta{}, &Error{Endpoint: "slow", Message: ctx.Err().Error(), Retryable: true}
	}
	return s.memTransport.rangeOf(ctx, key, token, int(min(int64(n), s.per)))
}

// Drawn flat out from an endpoint whose answers take 5 ms and bring at
// most 1,000 IDs, the client keeps several refills in flight, its
// distance grows past what one refill brings, and what it holds and asks
// for stays within MaxPrefetch.
func TestPrefetchManyInFlight(t *testing.T) {
	s := &slowRanges{delay: 5 * time.Millisecond, per: 1000}
	const most = 20_000
	c := newClient(t, []string{"http://127.0.0.1:1"}, Options{HedgeAfter: -1, MinBatch: 100, MaxBatch: 100_000, MaxPrefetch: most, MaxRefills: 4})
	c.pool.eps[0].t = s
	ctx := testCtx(t)
	var wg sync.WaitGroup
	var over atomic.Int64
	for range 4 {
		wg.Go(func() {
			dst := make([]int64, 100)
			for range 300 {
				if err := c.NextN(ctx, "order", dst); err != nil {
					t.Error(err)
					return
				}
				if b := c.Buffered("order"); b > most {
					over.Store(b)
				}
			}
		})
	}
	wg.Wait()
	st := keyStats(c, "order")
	t.Logf("stats %+v; at most %d requests and %d IDs asked in flight", st, s.most.Load(), s.mostAsk.Load())
	if s.most.Load() < 2 {
		t.Errorf("at most %d refill request in flight at once; want several (the draw outruns one)", s.most.Load())
	}
	if s.most.Load() > 4 {
		t.Errorf("%d refill requests in flight at once; MaxRefills is 4", s.most.Load())
	}
	if st.Target <= 1000 {
		t.Errorf("distance %d after a flat-out draw; want more than one answer's 1,000 IDs", st.Target)
	}
	if st.Target > most || over.Load() > 0 || s.mostAsk.Load() > most {
		t.Errorf("distance %d, %d IDs held once, %d asked in flight once; want all within MaxPrefetch %d", st.Target, over.Load(), s.mostAsk.Load(), most)
	}
	if st.Waits == 0 || len(st.WaitBuckets) == 0 || st.WaitBuckets[len(st.WaitBuckets)-1].Count != st.Waits {
		t.Errorf("waits %d, buckets %v: want the flat-out draw to have waited, every wait in the histogram", st.Waits, st.WaitBuckets)
	}
}

// Monotonic keys are never prefetched, however hungry their callers: the
// servers issue exactly the IDs the calls got, plus the probe's.
func TestMonotonicNotPrefetchedWhenHungry(t *testing.T) {
	cl := newCluster()
	n := newFakeNode(t, cl)
	c, err := New([]string{n.url()}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	var got atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			dst := make([]int64, 3)
			for range 50 {
				if _, err := c.Next(ctx, "mono"); err != nil {
					t.Error(err)
					return
				}
				if err := c.NextN(ctx, "mono", dst); err != nil {
					t.Error(err)
					return
				}
				got.Add(4)
			}
		})
	}
	wg.Wait()
	st := keyStats(c, "mono")
	c.Close() // waits for anything running in the background
	if issued := cl.issued.Load(); issued != got.Load()+1 {
		t.Errorf("servers issued %d IDs of the monotonic key, the calls got %d: %d fetched ahead (the probe's 1 is a gap)", issued, got.Load(), issued-got.Load()-1)
	}
	// The calls that came before the key's strategy was known waited
	// for the probe; no other refill ran.
	if st.Prefetched || st.Buffered != 0 || st.Target != 0 || st.InFlight != 0 || st.Refills != 1 || st.Waits > 16 {
		t.Errorf("monotonic key stats %+v: want not prefetched, nothing held, no distance, the probe alone refilled, at most 16 waits for it", st)
	}
}
