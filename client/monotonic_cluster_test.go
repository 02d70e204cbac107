package client

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idmint/idmint/internal/hdr"
	"github.com/idmint/idmint/testkit/idtest"
	"github.com/idmint/idmint/testkit/servenode"
	"github.com/idmint/idmint/testkit/testserver"
)

// monoCluster is three real `idmint serve` processes serving one
// monotonic key, seq, whose leader etcd elects.
type monoCluster struct {
	nodes    []*node
	urls     []string // HTTP
	grpcURLs []string
}

const (
	monoTTL  = 2 * time.Second // the key's leadership lease
	monoWait = 60 * time.Second
)

// startMonoCluster builds the binary and starts the nodes on the shared
// etcd, under a prefix of their own.
func startMonoCluster(t testing.TB) *monoCluster {
	t.Helper()
	etcd := testserver.Addr(t, testserver.Etcd)
	dir := t.TempDir()
	bin := servenode.Build(t, dir)
	yaml := fmt.Sprintf("coordinator: etcd://%s/%s?ttl=3s\nkeys:\n  seq:\n    strategy: monotonic\n    options:\n      ttl: \"%d\"\n",
		etcd, testserver.Prefix(t), int(monoTTL/time.Second))
	mc := &monoCluster{nodes: servenode.StartN(t, bin, dir, yaml, 3, true)}
	for _, n := range mc.nodes {
		mc.urls = append(mc.urls, n.URL())
		mc.grpcURLs = append(mc.grpcURLs, fmt.Sprintf("grpc://127.0.0.1:%d", n.GRPC))
	}
	return mc
}

// leader waits until exactly one node other than not (and not down) says
// it leads, and returns it.
func (mc *monoCluster) leader(t testing.TB, why string, not ...*node) *node {
	t.Helper()
	var l *node
	testserver.Eventually(t, why+": one proven leader", monoWait, func() bool {
		l = nil
		for _, n := range mc.nodes {
			skip := n.Exited()
			for _, x := range not {
				skip = skip || x == n
			}
			if skip || !idtest.MonotonicLeader(n.URL(), "seq") {
				continue
			}
			if l != nil {
				return false
			}
			l = n
		}
		return l != nil
	})
	return l
}

// TestMonotonicClusterClientLinearizable: 256 callers (32 under -race)
// draw IDs of a monotonic key through one client from three real nodes
// while the leader is killed with kill -9 (then restarted on its data)
// and, later, the new leader is SIGSTOPped past its lease (then
// continued). Calls share requests; lincheck verifies the history of
// calls, each from when it began to when it returned: no ID twice, and
// every ID of a call that returned before another began is below every
// ID of that other call.
func TestMonotonicClusterClientLinearizable(t *testing.T) {
	mc := startMonoCluster(t)
	c := newClient(t, mc.urls, Options{MaxBackoff: time.Second})
	callers := 256
	if raceEnabled || testing.Short() {
		callers = 32
	}
	h := newHistory()
	var failed atomic.Int64
	var lastErr atomic.Pointer[string]
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			buf := make([]int64, 3)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				sent := h.now()
				var err error
				if (g+i)%5 == 0 {
					if err = c.NextN(ctx, "seq", buf); err == nil {
						h.add(sent, "NextN", append([]int64(nil), buf...)...)
					}
				} else {
					var id int64
					if id, err = c.Next(ctx, "seq"); err == nil {
						h.add(sent, "Next", id)
					}
				}
				cancel()
				if err != nil {
					failed.Add(1)
					s := err.Error()
					lastErr.Store(&s)
				}
			}
		})
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	answered := func() int {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.ops)
	}
	// more waits for k calls that began after now to return.
	more := func(k int, why string) {
		t.Helper()
		since := h.now()
		testserver.Eventually(t, fmt.Sprintf("%s: %d calls begun after %v to return", why, k, since), monoWait, func() bool {
			h.mu.Lock()
			defer h.mu.Unlock()
			got := 0
			for i := len(h.ops) - 1; i >= 0 && got < k; i-- {
				if h.ops[i].Sent > since {
					got++
				}
			}
			return got >= k
		})
	}
	more(10_000, "warm-up")

	l := mc.leader(t, "before kill -9")
	l.Kill(t)
	killed := h.now()
	t.Logf("%v: leader %s killed after %d calls", killed, l.Name, answered())
	more(10_000, "after kill -9 of the leader")
	l.Start(t)
	more(10_000, "killed leader restarted")

	l = mc.leader(t, "before SIGSTOP")
	l.Signal(t, syscall.SIGSTOP)
	t.Logf("%v: leader %s stopped after %d calls", h.now(), l.Name, answered())
	mc.leader(t, "while the old leader is stopped", l)
	more(10_000, "new leader while the old one is stopped")
	l.Signal(t, syscall.SIGCONT)
	t.Logf("%v: %s continued", h.now(), l.Name)
	more(10_000, "stopped leader continued")

	close(stop)
	wg.Wait()
	h.check(t)
	st := c.Stats()
	var ks KeyStats
	for _, k := range st.Keys {
		if k.Key == "seq" {
			ks = k
		}
	}
	ids := 0
	for _, op := range h.ops {
		ids += len(op.IDs)
	}
	msg := ""
	if p := lastErr.Load(); p != nil {
		msg = *p
	}
	t.Logf("linearizable: %d calls, %d IDs, %d requests (%.3f per ID), %d calls failed (last: %s); leader %q; endpoints %+v",
		len(h.ops), ids, ks.Requests, float64(ks.Requests)/float64(ids), failed.Load(), msg, ks.Leader, st.Endpoints)
	if ks.Requests >= int64(len(h.ops))/2 {
		t.Errorf("%d requests for %d concurrent calls: want them shared", ks.Requests, len(h.ops))
	}
}

