package monotonic

import (
	"context"
	"testing"
	"time"

	"github.com/idmint/idmint/testkit/testserver"
)

// TestLeaders: the listing names the proven leader, its node name, since
// when it leads, every candidate and the persisted bound; after the leader
// resigns it names the successor.
func TestLeaders(t *testing.T) {
	addr := testserver.Addr(t, testserver.Etcd)
	parent := "/" + testserver.Prefix(t) + "/"
	var nodes []*node
	for i := 0; i < 2; i++ {
		nodes = append(nodes, startNode(t, addr, parent+"k/", EtcdConfig{NodeName: []string{"alpha", "beta"}[i]}))
	}
	cli := etcdClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	check := func(why string, l *node, name string) {
		t.Helper()
		var got []LeaderInfo
		// The record is written just after the election.
		testserver.Eventually(t, why+": the leader's record", 10*time.Second, func() bool {
			var err error
			if got, err = Leaders(ctx, cli, parent); err != nil {
				t.Fatal(err)
			}
			return len(got) == 1 && got[0].Node != ""
		})
		g := got[0]
		if g.Key != "k" || g.Leader != l.peers.Addr() || g.Node != name {
			t.Fatalf("%s: got key %q leader %q node %q; want k, %s, %s", why, g.Key, g.Leader, g.Node, l.peers.Addr(), name)
		}
		if time.Since(g.Since) > time.Minute || time.Since(g.Since) < 0 {
			t.Fatalf("%s: since %v is not just now", why, g.Since)
		}
		if _, bound := l.src.term.Load().c.headroom(); g.Bound != bound || g.Bound < 1 {
			t.Fatalf("%s: bound %d, want the leader's %d", why, g.Bound, bound)
		}
		if g.Revision == 0 || g.LeaseLeft <= 0 || g.LeaseLeft > 2*time.Second {
			t.Fatalf("%s: revision %d, lease left %v; want a revision and at most the 2s TTL", why, g.Revision, g.LeaseLeft)
		}
		t.Logf("%s: %+v", why, g)
	}
	l := leaderOf(t, nodes, 10*time.Second)
	names := map[*node]string{nodes[0]: "alpha", nodes[1]: "beta"}
	check("two candidates", l, names[l])
	if got, _ := Leaders(ctx, cli, parent); got[0].Candidates != 2 {
		t.Fatalf("candidates = %d, want 2", got[0].Candidates)
	}
	l.src.Close()
	other := nodes[0]
	if other == l {
		other = nodes[1]
	}
	l = leaderOf(t, []*node{other}, 10*time.Second)
	check("after the leader resigned", l, names[l])

	// Nothing under an empty prefix.
	if got, err := Leaders(ctx, cli, parent+"none/"); err != nil || len(got) != 0 {
		t.Fatalf("empty prefix: %v, %v; want nothing", got, err)
	}
}

// TestLeaderNode: every node names the leader it knows by the NodeName the
// leader published, and says whether it is itself; after the leader
// resigns, the successor names itself.
func TestLeaderNode(t *testing.T) {
	addr := testserver.Addr(t, testserver.Etcd)
	prefix := "/" + testserver.Prefix(t) + "/k/"
	names := []string{"alpha", "beta"}
	var nodes []*node
	for _, name := range names {
		nodes = append(nodes, startNode(t, addr, prefix, EtcdConfig{NodeName: name}))
	}
	l := leaderOf(t, nodes, 10*time.Second)
	li, fi := 0, 1
	if l != nodes[0] {
		li, fi = 1, 0
	}
	want := func(n *node, node string, self bool) {
		t.Helper()
		var got string
		var gotSelf bool
		testserver.Eventually(t, "LeaderNode "+node, 10*time.Second, func() bool {
			got, gotSelf = n.src.LeaderNode()
			return got == node && gotSelf == self
		})
	}
	want(nodes[li], names[li], true)
	want(nodes[fi], names[li], false)
	nodes[li].src.Close()
	want(nodes[fi], names[fi], true)
}
