package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idmint/idmint/testkit/testserver"
)

// TestRollingRestartDrains restarts three real `idmint serve` nodes one by
// one with SIGTERM while clients take IDs through a load balancer that
// sends only to nodes whose /readyz answers 200 (polled every 100 ms, as a
// Kubernetes readiness probe or an HAProxy health check does, only
// faster). The nodes share one segment store (PostgreSQL: SQLite cannot
// be shared by processes on different hosts) and drain for 1 s.
//
// Every request must succeed (a node that stops accepting while the
// balancer still sends to it refuses connections: what happened without a
// drain) and every ID must be new. With drain_period 0 the test fails
// (ROLLING_DRAIN=0s runs it so).
func TestRollingRestartDrains(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	pg := testserver.Database(t, testserver.Postgres) // skips with a message when unset; fails under CI=true
	drain := "1s"
	if v := os.Getenv("ROLLING_DRAIN"); v != "" {
		drain = v // the mutant: ROLLING_DRAIN=0s must fail
	}
	bin := buildBinary(t)
	cfg := filepath.Join(t.TempDir(), "idmint.yaml")
	yaml := fmt.Sprintf("drain_period: %s\nstores:\n  default: %s\nkeys:\n  order:\n    strategy: segment\n    step: 200\n", drain, pg)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	nodes := make([]*rollNode, 3)
	for i := range nodes {
		nodes[i] = &rollNode{name: "node" + strconv.Itoa(i), bin: bin, cfg: cfg,
			data: filepath.Join(t.TempDir(), "data"), port: testserver.FreePort(t)}
		nodes[i].start(t)
	}
	lb := newBalancer(nodes)
	defer lb.close()
	testserver.Eventually(t, "the balancer to see every node ready", 30*time.Second, func() bool { return lb.readyCount() == len(nodes) })

	// The load: workers taking 5 IDs a request, without pause.
	const workers = 8
	var (
		stopLoad atomic.Bool
		wg       sync.WaitGroup
		mu       sync.Mutex
		ids      = map[string]string{} // ID -> the node that issued it
		dups     []string
		failures []string
		requests atomic.Int64
	)
	for w := 0; w < workers; w++ {
		wg.Go(func() {
			for !stopLoad.Load() {
				n, got, err := lb.ids()
				requests.Add(1)
				mu.Lock()
				if err != nil {
					failures = append(failures, err.Error())
				}
				for _, id := range got {
					if prev, ok := ids[id]; ok {
						dups = append(dups, id+" from "+prev+" and "+n)
					}
					ids[id] = n
				}
				mu.Unlock()
			}
		})
	}
	waitRequests := func(what string, n int64) {
		target := requests.Load() + n
		testserver.Eventually(t, what, 60*time.Second, func() bool { return requests.Load() >= target })
	}
	waitRequests("the first requests", 200)
	for _, n := range nodes {
		n.stop(t)
		if lb.drainingSeen(n) == 0 && drain != "0s" {
			t.Errorf("%s: the balancer never saw /readyz answer 503 draining during its drain", n.name)
		}
		for _, phase := range []string{"shutdown: draining", "shutdown: stopped accepting", "shutdown: in-flight requests finished", "shutdown: done"} {
			if !strings.Contains(n.log(), phase) && drain != "0s" {
				t.Errorf("%s: its log does not say %q:\n%s", n.name, phase, n.log())
			}
		}
		n.start(t)
		testserver.Eventually(t, "the balancer to see "+n.name+" ready again", 30*time.Second, func() bool { return lb.isReady(n) })
		waitRequests("requests after restarting "+n.name, 100)
	}
	stopLoad.Store(true)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d requests, %d IDs, %d failed, %d duplicates; drain_period %s", requests.Load(), len(ids), len(failures), len(dups), drain)
	if len(failures) > 0 {
		t.Errorf("%d of %d requests failed during the rolling restart; first: %s", len(failures), requests.Load(), strings.Join(failures[:min(5, len(failures))], "; "))
	}
	if len(dups) > 0 {
		t.Errorf("%d duplicate IDs; first: %s", len(dups), strings.Join(dups[:min(5, len(dups))], "; "))
	}
	per := map[string]int{}
	for _, n := range ids {
		per[n]++
	}
	for _, n := range nodes {
		if per[n.name] == 0 {
			t.Errorf("%s issued no IDs: the balancer did not spread the load (%v)", n.name, per)
		}
	}
}

