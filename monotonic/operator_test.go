package monotonic

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/testkit/tcpproxy"
	"github.com/idmint/idmint/testkit/testserver"
)

// operatorAction is something an operator does to a leader's keys with
// etcdctl.
type operatorAction struct {
	name string
	do   func(ctx context.Context, t *testing.T, cli *clientv3.Client, prefix string)
}

// leaderKV returns the leading candidate's election key.
func leaderKV(ctx context.Context, t *testing.T, cli *clientv3.Client, prefix string) (key string, lease clientv3.LeaseID) {
	t.Helper()
	resp, err := cli.Get(ctx, prefix+"election/", clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("the leader's election key: %v, %v", resp, err)
	}
	return string(resp.Kvs[0].Key), clientv3.LeaseID(resp.Kvs[0].Lease)
}

var operatorActions = []operatorAction{
	{"lease revoke", func(ctx context.Context, t *testing.T, cli *clientv3.Client, prefix string) {
		_, lease := leaderKV(ctx, t, cli, prefix)
		if _, err := cli.Revoke(ctx, lease); err != nil {
			t.Fatalf("etcdctl lease revoke: %v", err)
		}
	}},
	{"key delete", func(ctx context.Context, t *testing.T, cli *clientv3.Client, prefix string) {
		key, _ := leaderKV(ctx, t, cli, prefix)
		if _, err := cli.Delete(ctx, key); err != nil {
			t.Fatalf("etcdctl del: %v", err)
		}
	}},
	{"del --prefix", func(ctx context.Context, t *testing.T, cli *clientv3.Client, prefix string) {
		if _, err := cli.Delete(ctx, prefix+"election/", clientv3.WithPrefix()); err != nil {
			t.Fatalf("etcdctl del --prefix: %v", err)
		}
	}},
}

// TestEtcdOperatorDeposesLeader: with requests in flight on the leader
// (its own, and those a follower forwards to it), an operator revokes its
// lease, deletes its election key, or deletes every candidate's key. The
// leader reaches etcd through a proxy that goes dark at that moment, so it
// cannot see what happened and trusts its clock until its proven deadline
// ("partitioned"), or it sees it at once ("connected"). A successor is
// elected at once either way. Every answer from both nodes is checked: no
// answer is below one received before its request was sent.
func TestEtcdOperatorDeposesLeader(t *testing.T) {
	addr := testserver.Addr(t, testserver.Etcd)
	for _, act := range operatorActions {
		for _, partitioned := range []bool{true, false} {
			name := act.name + "/connected"
			if partitioned {
				name = act.name + "/partitioned"
			}
			t.Run(name, func(t *testing.T) {
				prefix := "/" + testserver.Prefix(t) + "/"
				proxy, err := tcpproxy.Listen(addr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { proxy.Close() })  // after the nodes' cleanups
				cfg := EtcdConfig{Window: 1_000_000} // the old leader never needs a bound write meanwhile
				a := startNode(t, proxy.Addr(), prefix, cfg)
				leaderOf(t, []*node{a}, 10*time.Second)
				b := startNode(t, addr, prefix, cfg)
				testserver.Eventually(t, "the follower knows the leader", 10*time.Second, func() bool {
					l, _ := b.src.Leader()
					return l == a.peers.Addr()
				})
				h := &history{clk: clock.NewReal(), timeout: time.Second}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				wg := h.run(ctx, func() []*node { return []*node{a, b} }, 6)
				progress := func(what string, k int) {
					t.Helper()
					n := h.count()
					testserver.Eventually(t, "requests succeeding "+what, 20*time.Second, func() bool { return h.count() > n+k })
				}
				progress("before the operator acts", 200)
				old := a.src.term.Load()
				if partitioned {
					proxy.Blackhole()
				}
				op := etcdClient(t, addr)
				opCtx, opCancel := context.WithTimeout(ctx, 10*time.Second)
				act.do(opCtx, t, op, prefix)
				opCancel()
				acted := h.clk.Mono()
				// del --prefix deletes the follower's key too: either
				// node may win the next term.
				testserver.Eventually(t, "a new leader", 15*time.Second, func() bool {
					if _, self := b.src.Leader(); self {
						return true
					}
					_, self := a.src.Leader()
					return self && a.src.term.Load() != old
				})
				t.Logf("a successor leads %v after the operator acted (TTL 2s)", h.clk.Mono()-acted)
				// Requests sent to the partitioned old leader wait for it
				// to give up on them: fewer get through meanwhile.
				progress("through the successor", 50)
				proxy.Heal()
				progress("after the old leader is reachable again", 200)
				cancel()
				wg.Wait()
				h.check(t)
			})
		}
	}
}

