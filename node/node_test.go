package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/internal/testserver"
	"github.com/idmint/idmint/snowflake"
	"github.com/idmint/idmint/worker"
)

// TestMain doubles as a generator process: with IDMINT_NODE_CHILD set to a
// coordinator URL it runs a Node with a single worker ID (0) and asks it
// for an ID every 5 ms, printing
//
//	id <id> <generation> <start unix ns>
//	err <start unix ns> <message>
//
// until its stdin closes; then it closes the node and exits.
func TestMain(m *testing.M) {
	if u := os.Getenv("IDMINT_NODE_CHILD"); u != "" {
		os.Exit(child(u))
	}
	os.Exit(m.Run())
}

func layout() snowflake.Layout {
	l, _ := snowflake.Lookup("twitter")
	return l
}

func child(u string) int {
	ctx := context.Background()
	n, err := New(ctx, Config{
		Layout: layout(), Coordinator: u, Node: map[string]int64{"datacenter": 1}, WorkerLimit: 1,
		Worker:      []worker.Option{worker.WithTTL(2 * time.Second)},
		Generator:   snowflake.Settings{HorizonLead: 500 * time.Millisecond},
		AcquireWait: 30 * time.Second, Retry: 100 * time.Millisecond,
	})
	if err != nil {
		fmt.Printf("fatal %v\n", err)
		return 1
	}
	stop := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(stop) }()
	w := bufio.NewWriter(os.Stdout)
	for {
		select {
		case <-stop:
			w.Flush()
			n.Close()
			return 0
		default:
		}
		start := time.Now().UnixNano()
		b := n.cur.Load()
		id, err := n.Next(ctx)
		if err != nil {
			fmt.Fprintf(w, "err %d %v\n", start, err)
		} else {
			fmt.Fprintf(w, "id %d %d %d\n", id, b.lease.Generation(), start)
		}
		w.Flush()
		time.Sleep(5 * time.Millisecond)
	}
}

// proc is a running generator child and what it printed.
type proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	mu    sync.Mutex
	lines []string
	done  chan struct{}
}

func startProc(t *testing.T, u string) *proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: exec.Command(exe, "-test.run=^$"), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), "IDMINT_NODE_CHILD="+u)
	p.cmd.Stderr = os.Stderr
	p.stdin, _ = p.cmd.StdinPipe()
	out, _ := p.cmd.StdoutPipe()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGCONT)
		p.cmd.Process.Kill()
		p.cmd.Wait()
	})
	return p
}

func (p *proc) snapshot() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// waitFor polls until cond holds over p's lines, or fails after d.
func (p *proc) waitFor(t *testing.T, what string, d time.Duration, cond func([]string) bool) {
	t.Helper()
	var ls []string
	defer func() {
		if t.Failed() {
			t.Logf("the child's last lines: %q", ls[max(0, len(ls)-5):])
		}
	}()
	testserver.Eventually(t, what, d, func() bool { ls = p.snapshot(); return cond(ls) })
}

func (p *proc) stop(t *testing.T) []string {
	t.Helper()
	p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatal("generator process did not exit")
	}
	p.cmd.Wait()
	return p.snapshot()
}

type line struct {
	id, gen, start int64
	err            string
}

func parse(t *testing.T, ls []string) []line {
	t.Helper()
	var out []line
	for _, s := range ls {
		f := strings.SplitN(s, " ", 4)
		switch {
		case f[0] == "id" && len(f) == 4:
			id, _ := strconv.ParseInt(f[1], 10, 64)
			gen, _ := strconv.ParseInt(f[2], 10, 64)
			st, _ := strconv.ParseInt(f[3], 10, 64)
			out = append(out, line{id: id, gen: gen, start: st})
		case f[0] == "err" && len(f) >= 3:
			st, _ := strconv.ParseInt(f[1], 10, 64)
			out = append(out, line{start: st, err: strings.Join(f[2:], " ")})
		default:
			t.Fatalf("unexpected child output %q", s)
		}
	}
	return out
}

func countIDs(ls []string) int {
	n := 0
	for _, s := range ls {
		if strings.HasPrefix(s, "id ") {
			n++
		}
	}
	return n
}

func etcdURL(t *testing.T) string {
	return "etcd://" + testserver.Addr(t, testserver.Etcd) + "/idmint?name=" + testserver.Prefix(t)
}

