package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idmint/idmint/testkit/servenode"
	"github.com/idmint/idmint/testkit/testserver"
)

// node is one real `idmint serve` process on fixed ports, so the client
// finds it again after a restart.
type node = servenode.Node

// freeTCPPort is a port for a node that the test restarts on it.
func freeTCPPort(t testing.TB) int { return testserver.FreePort(t) }

// TestCluster runs three `idmint serve` processes sharing one PostgreSQL
// segment store and one etcd worker registry. 16 goroutines draw IDs of a
// segment key through one client (10 million; 1 million with -short or
// -race, whose instrumentation makes each draw ~20 times dearer) while one
// node is killed with kill -9, another SIGSTOPped, and both come back; one
// more goroutine draws snowflake IDs all along. The callers see no error,
// no duplicate, and segment IDs that increase within each refill. Then
// every node is killed: the client serves what it holds, then fails with
// ErrUnavailable within the deadline, and issues again once they are back.
func TestCluster(t *testing.T) {
	etcd := testserver.Addr(t, testserver.Etcd)
	pg := testserver.Database(t, testserver.Postgres)
	total := 10_000_000
	if testing.Short() || raceEnabled {
		total = 1_000_000
	}
	dir := t.TempDir()
	bin := servenode.Build(t, dir)
	yaml := fmt.Sprintf("coordinator: etcd://%s/%s?ttl=3s\nstores:\n  default: %s\nkeys:\n  order:\n    strategy: segment\n    step: 20000\n  flake:\n    strategy: snowflake\n",
		etcd, testserver.Prefix(t), pg)
	nodes := servenode.StartN(t, bin, dir, yaml, 3, false)
	var urls []string
	for _, n := range nodes {
		urls = append(urls, n.URL())
	}

	var log refillLog
	// Each call has its own deadline (Options.Timeout, for a context
	// without one) and each chaos step one of its own (waitDrawn), rather
	// than one for every draw: 1 million draws under -race on a loaded
	// machine outlasted a 3-minute context for all of them.
	c := newClient(t, urls, Options{Hooks: Hooks{Refill: log.hook}, MaxBackoff: time.Second, MaxBatch: 200_000, Timeout: time.Minute})
	ctx := context.Background()

	const goroutines = 16
	per := total / goroutines
	draws := make([][]int64, goroutines)
	var drawn atomic.Int64
	// gate[i] is closed once chaos step i is done; goroutines pause at
	// step boundaries so every step happens while draws are under way.
	const steps = 4
	var gates [steps]chan struct{}
	for i := range gates {
		gates[i] = make(chan struct{})
	}
	boundary := func(i int) int64 { return int64(total) * int64(i+1) / (steps + 2) }
	errs := make(chan error, goroutines+1)
	var wg sync.WaitGroup
	for g := range goroutines {
		draws[g] = make([]int64, 0, per)
		wg.Go(func() {
			step := 0
			for len(draws[g]) < per {
				for step < steps && drawn.Load() >= boundary(step) {
					<-gates[step]
					step++
				}
				id, err := c.Next(ctx, "order")
				if err != nil {
					errs <- fmt.Errorf("goroutine %d, ID %d: %w", g, len(draws[g]), err)
					return
				}
				draws[g] = append(draws[g], id)
				drawn.Add(1)
			}
		})
	}
	// Snowflake IDs all along, as batches.
	stopFlake := make(chan struct{})
	var flakes []int64
	var fwg sync.WaitGroup
	fwg.Go(func() {
		buf := make([]int64, 100)
		for {
			select {
			case <-stopFlake:
				return
			default:
			}
			if err := c.NextN(ctx, "flake", buf); err != nil {
				errs <- fmt.Errorf("snowflake: %w", err)
				return
			}
			flakes = append(flakes, buf...)
			time.Sleep(time.Millisecond)
		}
	})
	waitDrawn := func(n int64) {
		testserver.Eventually(t, fmt.Sprintf("%d IDs drawn", n), 2*time.Minute, func() bool {
			select {
			case err := <-errs:
				t.Fatal(err)
			default:
			}
			return drawn.Load() >= n
		})
	}
	var beforeBack [3]int64
	waitDrawn(boundary(0))
	nodes[0].Kill(t) // 1. kill -9
	t.Logf("n0 killed after %d IDs", drawn.Load())
	close(gates[0])
	waitDrawn(boundary(1))
	nodes[1].Signal(t, syscall.SIGSTOP) // 2. SIGSTOP
	t.Logf("n1 stopped after %d IDs", drawn.Load())
	close(gates[1])
	waitDrawn(boundary(2))
	// 3. both come back: n0 restarted on its data, n1 continued.
	nodes[1].Signal(t, syscall.SIGCONT)
	nodes[0].Start(t)
	for i, e := range c.Stats().Endpoints {
		beforeBack[i] = e.Requests
	}
	t.Logf("n0 restarted, n1 continued after %d IDs", drawn.Load())
	close(gates[2])
	waitDrawn(boundary(3))
	close(gates[3])
	wg.Wait()
	close(stopFlake)
	fwg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkDraws(t, draws, log.snapshot())
	checkDraws(t, [][]int64{flakes}, nil)
	st := c.Stats()
	t.Logf("%d segment IDs, %d snowflake IDs; stats %+v", total/goroutines*goroutines, len(flakes), st)
	if st.Failovers+st.Hedges == 0 {
		t.Error("no failover and no hedge through kill -9 and SIGSTOP")
	}
	// The nodes that came back serve the client again (their breakers
	// close after a probe).
	big := make([]int64, 50_000)
	testserver.Eventually(t, "n0 and n1 to serve the client again", 60*time.Second, func() bool {
		// Draw enough to need refills, so requests reach the nodes.
		if err := c.NextN(ctx, "order", big); err != nil {
			t.Fatal(err)
		}
		s := c.Stats().Endpoints
		return s[0].Requests > beforeBack[0] && s[1].Requests > beforeBack[1] && s[0].Available && s[1].Available
	})

	// All nodes down: serve what is held, then a clear error in time.
	for _, n := range nodes {
		n.Kill(t)
	}
	// A refill a node answered before it died may still be on its way in:
	// only once none is in flight is what the client holds all it will get
	// (on a loaded machine one landed after Buffered was read, and the
	// Next meant to fail got one of its IDs).
	testserver.Eventually(t, "the refills in flight when the nodes died to end", 10*time.Second, func() bool {
		return keyStats(c, "order").InFlight == 0
	})
	held := c.Buffered("order")
	seen := make(map[int64]bool, held)
	for range held {
		id, err := c.Next(ctx, "order")
		if err != nil {
			t.Fatalf("serving the %d IDs held with every node down: %v", held, err)
		}
		seen[id] = true
	}
	dctx, dcancel := context.WithTimeout(ctx, time.Second)
	defer dcancel()
	start := time.Now()
	_, err := c.Next(dctx, "order")
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next with every node down = %v; want ErrUnavailable and DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Next returned %v after its 1 s deadline", took)
	}
	t.Logf("all down: %d held IDs served, then: %v", held, err)
	var swg sync.WaitGroup
	for _, n := range nodes {
		swg.Go(func() { n.Start(t) })
	}
	swg.Wait()
	var after []int64
	testserver.Eventually(t, "the client to issue again once the nodes are back", 60*time.Second, func() bool {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		defer rcancel()
		id, err := c.Next(rctx, "order")
		if err == nil {
			after = append(after, id)
		}
		return err == nil
	})
	for range 1000 {
		id, err := c.Next(ctx, "order")
		if err != nil {
			t.Fatal(err)
		}
		after = append(after, id)
	}
	all := slices.Concat(append(draws, after)...)
	for id := range seen {
		all = append(all, id)
	}
	checkDraws(t, [][]int64{all}, nil)
}