// TestEtcdDeposedLeaderStops: a leader whose clock would let it lead for
// ever (a fake clock that never moves) stops issuing as soon as it sees its
// lease revoked or its election key deleted.
func TestEtcdDeposedLeaderStops(t *testing.T) {
	addr := testserver.Addr(t, testserver.Etcd)
	for _, act := range operatorActions {
		t.Run(act.name, func(t *testing.T) {
			prefix := "/" + testserver.Prefix(t) + "/"
			fake := clock.NewFake(time.Now())
			a, err := NewEtcd(EtcdConfig{Client: etcdClient(t, addr), Prefix: prefix, Name: "a", TTL: 2 * time.Second, Window: 1_000_000, Clock: fake})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			ctx := ctxT(t)
			testserver.Eventually(t, "a leads", 10*time.Second, func() bool { _, self := a.Leader(); return self })
			if _, err := a.Next(ctx, 1); err != nil {
				t.Fatal(err)
			}
			act.do(ctx, t, etcdClient(t, addr), prefix)
			var last int64
			testserver.Eventually(t, "the deposed leader refuses", 5*time.Second, func() bool {
				id, err := a.Next(ctx, 1)
				if err == nil {
					last = id
					return false
				}
				if !errors.Is(err, ErrFenced) {
					t.Fatalf("Next: %v; want ErrFenced", err)
				}
				return true
			})
			t.Logf("issued up to %d before it saw it was deposed", last)
		})
	}
}

