package monotonic

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/testkit/testserver"
)

// TestEtcdStreamBrokenLinearizable: clients ask a follower (and the
// leader) while the leader's peer listener is closed, with its streams,
// again and again, and opened again on the same address. Batches in
// flight fail or are retried; every answer is checked: no ID twice, none
// below an answer received before its request was sent.
func TestEtcdStreamBrokenLinearizable(t *testing.T) {
	addr := testserver.Addr(t, testserver.Etcd)
	prefix := "/" + testserver.Prefix(t) + "/"
	cfg := EtcdConfig{Window: 1000}
	a := startNode(t, addr, prefix, cfg)
	leaderOf(t, []*node{a}, 10*time.Second)
	b := startNode(t, addr, prefix, cfg)
	testserver.Eventually(t, "the follower knows the leader", 10*time.Second, func() bool {
		l, _ := b.src.Leader()
		return l == a.peers.Addr()
	})
	h := &history{clk: clock.NewReal(), timeout: 2 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Most clients on the follower, so most requests are forwarded.
	wg := h.run(ctx, func() []*node { return []*node{a, b, b, b} }, 8)
	progress := func(what string) {
		t.Helper()
		n := h.count()
		testserver.Eventually(t, "requests succeeding "+what, 20*time.Second, func() bool { return h.count() > n+300 })
	}
	progress("before the first break")
	fwd := b.src.Status().Forwarded
	cur, peerAddr := a.peers, a.peers.Addr() // a.peers stays (the clients' labels read it)
	for i := 0; i < 5; i++ {
		if err := cur.Close(); err != nil {
			t.Logf("close: %v", err)
		}
		p, err := ListenPeers(peerAddr)
		if err != nil {
			t.Fatalf("listen again on %s: %v", peerAddr, err)
		}
		p.Add("k", a.src, nil)
		cur = p
		t.Cleanup(func() { p.Close() })
		progress("after a break")
	}
	cancel()
	wg.Wait()
	h.check(t)
	if got := b.src.Status().Forwarded - fwd; got < 1000 {
		t.Fatalf("only %d requests forwarded during the breaks", got)
	}
	if d := b.peers.dials.Load(); d < 2 {
		t.Fatalf("the follower dialed %d streams across 5 breaks", d)
	}
	t.Logf("the follower dialed %d streams", b.peers.dials.Load())
}

// TestEtcdStreamDeposedLeader: a stream a follower opened to the leader
// stays open when an operator revokes the leader's lease; the frames it
// then carries are refused with ErrFenced by the deposed leader itself.
func TestEtcdStreamDeposedLeader(t *testing.T) {
	addr := testserver.Addr(t, testserver.Etcd)
	prefix := "/" + testserver.Prefix(t) + "/"
	cfg := EtcdConfig{Window: 1_000_000}
	a := startNode(t, addr, prefix, cfg)
	leaderOf(t, []*node{a}, 10*time.Second)
	ctx := ctxT(t)
	// b only forwards (no source of its own), so nothing else moves.
	b := listenT(t, "127.0.0.1:0")
	if _, err := b.Forward(ctx, a.peers.Addr(), "k", 1); err != nil {
		t.Fatal(err)
	}
	operatorActions[0].do(ctx, t, etcdClient(t, addr), prefix) // lease revoke
	testserver.Eventually(t, "the deposed leader refuses frames", 10*time.Second, func() bool {
		_, err := b.Forward(ctx, a.peers.Addr(), "k", 1)
		if err != nil && !errors.Is(err, ErrFenced) {
			t.Fatalf("after the revoke: %v, want ErrFenced", err)
		}
		return err != nil
	})
	if d := b.dials.Load(); d != 1 {
		t.Fatalf("%d streams dialed, want the one opened before the revoke", d)
	}
}