// TestPausedProcessIssuesNothing: a generator process is SIGSTOPped past
// its lease; another process takes the worker ID and issues; the first is
// SIGCONTed and keeps being asked. It must return errors, not IDs, until
// it re-acquires (here: after the second one exits), and the union of
// both processes' IDs has no duplicate.
func TestPausedProcessIssuesNothing(t *testing.T) {
	u := etcdURL(t)
	a := startProc(t, u)
	a.waitFor(t, "A to issue", 30*time.Second, func(ls []string) bool { return countIDs(ls) >= 20 })
	genA := parse(t, a.snapshot())[0].gen

	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	b := startProc(t, u) // waits for A's lease (TTL 2 s) to expire
	b.waitFor(t, "B to take the worker id and issue", 30*time.Second, func(ls []string) bool { return countIDs(ls) >= 20 })
	for _, l := range parse(t, b.snapshot()) {
		if l.err == "" && l.gen <= genA {
			t.Fatalf("B issued under generation %d, not above A's %d", l.gen, genA)
		}
	}

	cont := time.Now().UnixNano()
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// A keeps being asked while B holds the ID.
	a.waitFor(t, "A to answer after SIGCONT", 10*time.Second, func(ls []string) bool {
		n := 0
		for _, l := range parse(t, ls) {
			if l.start > cont {
				n++
			}
		}
		return n >= 100
	})
	linesB := b.stop(t) // B exits and releases; A re-acquires
	a.waitFor(t, "A to re-acquire and issue", 30*time.Second, func(ls []string) bool {
		for _, l := range parse(t, ls) {
			if l.err == "" && l.gen != genA {
				return true
			}
		}
		return false
	})
	linesA := a.stop(t)

	seen := map[int64]string{}
	afterCont, errsAfterCont := 0, 0
	for who, ls := range map[string][]string{"A": linesA, "B": linesB} {
		for _, l := range parse(t, ls) {
			if l.err != "" {
				if who == "A" && l.start > cont {
					errsAfterCont++
				}
				continue
			}
			if prev, dup := seen[l.id]; dup {
				t.Fatalf("duplicate ID %d from %s and %s", l.id, prev, who)
			}
			seen[l.id] = who
			if who == "A" && l.start > cont {
				afterCont++
				if l.gen == genA {
					t.Fatalf("paused process issued ID %d under its old lease (generation %d) after SIGCONT", l.id, genA)
				}
			}
		}
	}
	if errsAfterCont == 0 || afterCont == 0 {
		t.Fatalf("after SIGCONT A returned %d errors and %d IDs; want errors, then IDs after re-acquiring", errsAfterCont, afterCont)
	}
	t.Logf("%d unique IDs; A after SIGCONT: %d errors, then %d IDs under a new lease", len(seen), errsAfterCont, afterCont)
}

// skewed is a real clock whose wall time reads d behind.
type skewed struct {
	*clock.Real
	d time.Duration
}

func (s skewed) Now() time.Time { return s.Real.Now().Add(-s.d) }

// TestHandoverUnderSkew: A issues and stops; B takes the same worker ID
// with a clock 500 ms behind A's. B starts after A's horizon, so the
// union has no duplicate and every B ID is above every A ID.
func TestHandoverUnderSkew(t *testing.T) {
	urls := map[string]string{"sqlite": "sqlite://" + filepath.Join(t.TempDir(), "w.db")}
	if os.Getenv("IDMINT_TEST_ETCD") != "" || os.Getenv("CI") == "true" {
		urls["etcd"] = etcdURL(t)
	}
	if os.Getenv("IDMINT_TEST_ZOOKEEPER") != "" || os.Getenv("CI") == "true" {
		urls["zookeeper"] = "zk://" + testserver.Addr(t, testserver.ZooKeeper) + "/" + testserver.Prefix(t) + "/snowflake/skew?endpoint=10.2.0.1:8080"
	}
	for name, u := range urls {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			cfg := func(c clock.Clock) Config {
				return Config{Layout: layout(), Coordinator: u, Clock: c, Node: map[string]int64{"datacenter": 0},
					Worker:      []worker.Option{worker.WithTTL(3 * time.Second)},
					WorkerLimit: 1,
					// B's clock is behind A's horizon by HorizonLead plus the
					// skew: it waits that out.
					Generator: snowflake.Settings{HorizonLead: 500 * time.Millisecond, MaxRollbackWait: 5 * time.Second},
				}
			}
			seen := map[int64]bool{}
			var maxA int64
			a, err := New(ctx, cfg(clock.NewReal()))
			if err != nil {
				t.Fatal(err)
			}
			for range 5000 {
				id, err := a.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				seen[id], maxA = true, id
			}
			idA, _, _ := a.WorkerID()
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			b, err := New(ctx, cfg(skewed{clock.NewReal(), 500 * time.Millisecond}))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if idB, _, _ := b.WorkerID(); idB != idA {
				t.Fatalf("B got worker id %d, A had %d", idB, idA)
			}
			for range 5000 {
				id, err := b.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if seen[id] {
					t.Fatalf("B reissued A's ID %d", id)
				}
				if id <= maxA {
					t.Fatalf("B's ID %d is not above A's last %d: B did not start after A's horizon", id, maxA)
				}
				seen[id] = true
			}
		})
	}
}