// TestEtcdFencedBoundWrite: a bound write of a deposed leader that lands
// late (the leader checked its proof, then stalled, and its write reached
// etcd after a successor had written its own bounds) changes nothing: the
// write is refused, the bound stays the successor's, and the next leader
// starts above everything the successor issued.
func TestEtcdFencedBoundWrite(t *testing.T) {
	addr := testserver.Addr(t, testserver.Etcd)
	prefix := "/" + testserver.Prefix(t) + "/"
	cli := etcdClient(t, addr)
	ctx := ctxT(t)
	open := func(name string) *Etcd {
		e, err := NewEtcd(EtcdConfig{Client: etcdClient(t, addr), Prefix: prefix, Name: name, TTL: 2 * time.Second, Window: 10})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	leads := func(e *Etcd, what string) {
		t.Helper()
		testserver.Eventually(t, what+" leads", 10*time.Second, func() bool { _, self := e.Leader(); return self })
	}
	issue := func(e *Etcd, k int) (last int64) {
		t.Helper()
		for i := 0; i < k; i++ { // crosses bound writes (window 10)
			id, err := e.Next(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			last = id
		}
		return last
	}
	a := open("a")
	leads(a, "a")
	issue(a, 5)
	tmA := a.term.Load()
	_, boundA := tmA.c.headroom()
	b := open("b")
	key, _ := leaderKV(ctx, t, cli, prefix)
	if _, err := cli.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	leads(b, "b")
	a.Close() // it would campaign again, and lead after b
	lastB := issue(b, 35)
	// a's write under way: it had checked its proof (valid again here, as
	// when it checked), and reaches etcd now.
	tmA.valid.Store(int64(tmA.clk.Mono() + time.Hour))
	err := tmA.c.persist(ctx, boundA+1)
	tmA.valid.Store(-1)
	if !errors.Is(err, ErrFenced) {
		t.Errorf("the deposed leader's late bound write: %v; want ErrFenced", err)
	}
	resp, err := cli.Get(ctx, prefix+"bound")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("bound: %v %v", resp, err)
	}
	if got := string(resp.Kvs[0].Value); got == itoa(boundA+1) {
		t.Errorf("the deposed leader's late write set the bound to %s, below %d the successor issued", got, lastB)
	}
	b.Close()
	c := open("c")
	leads(c, "c")
	if id := issue(c, 1); id <= lastB {
		t.Fatalf("the next leader issued %d, not above %d the previous one issued", id, lastB)
	}
}

// TestEtcdDeadlineFromSendTime: leadership is proven from the time a
// keepalive was sent, not answered. Here the first keepalive takes 1s of
// the leader's clock to be answered (with TTL 2s, margin 400ms); the
// leader must stop at send + 1.6s, which is 0.6s after the answer, not at
// answer + 1.6s.
func TestEtcdDeadlineFromSendTime(t *testing.T) {
	addr := testserver.Addr(t, testserver.Etcd)
	prefix := "/" + testserver.Prefix(t) + "/"
	cli := etcdClient(t, addr)
	fake := clock.NewFake(time.Now())
	calls := 0
	slow := func(ctx context.Context, id clientv3.LeaseID) error {
		calls++ // only the lead goroutine calls
		if calls > 1 {
			<-ctx.Done() // later keepalives never come back
			return ctx.Err()
		}
		_, err := cli.KeepAliveOnce(ctx, id)
		fake.Advance(time.Second)
		return err
	}
	a, err := NewEtcd(EtcdConfig{Client: cli, Prefix: prefix, Name: "a", TTL: 2 * time.Second, Margin: 400 * time.Millisecond,
		Window: 1000, Clock: fake, keepAlive: slow})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := ctxT(t)
	testserver.Eventually(t, "a leads", 10*time.Second, func() bool { _, self := a.Leader(); return self })
	sent := fake.Mono() - time.Second
	if _, err := a.Next(ctx, 1); err != nil {
		t.Fatalf("within the proven lease: %v", err)
	}
	fake.Advance(sent + 1600*time.Millisecond + time.Millisecond - fake.Mono())
	if id, err := a.Next(ctx, 1); !errors.Is(err, ErrFenced) {
		t.Fatalf("at send + TTL - margin + 1ms the leader answered %d, %v; want ErrFenced", id, err)
	}
}

// TestEtcdResignHandsOverAtOnce: a leader that resigns (Close) says so, so
// its successor need not wait out its lease.
func TestEtcdResignHandsOverAtOnce(t *testing.T) {
	addr := testserver.Addr(t, testserver.Etcd)
	prefix := "/" + testserver.Prefix(t) + "/"
	cfg := EtcdConfig{TTL: 5 * time.Second}
	a := startNode(t, addr, prefix, cfg)
	leaderOf(t, []*node{a}, 10*time.Second)
	b := startNode(t, addr, prefix, cfg)
	testserver.Eventually(t, "the follower knows the leader", 10*time.Second, func() bool {
		l, _ := b.src.Leader()
		return l == a.peers.Addr()
	})
	clk := clock.NewReal()
	a.src.Close()
	closed := clk.Mono()
	// Waiting out a 5s lease would take at least 3.3s (proofs every 1.7s).
	leaderOf(t, []*node{b}, 3*time.Second)
	t.Logf("the successor leads %v after the resignation", clk.Mono()-closed)
}

// TestEtcdCloseWhileUnreachable: a candidate waiting to be elected closes
// promptly even while etcd is unreachable (it gives its key back through
// the lease's revoke, bounded by Timeout, not a resignation without one).
func TestEtcdCloseWhileUnreachable(t *testing.T) {
	addr := testserver.Addr(t, testserver.Etcd)
	prefix := "/" + testserver.Prefix(t) + "/"
	proxy, err := tcpproxy.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	a := startNode(t, addr, prefix, EtcdConfig{})
	leaderOf(t, []*node{a}, 10*time.Second)
	b := startNode(t, proxy.Addr(), prefix, EtcdConfig{})
	testserver.Eventually(t, "the candidate knows the leader", 10*time.Second, func() bool {
		l, _ := b.src.Leader()
		return l == a.peers.Addr()
	})
	proxy.Blackhole()
	done := make(chan struct{})
	go func() {
		b.src.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("Close of a candidate still waiting 15s after etcd became unreachable")
	}
}
