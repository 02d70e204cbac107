package client

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idmint/idmint/testkit/testserver"
)

// TestRecreatedMonotonicNotBuffered: a segment key is deleted and created
// again as a monotonic key (its IDs from 1,000,000 on). The first answer
// that says so (a range refill's: Idmint-Strategy monotonic, a new
// Idmint-Key-Generation) drops the buffer, and every later call gets IDs
// from a request sent after it began. Before, the client kept
// prefetching ranges of the monotonic key: 2,000 calls sent no request
// of their own, and were served IDs answered before they began.
func TestRecreatedMonotonicNotBuffered(t *testing.T) {
	cl := newCluster()
	n := newNamedNode(t, cl, "a")
	c := newClient(t, []string{n.url()}, Options{MinBatch: 100, MaxBatch: 100})
	ctx := testCtx(t)
	for range 60 { // past the low-water mark of the first range: a refill
		if _, err := c.Next(ctx, "re"); err != nil {
			t.Fatal(err)
		}
	}
	testserver.Eventually(t, "the buffer to be refilled", 10*time.Second, func() bool { return c.Buffered("re") >= 100 })
	const reborn = 1_000_000
	cl.recreate("re", "monotonic", reborn)
	prefetches, own := cl.requests("re/range/100"), cl.requests("re/range/1")+cl.requests("re/ids/1")
	late, old, buffered := 0, 0, 0
	newSeen := false
	for i := range 2000 {
		floor := cl.last("re") // the server's last ID before the call began
		id, err := c.Next(ctx, "re")
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case id >= reborn && id <= floor:
			if late++; late == 1 {
				t.Errorf("call %d got %d of the monotonic key, not above %d it had issued before the call began: prefetched", i, id, floor)
			}
		case id >= reborn:
			newSeen = true
		case newSeen:
			if old++; old == 1 {
				t.Errorf("call %d got %d from the buffer of the deleted key after a call got an ID of the new one", i, id)
			}
		default:
			buffered++ // the deleted key's buffer, before the client heard
		}
	}
	gotPrefetches := cl.requests("re/range/100") - prefetches
	gotOwn := cl.requests("re/range/1") + cl.requests("re/ids/1") - own
	t.Logf("2,000 calls after the key came back monotonic: %d from the deleted key's buffer, %d requests of their own, %d range prefetches", buffered, gotOwn, gotPrefetches)
	// Refill requests in flight when the key changed all answer (and
	// are dropped); none is sent after the first answer that told. How
	// much of the deleted key's buffer was left depends on how many
	// refills had landed (a loaded machine lands more): every call after
	// it sends a request of its own, but for those a refill answer in
	// flight served.
	most := int64(c.opts.MaxRefills) + 1
	if late > 0 || old > 0 || gotPrefetches > most || gotOwn < int64(2000-buffered)-most {
		t.Fatalf("%d calls served prefetched IDs of the monotonic key, %d old IDs; %d requests of their own, %d range prefetches; "+
			"want none, none, one per call after the %d served from the old buffer (less %d in flight), at most %d (those in flight and the one that told)",
			late, old, gotOwn, gotPrefetches, buffered, most, most)
	}
}

// instantClock is a clock whose sleeps pass at once: retries without
// waiting for real backoffs.
type instantClock struct{ mono atomic.Int64 }

func (c *instantClock) Now() time.Time { return time.Unix(0, c.mono.Load()) }
func (c *instantClock) Mono() time.Duration {
	return time.Duration(c.mono.Load())
}
func (c *instantClock) Sleep(ctx context.Context, d time.Duration) error {
	if d > 0 {
		c.mono.Add(int64(d))
	}
	return ctx.Err()
}
func (c *instantClock) SleepUntil(ctx context.Context, until time.Duration) error {
	for {
		now := c.mono.Load()
		if int64(until) <= now || c.mono.CompareAndSwap(now, int64(until)) {
			return ctx.Err()
		}
	}
}

// flakyRanges is an endpoint of one segment key whose range requests
// fail (retryably) while fail is above 0, counting down.
type flakyRanges struct {
	memTransport
	fail atomic.Int64
}

func (f *flakyRanges) rangeOf(ctx context.Context, key, token string, n int) (int64, int64, meta, error) {
	if f.fail.Add(-1) >= 0 {
		return 0, 0, meta{}, &Error{Endpoint: "mem", Status: 503, Message: "down", Retryable: true}
	}
	return f.memTransport.rangeOf(ctx, key, token, n)
}

// Range(2^40) on a used-up buffer retried while the endpoint fails does
// not move the chunk's counter: it added n on every retry, so 2^23
// retries wrapped it negative and Range answered a range of IDs never
// fetched (first + a negative index).
func TestRangeRetriesDoNotOverflow(t *testing.T) {
	clk := &instantClock{}
	c, err := New([]string{"http://127.0.0.1:1"}, Options{Clock: clk, HedgeAfter: -1, MinBatch: 2, MaxBatch: 2, MaxPrefetch: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f := &flakyRanges{}
	c.pool.eps[0].t = f
	ctx := testCtx(t)
	if first, n, err := c.Range(ctx, "order", 1<<40); err != nil || n != 1 || first != 1 {
		t.Fatalf("Range = %d, %d, %v; want the probe's ID 1", first, n, err)
	}
	// A range chunk (the probe's is a batch of one, retried one by one),
	// used up while every refill fails.
	testserver.Eventually(t, "a range refill", 10*time.Second, func() bool { return c.Buffered("order") > 0 })
	const retries = 1000
	f.fail.Store(retries)
	if first, n, err := c.Range(ctx, "order", 1<<40); err != nil || n != 2 || first != 2 {
		t.Fatalf("Range = %d, %d, %v; want the range [2, 3]", first, n, err)
	}
	k := (*c.keys.Load())["order"]
	dry := k.cur.Load()
	if dry.ids != nil || dry.next.Load() < dry.n {
		t.Fatalf("current chunk %+v: want a used-up range", dry)
	}
	if _, n, err := c.Range(ctx, "order", 1<<40); err != nil || n < 1 {
		t.Fatalf("Range after %d failed refills = %d, %v", retries, n, err)
	}
	if f.fail.Load() >= 0 {
		t.Fatalf("%d failures left: the retries did not happen", f.fail.Load()+1)
	}
	if got := dry.next.Load(); got > dry.n {
		t.Errorf("the used-up chunk's counter is %d after %d retries of Range(2^40) (n %d): every retry moved it; 2^23 of them wrap it", got, retries, dry.n)
	}
	// Where 2^23-1 retries of the old code left the counter: more must
	// not hand out IDs. Every refill fails from now on, and nothing else
	// is buffered.
	f.fail.Store(1 << 30)
	testserver.Eventually(t, "the last refill to end", 10*time.Second, func() bool {
		k.mu.Lock()
		defer k.mu.Unlock()
		return k.inflight == 0
	})
	k.mu.Lock()
	k.queue, k.queued = nil, 0
	k.mu.Unlock()
	dry.next.Store(dry.n + (1<<23-1)<<40)
	k.cur.Store(dry)
	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if first, n, err := c.Range(short, "order", 1<<40); err == nil {
		t.Fatalf("Range on a used-up chunk at the edge of int64 = %d, %d: IDs never fetched", first, n)
	}
}