// outage runs a node against a private coordinator, takes the coordinator
// down, and checks the node keeps issuing until its lease deadline, then
// fails clearly, then resumes when the coordinator is back.
func outage(t *testing.T, kind testserver.Kind, down, up func(*testserver.Server)) {
	srv := testserver.Start(t, kind)
	var u string
	if kind == testserver.Etcd {
		u = "etcd://" + srv.Addr() + "/idmint?name=outage"
	} else {
		u = "zk://" + srv.Addr() + "/snowflake/outage?endpoint=10.3.0.1:8080"
	}
	ctx := context.Background()
	n, err := New(ctx, Config{Layout: layout(), Coordinator: u, Node: map[string]int64{"datacenter": 0}, WorkerLimit: 1,
		Worker:    []worker.Option{worker.WithTTL(3 * time.Second), worker.WithTimeout(5 * time.Second)},
		Generator: snowflake.Settings{HorizonLead: 3 * time.Second},
		Retry:     200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()

	type result struct {
		at  time.Time
		id  int64
		err error
	}
	var (
		mu  sync.Mutex
		res []result
	)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			id, err := n.Next(ctx)
			mu.Lock()
			res = append(res, result{time.Now(), id, err})
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()
	waitUntil := func(what string, d time.Duration, cond func(r result) bool, since time.Time) time.Time {
		t.Helper()
		deadline := time.Now().Add(d)
		for time.Now().Before(deadline) {
			mu.Lock()
			for _, r := range res {
				if r.at.After(since) && cond(r) {
					mu.Unlock()
					return r.at
				}
			}
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("timed out waiting for %s", what)
		return time.Time{}
	}
	ok := func(r result) bool { return r.err == nil }
	waitUntil("first IDs", 10*time.Second, ok, time.Time{})
	downAt := time.Now()
	down(srv)
	downDone := time.Now()
	failAt := waitUntil("a clear failure while the coordinator is down", 20*time.Second, func(r result) bool { return r.err != nil }, downAt)
	time.Sleep(time.Second)
	upAt := time.Now()
	up(srv)
	waitUntil("IDs again after the coordinator returned", 30*time.Second, ok, upAt)
	close(stop)
	<-done

	seen := map[int64]bool{}
	issuedWhileDown := 0
	for _, r := range res {
		if r.err != nil {
			if r.at.After(downAt) && r.at.Before(upAt) && !errors.Is(r.err, snowflake.ErrFenced) &&
				!errors.Is(r.err, snowflake.ErrHorizon) && !errors.Is(r.err, ErrNoLease) {
				t.Fatalf("unclear error during the outage: %v", r.err)
			}
			continue
		}
		if seen[r.id] {
			t.Fatalf("duplicate ID %d", r.id)
		}
		seen[r.id] = true
		if r.at.After(downAt) && r.at.Before(failAt) {
			issuedWhileDown++
		}
		if r.at.After(failAt) && r.at.Before(upAt) {
			t.Fatalf("ID issued at %v after the first failure at %v and before the coordinator returned", r.at, failAt)
		}
	}
	if issuedWhileDown == 0 {
		t.Fatal("no ID issued after the coordinator went down: the node should run on until its lease deadline")
	}
	t.Logf("%d unique IDs; after the outage began the node issued %d more for %v (%v after the stop completed), then failed until the coordinator returned",
		len(seen), issuedWhileDown, failAt.Sub(downAt).Round(time.Millisecond), failAt.Sub(downDone).Round(time.Millisecond))
}

func TestEtcdOutage(t *testing.T) {
	outage(t, testserver.Etcd, func(s *testserver.Server) { s.Stop(t) }, func(s *testserver.Server) { s.Restart(t) })
}

func TestZooKeeperOutage(t *testing.T) {
	outage(t, testserver.ZooKeeper, func(s *testserver.Server) { s.Stop(t) }, func(s *testserver.Server) { s.Restart(t) })
}
