package monotonic

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/monotonic/lincheck"
	"github.com/idmint/idmint/testkit/tcpproxy"
	"github.com/idmint/idmint/testkit/testserver"
)

func etcdClient(t *testing.T, addr string) *clientv3.Client { return etcdClientB(t, addr) }

func etcdClientB(t testing.TB, addr string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// node is one cluster member in a test: its own etcd client, peers
// listener and source.
type node struct {
	cli   *clientv3.Client
	peers *Peers
	src   *Etcd
}

func startNode(t *testing.T, addr, prefix string, cfg EtcdConfig) *node {
	t.Helper()
	n := &node{cli: etcdClient(t, addr)}
	var err error
	if n.peers, err = ListenPeers("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.peers.Close() })
	cfg.Client, cfg.Prefix, cfg.Name, cfg.Advertise, cfg.Forward = n.cli, prefix, "k", n.peers.Addr(), n.peers
	if cfg.TTL == 0 {
		cfg.TTL = 2 * time.Second
	}
	if n.src, err = NewEtcd(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.src.Close() })
	n.peers.Add("k", n.src, nil)
	return n
}

func leaderOf(t *testing.T, nodes []*node, d time.Duration) *node {
	t.Helper()
	var l *node
	testserver.Eventually(t, "a proven leader", d, func() bool {
		for _, n := range nodes {
			if _, self := n.src.Leader(); self {
				l = n
				return true
			}
		}
		return false
	})
	return l
}

// history records requests against a set of nodes on one monotonic clock.
type history struct {
	clk     *clock.Real
	timeout time.Duration // per request; default 5s
	mu      sync.Mutex
	ops     []lincheck.Op
	errs    atomic.Int64
	passed  atomic.Int64
}

func (h *history) run(ctx context.Context, nodes func() []*node, clients int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(c)))
			for ctx.Err() == nil {
				ns := nodes()
				nd := ns[r.Intn(len(ns))]
				n := int64(1 + r.Intn(4))
				d := h.timeout
				if d == 0 {
					d = 5 * time.Second
				}
				rctx, cancel := context.WithTimeout(ctx, d)
				sent := h.clk.Mono()
				first, err := nd.src.Next(rctx, n)
				recv := h.clk.Mono()
				cancel()
				if err != nil {
					h.errs.Add(1)
					time.Sleep(5 * time.Millisecond)
					continue
				}
				ids := make([]int64, n)
				for i := range ids {
					ids[i] = first + int64(i)
				}
				h.mu.Lock()
				h.ops = append(h.ops, lincheck.Op{Sent: sent, Received: recv, IDs: ids, Label: fmt.Sprintf("client %d via %s", c, nd.peers.Addr())})
				h.mu.Unlock()
			}
		}(c)
	}
	return &wg
}

func (h *history) check(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.ops) == 0 {
		t.Fatal("no request succeeded")
	}
	if v := lincheck.Check(h.ops, 10); len(v) > 0 {
		t.Fatalf("%d requests, violations: %v", len(h.ops), v)
	}
	t.Logf("%d requests checked, %d refused", len(h.ops), h.errs.Load())
}