// BenchmarkMonotonicCluster: 256 concurrent callers of Next on one
// monotonic key through one client, against three real nodes on etcd.
// It reports IDs/s, the p99 of one call and requests per ID.
//
//	go test -run '^$' -bench MonotonicCluster -benchtime 5000000x ./client/
//
// (needs IDMINT_TEST_ETCD: scripts/servers.sh up prints it).
func BenchmarkMonotonicCluster(b *testing.B) {
	mc := startMonoCluster(b)
	for _, proto := range []string{"http", "grpc"} {
		urls := mc.urls
		if proto == "grpc" {
			urls = mc.grpcURLs
		}
		for _, inflight := range []int{1, 2, 4, 8} {
			b.Run(fmt.Sprintf("%s/inflight=%d", proto, inflight), func(b *testing.B) {
				benchMonotonic(b, urls, 256, inflight)
			})
		}
	}
}

// BenchmarkMonotonicClusterUnloaded: one caller at a time, each call its
// own round trip: the latency of a call when nothing else is waiting.
//
//	go test -run '^$' -bench MonotonicClusterUnloaded -benchtime 20000x ./client/
func BenchmarkMonotonicClusterUnloaded(b *testing.B) {
	mc := startMonoCluster(b)
	for _, proto := range []string{"http", "grpc"} {
		urls := mc.urls
		if proto == "grpc" {
			urls = mc.grpcURLs
		}
		b.Run(proto, func(b *testing.B) { benchMonotonic(b, urls, 1, 2) })
	}
}

func benchMonotonic(b *testing.B, urls []string, callers, inflight int) {
	c, err := New(urls, Options{MaxInFlight: inflight, Dialers: grpcDialers})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	// Warm up: the probe, the nodes' and the leader's names, connections.
	for range 1000 {
		if _, err := c.Next(ctx, "seq"); err != nil {
			b.Fatal(err)
		}
	}
	ks := c.Stats().Keys[0]
	if c.pool.byNode(ks.Leader) == nil {
		b.Logf("the key's leader (%q) is not known to be one of the endpoints: requests go to any node, which forwards", ks.Leader)
	}
	before := ks.Requests
	all := hdr.New()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	if callers == 1 {
		for range b.N {
			t0 := time.Now()
			if _, err := c.Next(ctx, "seq"); err != nil {
				b.Fatal(err)
			}
			all.Record(int64(time.Since(t0)))
		}
	} else {
		benchParallel(b, c, callers, all)
	}
	el := time.Since(start)
	b.StopTimer()
	reqs := c.Stats().Keys[0].Requests - before
	b.ReportMetric(float64(b.N)/el.Seconds(), "IDs/s")
	b.ReportMetric(float64(all.ValueAt(0.5))/1e3, "p50-µs")
	b.ReportMetric(float64(all.ValueAt(0.99))/1e3, "p99-µs")
	b.ReportMetric(float64(reqs)/float64(b.N), "requests/ID")
}

// benchParallel calls Next b.N times from callers goroutines, recording
// latencies into all.
func benchParallel(b *testing.B, c *Client, callers int, all *hdr.Histogram) {
	ctx := context.Background()
	var mu sync.Mutex
	b.SetParallelism((callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.RunParallel(func(pb *testing.PB) {
		// One call in 8 is timed: an unbiased sample of the same calls,
		// at an eighth of the clock reads and histogram records, which
		// the client's own CPU would otherwise pay beside it.
		lat := hdr.New()
		for i := 0; pb.Next(); i++ {
			if i%8 != 0 {
				if _, err := c.Next(ctx, "seq"); err != nil {
					b.Error(err)
					return
				}
				continue
			}
			t0 := time.Now()
			if _, err := c.Next(ctx, "seq"); err != nil {
				b.Error(err)
				return
			}
			lat.Record(int64(time.Since(t0)))
		}
		mu.Lock()
		all.Merge(lat)
		mu.Unlock()
	})
}
