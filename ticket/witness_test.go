package ticket

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/witness"
)

// counter is one ticket server's auto-increment, shared by every node.
type counter struct {
	mu   sync.Mutex
	next int64
	step int64
	id   string // the server's identity; "" when it will not say
}

// nodeConn is one node's connections to a counter: fresh until the hook
// has run, as after a reconnect.
type nodeConn struct {
	c     *counter
	hook  connHook
	mu    sync.Mutex
	fresh bool
}

func (n *nodeConn) tickets(ctx context.Context, dst []int64) (int, error) {
	n.mu.Lock()
	fresh := n.fresh
	n.fresh = false
	n.mu.Unlock()
	if fresh {
		if err := n.hook(ctx, n); err != nil {
			n.mu.Lock()
			n.fresh = true
			n.mu.Unlock()
			return 0, err
		}
	}
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	dst[0] = n.c.next
	n.c.next += n.c.step
	return 1, nil
}

func (n *nodeConn) raise(_ context.Context, atLeast int64) (int64, error) {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	before := n.c.next
	if n.c.next < atLeast {
		n.c.next = firstAtLeast(atLeast, n.c.next%n.c.step, n.c.step)
	}
	return before, nil
}

func (n *nodeConn) identity(context.Context) (string, error) {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	return n.c.id, nil
}
func (n *nodeConn) close() error { return nil }

// TestWitnessFailover: three nodes share two ticket servers and a
// witness. Both servers fail over to replicas that lost their last 300
// tickets; every node opens new connections without seeing an error, and
// one node restarts with no memory. No ticket is issued twice, and nobody
// waits for the counters to climb back: the new connections repair the
// servers because the servers' identities changed, or because they do not
// tell them.
func TestWitnessFailover(t *testing.T) {
	for _, ids := range [][2]string{{"", ""}, {"primary", "replica"}} {
		t.Run("identity="+ids[0]+"->"+ids[1], func(t *testing.T) { testWitnessFailover(t, ids[0], ids[1]) })
	}
}

func testWitnessFailover(t *testing.T, before, after string) {
	ctx := context.Background()
	w, err := witness.OpenFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctrs := []*counter{{next: 1, step: 2, id: before}, {next: 2, step: 2, id: before}}
	var conns [][]*nodeConn // per node
	openNode := func() *Ticket {
		var mine []*nodeConn
		cfg := Config{Clock: clock.NewFake(time.Unix(0, 0)), Witness: w, Block: 100,
			Servers: []Server{{URL: "fake://a"}, {URL: "fake://b"}}}
		tk, err := open(ctx, cfg, func(_ context.Context, _ Config, s Server, hook connHook) (source, error) {
			n := &nodeConn{c: ctrs[s.Offset-1], hook: hook, fresh: true}
			mine = append(mine, n)
			return n, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, mine)
		return tk
	}
	nodes := []*Ticket{openNode(), openNode(), openNode()}
	seen := map[int64]int{}
	var mu sync.Mutex
	draw := func() {
		var wg sync.WaitGroup
		for i, tk := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 500 {
					id, err := tk.Next(ctx)
					if err != nil {
						t.Errorf("node %d: %v", i, err)
						return
					}
					mu.Lock()
					seen[id]++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	draw()
	for _, c := range ctrs { // the failover: each replica is 300 tickets behind
		c.mu.Lock()
		c.next -= 300 * c.step
		c.id = after
		c.mu.Unlock()
	}
	for _, cs := range conns { // every connection broke
		for _, n := range cs {
			n.mu.Lock()
			n.fresh = true
			n.mu.Unlock()
		}
	}
	nodes[2].Close()
	nodes[2] = openNode() // restarted: remembers nothing
	draw()
	for id, n := range seen {
		if n > 1 {
			t.Fatalf("ticket %d issued %d times", id, n)
		}
	}
	if len(seen) != 3000 {
		t.Fatalf("%d tickets; want 3000", len(seen))
	}
	for _, tk := range nodes {
		if c := tk.Ceiling(); c == 0 {
			t.Fatal("no ceiling persisted")
		}
	}
}

// BenchmarkCeiling is the ceiling's own cost per ticket, without a
// database: an in-memory counter, with no witness and with a File witness
// (one fsync'd raise per Block/2 tickets, in the background).
func BenchmarkCeiling(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "witness=none", true: "witness=file"}[on], func(b *testing.B) {
			ctx := context.Background()
			cfg := Config{Clock: clock.NewReal(), Servers: []Server{{URL: "fake://a"}}}
			if on {
				w, err := witness.OpenFile(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				defer w.Close()
				cfg.Witness = w
			}
			c := &counter{next: 1, step: 1}
			tk, err := open(ctx, cfg, func(_ context.Context, _ Config, _ Server, hook connHook) (source, error) {
				return &nodeConn{c: c, hook: hook, fresh: true}, nil
			})
			if err != nil {
				b.Fatal(err)
			}
			defer tk.Close()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tk.Next(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