func (h *history) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// TestEtcdClusterLinearizable: three nodes on one private etcd serve one
// key while the leader resigns, the next leader crashes (its etcd client
// dies without revoking: the lease must expire), etcd restarts, and every
// node restarts at once. Every request is recorded and checked.
func TestEtcdClusterLinearizable(t *testing.T) {
	etcd := testserver.Start(t, testserver.Etcd)
	prefix := "/" + testserver.Prefix(t) + "/"
	var mu sync.Mutex
	var nodes []*node
	for i := 0; i < 3; i++ {
		nodes = append(nodes, startNode(t, etcd.Addr(), prefix, EtcdConfig{Window: 50}))
	}
	live := func() []*node { mu.Lock(); defer mu.Unlock(); return append([]*node(nil), nodes...) }
	replace := func(old *node) {
		mu.Lock()
		defer mu.Unlock()
		for i, n := range nodes {
			if n == old {
				nodes[i] = startNode(t, etcd.Addr(), prefix, EtcdConfig{Window: 50})
			}
		}
	}
	h := &history{clk: clock.NewReal()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wg := h.run(ctx, live, 6)
	progress := func(what string) {
		n := h.count()
		testserver.Eventually(t, "requests succeeding after "+what, 15*time.Second, func() bool { return h.count() > n+200 })
	}
	l := leaderOf(t, live(), 10*time.Second)
	progress("start")

	// 1. The leader resigns (Close revokes its lease).
	l.src.Close()
	replace(l)
	progress("resignation")

	// 2. The leader crashes: its etcd client dies, nothing is revoked.
	l = leaderOf(t, live(), 10*time.Second)
	crashed := h.clk.Mono()
	l.cli.Close()
	var successor *node
	testserver.Eventually(t, "a new leader after a crash", 2*time.Second+3*time.Second, func() bool {
		for _, n := range live() {
			if _, self := n.src.Leader(); self && n != l {
				successor = n
				return true
			}
		}
		return false
	})
	t.Logf("failover after a crash took %v (TTL 2s)", h.clk.Mono()-crashed)
	l.src.Close()
	replace(l)
	progress("crash")

	// 3. etcd is killed -9 and restarts.
	etcd.Kill(t)
	etcd.Restart(t)
	progress("etcd restart")
	_ = successor

	// 4. Every node restarts at once.
	for _, n := range live() {
		n.src.Close()
		replace(n)
	}
	progress("restart of every node")
	cancel()
	wg.Wait()
	h.check(t)
}

// TestEtcdPausedLeaderFenced: a leader whose own monotonic clock ran past
// its proven lease (a pause: SIGSTOP, GC, VM freeze) answers nothing, even
// before it learns it lost; the successor starts above its bound, and the
// old leader, back, issues nothing below what the successor issued.
func TestEtcdPausedLeaderFenced(t *testing.T) {
	addr := testserver.Addr(t, testserver.Etcd)
	prefix := "/" + testserver.Prefix(t) + "/"
	proxy, err := tcpproxy.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	fake := clock.NewFake(time.Now())
	cli := etcdClient(t, proxy.Addr())
	a, err := NewEtcd(EtcdConfig{Client: cli, Prefix: prefix, Name: "a", TTL: 2 * time.Second, Window: 10, Clock: fake})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := ctxT(t)
	testserver.Eventually(t, "a leads", 10*time.Second, func() bool { _, self := a.Leader(); return self })
	var lastA int64
	for i := 0; i < 25; i++ { // crosses bound writes (window 10)
		if lastA, err = a.Next(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	// Pause: a's clock jumps past TTL-margin with no keepalive confirmed.
	proxy.Blackhole()
	fake.Advance(2*time.Second - 400*time.Millisecond)
	if id, err := a.Next(ctx, 1); !errors.Is(err, ErrFenced) {
		t.Fatalf("paused leader answered %d, %v; want ErrFenced", id, err)
	}
	// A successor takes over once etcd expires a's lease.
	b, err := NewEtcd(EtcdConfig{Client: etcdClient(t, addr), Prefix: prefix, Name: "b", TTL: 2 * time.Second, Window: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	testserver.Eventually(t, "b leads after a's lease expires", 8*time.Second, func() bool { _, self := b.Leader(); return self })
	idB, err := b.Next(ctx, 1)
	if err != nil || idB <= lastA {
		t.Fatalf("successor issued %d, %v; want above %d", idB, err, lastA)
	}
	// a wakes up and reaches etcd again: still nothing for it to issue.
	proxy.Heal()
	for i := 0; i < 20; i++ {
		fake.Advance(time.Second)
		if id, err := a.Next(ctx, 1); err == nil {
			t.Fatalf("old leader issued %d after waking (successor issued %d)", id, idB)
		}
	}
	if id, err := b.Next(ctx, 1); err != nil || id <= idB {
		t.Fatalf("successor then issued %d, %v; want above %d", id, err, idB)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func TestEtcdBadConfig(t *testing.T) {
	cli := &clientv3.Client{}
	for _, c := range []EtcdConfig{
		{Prefix: "/p"},
		{Client: cli},
		{Client: cli, Prefix: "/p", TTL: 1500 * time.Millisecond},
		{Client: cli, Prefix: "/p", Margin: 10 * time.Second},
		{Client: cli, Prefix: "/p", Forward: &Peers{}},
	} {
		if _, err := NewEtcd(c); !errors.Is(err, ErrBadConfig) {
			t.Errorf("NewEtcd(%+v) = %v, want ErrBadConfig", c, err)
		}
	}
}