// rollNode is one `idmint serve` process on a fixed port, restarted on it.
type rollNode struct {
	name, bin, cfg, data string
	port                 int
	cmd                  *exec.Cmd
	stderr               *lockedWriter
	done                 chan error
}

func (n *rollNode) url() string { return "http://127.0.0.1:" + strconv.Itoa(n.port) }

func (n *rollNode) log() string { return n.stderr.String() }

func (n *rollNode) start(t *testing.T) {
	t.Helper()
	n.cmd = exec.Command(n.bin, "serve", "--config", n.cfg, "--data", n.data, "--listen", "127.0.0.1:"+strconv.Itoa(n.port))
	n.cmd.Env = append(os.Environ(), "IDMINT_CONFIG=", "IDMINT_DRAIN_PERIOD=")
	n.stderr = &lockedWriter{w: &bytes.Buffer{}}
	n.cmd.Stderr = n.stderr
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	n.done = done
	cmd := n.cmd
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-done
		}
	})
}

// stop sends SIGTERM and waits for the process to exit cleanly.
func (n *rollNode) stop(t *testing.T) {
	t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-n.done:
		if err != nil {
			t.Fatalf("%s exited with %v after SIGTERM; log:\n%s", n.name, err, n.log())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not exit within 60 s of SIGTERM; log:\n%s", n.name, n.log())
	}
}

// balancer sends each request to the next node whose /readyz last
// answered 200, polling every node every 100 ms.
type balancer struct {
	nodes []*rollNode
	hc    *http.Client // the requests' pool: keep-alive connections to every node
	probe *http.Client
	done  chan struct{}
	wg    sync.WaitGroup
	next  atomic.Uint64

	mu       sync.Mutex
	ready    map[*rollNode]bool
	draining map[*rollNode]int // polls that answered 503 "draining"
}

func newBalancer(nodes []*rollNode) *balancer {
	b := &balancer{nodes: nodes, done: make(chan struct{}), ready: map[*rollNode]bool{}, draining: map[*rollNode]int{},
		hc:    &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}},
		probe: &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
	}
	for _, n := range nodes {
		b.wg.Go(func() { b.poll(n) })
	}
	return b
}

func (b *balancer) poll(n *rollNode) {
	tk := time.NewTicker(100 * time.Millisecond)
	defer tk.Stop()
	for {
		ok, draining := false, false
		if resp, err := b.probe.Get(n.url() + "/readyz"); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			ok = resp.StatusCode == 200
			draining = resp.StatusCode == 503 && strings.Contains(string(body), `"draining"`)
		}
		b.mu.Lock()
		b.ready[n] = ok
		if draining {
			b.draining[n]++
		}
		b.mu.Unlock()
		select {
		case <-b.done:
			return
		case <-tk.C:
		}
	}
}

func (b *balancer) close() {
	close(b.done)
	b.wg.Wait()
	b.hc.CloseIdleConnections()
}

func (b *balancer) isReady(n *rollNode) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ready[n]
}

func (b *balancer) readyCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := 0
	for _, ok := range b.ready {
		if ok {
			c++
		}
	}
	return c
}

func (b *balancer) drainingSeen(n *rollNode) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.draining[n]
}

// ids takes five IDs from the next ready node, once (a failure is not
// retried: a client behind a balancer sees it). It returns the node's name.
func (b *balancer) ids() (string, []string, error) {
	var n *rollNode
	for range len(b.nodes) {
		c := b.nodes[b.next.Add(1)%uint64(len(b.nodes))]
		if b.isReady(c) {
			n = c
			break
		}
	}
	if n == nil {
		return "", nil, errors.New("no node is ready")
	}
	resp, err := b.hc.Get(n.url() + "/v1/keys/order/ids?count=5")
	if err != nil {
		return n.name, nil, fmt.Errorf("%s: %w", n.name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return n.name, nil, fmt.Errorf("%s: read: %w", n.name, err)
	}
	if resp.StatusCode != 200 {
		return n.name, nil, fmt.Errorf("%s: %d %s", n.name, resp.StatusCode, body)
	}
	var v struct{ IDs []string }
	if err := json.Unmarshal(body, &v); err != nil || len(v.IDs) != 5 {
		return n.name, nil, fmt.Errorf("%s: answer %s: %v", n.name, body, err)
	}
	return n.name, v.IDs, nil
}
