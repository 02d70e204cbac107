package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idmint/idmint/monotonic/lincheck"
	"github.com/idmint/idmint/testkit/idtest"
	"github.com/idmint/idmint/testkit/tcpproxy"
	"github.com/idmint/idmint/testkit/testserver"
)

// The monotonic cluster scenario (design.md U8): three real `idmint serve`
// processes serve one monotonic key through one private etcd, each node
// reaching etcd through a TCP proxy of its own. Clients on every node
// record, on one monotonic clock of this process, when each request was
// sent and when its answer arrived, and every ID. Faults, each followed by
// recovery:
//
//  1. kill -9 of the leader (the failover time is measured and logged),
//     then the killed node restarted on its data;
//  2. SIGSTOP of the leader past its TTL (and its way to etcd blackholed
//     meanwhile, so on waking only its own clock can stop it); requests
//     sent to it after the new leader answered wait in its socket;
//     SIGCONT: it must answer none of them with a value of its old term;
//  3. etcd killed with kill -9 and started again on its data: every node
//     refuses once no lease can be proven, and issues again on its own;
//  4. the leader cut from etcd (its proxy blackholed) while clients still
//     reach it: it refuses from a TTL after the cut, a new leader serves,
//     and it rejoins as a follower once healed;
//  5. every node killed with kill -9 at once and started again.
//
// At the end lincheck verifies the whole history: no ID twice, and every
// ID of a request answered before another was sent is below every ID of
// that other request, whichever nodes answered.

const (
	// monoTTL is the leadership lease: short, so the scenario fits in a
	// minute or two, long enough that keepalives (every TTL/3) survive a
	// loaded 2-core machine.
	monoTTL = 2 * time.Second
	// monoWait bounds every wait for something a process or etcd does.
	monoWait = 45 * time.Second
	monoKey  = "seq"
)

// monoOp is one request of the scenario.
type monoOp struct {
	node       string
	sent, recv time.Duration // since the scenario's start, on one monotonic clock
	ids        []int64
	failure    string // why it got no IDs
}

// monoHistory records every request of the scenario.
type monoHistory struct {
	start time.Time
	mu    sync.Mutex
	ok    []monoOp
	fails []monoOp
	last  map[string]string // last failure by node
}

func (h *monoHistory) now() time.Duration { return time.Since(h.start) }

func (h *monoHistory) add(op monoOp) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if op.failure != "" {
		h.fails = append(h.fails, op)
		h.last[op.node] = op.failure
		return
	}
	h.ok = append(h.ok, op)
}

// count returns how many requests to node sent after since were answered,
// and how many were refused.
func (h *monoHistory) count(node string, since time.Duration) (ok, failed int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, op := range h.ok {
		if op.node == node && op.sent > since {
			ok++
		}
	}
	for _, op := range h.fails {
		if op.node == node && op.sent > since {
			failed++
		}
	}
	return ok, failed
}

// answered returns the answers of node to requests sent after since.
func (h *monoHistory) answered(node string, since time.Duration) []monoOp {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []monoOp
	for _, op := range h.ok {
		if op.node == node && op.sent > since {
			out = append(out, op)
		}
	}
	return out
}

// request asks base for count IDs of the key (/v1 when count > 0, Leaf's
// single-ID route when 0), records the outcome and returns the IDs. A
// malformed success is returned as errMalformed.
func (h *monoHistory) request(hc *http.Client, node, base string, count int) ([]int64, error) {
	url := base + "/api/segment/get/" + monoKey
	if count > 0 {
		url = fmt.Sprintf("%s/v1/keys/%s/ids?count=%d", base, monoKey, count)
	}
	op := monoOp{node: node, sent: h.now()}
	resp, err := hc.Get(url)
	if err != nil {
		op.recv, op.failure = h.now(), err.Error()
		h.add(op)
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	op.recv = h.now()
	if err != nil || resp.StatusCode != http.StatusOK {
		op.failure = fmt.Sprintf("%d %s %v", resp.StatusCode, strings.TrimSpace(string(body)), err)
		h.add(op)
		return nil, errors.New(op.failure)
	}
	ids, err := parseIDBody(url, body, count)
	if err != nil {
		return nil, err
	}
	op.ids = ids
	h.add(op)
	return op.ids, nil
}

// monoNode is one `idmint serve` process of the scenario (restarts keep
// the name and data directory).
type monoNode struct {
	name  string
	cfg   string
	data  string
	proxy *tcpproxy.Proxy // its way to etcd
	d     *daemon
	base  atomic.Pointer[string] // nil while down
}

func TestMonotonicClusterLinearizable(t *testing.T) {
	etcd := testserver.Start(t, testserver.Etcd)
	bin := buildBinary(t)
	dir := t.TempDir()
	h := &monoHistory{start: time.Now(), last: map[string]string{}}

	nodes := make([]*monoNode, 3)
	for i := range nodes {
		p, err := tcpproxy.Listen(etcd.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		n := &monoNode{name: fmt.Sprintf("n%d", i), data: filepath.Join(dir, fmt.Sprintf("n%d", i)), proxy: p,
			cfg: filepath.Join(dir, fmt.Sprintf("n%d.yaml", i))}
		yaml := fmt.Sprintf("keys:\n  %s:\n    strategy: monotonic\n    options:\n      etcd: %q\n      ttl: \"%d\"\n",
			monoKey, p.Addr(), int(monoTTL/time.Second))
		if err := os.WriteFile(n.cfg, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		nodes[i] = n
	}
	start := func(n *monoNode) {
		t.Helper()
		n.d = startDaemon(t, bin, "--config", n.cfg, "--data", n.data)
		base := n.d.base
		n.base.Store(&base)
	}
	kill := func(n *monoNode) {
		t.Helper()
		n.base.Store(nil)
		if err := n.d.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-n.d.done:
		case <-time.After(monoWait):
			t.Fatalf("%s did not exit within %v of kill -9", n.name, monoWait)
		}
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, n := range nodes {
			if n.d == nil {
				continue
			}
			lines := strings.Split(logOf(n.d.base), "\n")
			var keep []string
			for _, l := range lines {
				if !strings.Contains(l, "issuer refused") {
					keep = append(keep, l)
				}
			}
			t.Logf("log of %s (%s), refusals left out:\n%s", n.name, n.d.base, strings.Join(keep[max(0, len(keep)-40):], "\n"))
		}
	})
	for _, n := range nodes {
		start(n)
	}

	// Clients: two per node, one request at a time each, a batch of 1..5
	// or a Leaf single ID, each on a connection of its own.
	stop := make(chan struct{})
	bad := make(chan error, 8)
	var wg sync.WaitGroup
	for _, n := range nodes {
		for c := range 2 {
			wg.Go(func() {
				hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}}
				defer hc.CloseIdleConnections()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					base := n.base.Load()
					if base == nil {
						time.Sleep(20 * time.Millisecond)
						continue
					}
					_, err := h.request(hc, n.name, *base, (i+c)%6)
					if errors.Is(err, errMalformed) {
						bad <- err
						return
					}
					if err != nil {
						time.Sleep(20 * time.Millisecond)
					} else {
						time.Sleep(2 * time.Millisecond)
					}
				}
			})
		}
	}
	stopped := false
	stopClients := func() {
		if !stopped {
			close(stop)
			stopped = true
		}
		wg.Wait()
	}
	defer stopClients()

	// issues waits until n has answered k requests sent after since.
	issues := func(n *monoNode, k int, since time.Duration, why string) {
		t.Helper()
		deadline := time.Now().Add(monoWait)
		for {
			if got, _ := h.count(n.name, since); got >= k {
				return
			}
			select {
			case err := <-bad:
				t.Fatal(err)
			default:
			}
			if time.Now().After(deadline) {
				got, _ := h.count(n.name, since)
				h.mu.Lock()
				last := h.last[n.name]
				h.mu.Unlock()
				t.Fatalf("%s: %s answered %d of %d requests sent after %v within %v; last refusal: %s", why, n.name, got, k, since, monoWait, last)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// fenced waits until n has refused k requests sent after since, and
	// fails if it answered one: from since on it cannot prove a lease.
	fenced := func(n *monoNode, k int, since time.Duration, why string) {
		t.Helper()
		testserver.Eventually(t, fmt.Sprintf("%s: %s to refuse %d requests sent after %v", why, n.name, k, since), monoWait, func() bool {
			if ops := h.answered(n.name, since); len(ops) > 0 {
				t.Fatalf("%s: %s answered %v (sent %v, received %v) though no lease could be proven after %v",
					why, n.name, ops[0].ids, ops[0].sent, ops[0].recv, since)
			}
			_, failed := h.count(n.name, since)
			return failed >= k
		})
	}
	// leader waits until exactly one live node says it is the proven
	// leader (idmint_monotonic_leader), other than not, and returns it.
	leader := func(why string, not *monoNode) *monoNode {
		t.Helper()
		var l *monoNode
		testserver.Eventually(t, why+": one proven leader", monoWait, func() bool {
			l = nil
			for _, n := range nodes {
				base := n.base.Load()
				if base == nil || n == not {
					continue
				}
				if idtest.MonotonicLeader(*base, monoKey) {
					if l != nil {
						return false
					}
					l = n
				}
			}
			return l != nil
		})
		return l
	}
	everyone := func(k int, since time.Duration, why string) {
		t.Helper()
		for _, n := range nodes {
			issues(n, k, since, why)
		}
	}
	everyone(20, 0, "warm-up")

	// The five faults, once in CI; IDMINT_MONOTONIC_ROUNDS=N repeats them
	// for a longer run (give go test a -timeout to match).
	rounds := monoRounds(t)
	for round := range rounds {
		t.Logf("%v: round %d of %d", h.now(), round+1, rounds)
		// 1. kill -9 the leader; the others serve again after about a TTL.
		l := leader("before kill -9", nil)
		kill(l)
		killed := h.now()
		t.Logf("%v: leader %s killed", killed, l.name)
		for _, n := range nodes {
			if n != l {
				issues(n, 20, killed, "after kill -9 of the leader")
			}
		}
		failover := monoFirstAnswer(h, killed) - killed
		t.Logf("failover after kill -9 of the leader (ttl %v): first answer to a request sent after the kill arrived %v after it",
			monoTTL, failover.Round(time.Millisecond))
		start(l)
		issues(l, 20, h.now(), "killed leader restarted")

		// 2. SIGSTOP the leader past its TTL.
		l = leader("before SIGSTOP", nil)
		if err := l.d.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		monoWaitState(t, l.d.cmd.Process.Pid, 'T')
		paused := h.now()
		// Its way to etcd is blackholed too while it sleeps, so when it wakes
		// it cannot learn at once that its lease is gone: only its own clock
		// (the fence) keeps it from answering from its old term.
		l.proxy.Blackhole()
		t.Logf("%v: leader %s stopped", paused, l.name)
		next := leader("while the old leader is stopped", l)
		issues(next, 20, paused, "new leader while the old one is stopped")
		// Requests to the stopped node, sent after the new leader answered:
		// they wait in its socket, and when it wakes must not get a value of
		// its old term (lincheck checks them with the rest).
		lateSent := h.now()
		before := monoMaxBefore(h, lateSent)
		base := *l.base.Load()
		var late sync.WaitGroup
		for i := range 8 {
			late.Go(func() {
				hc := &http.Client{Timeout: monoWait}
				defer hc.CloseIdleConnections()
				if _, err := h.request(hc, l.name+"/late", base, i%3); errors.Is(err, errMalformed) {
					bad <- err
				}
			})
		}
		monoWaitQueued(t, base, 8) // they reached its socket, unread
		if err := l.d.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		resumed := h.now()
		t.Logf("%v: %s resumed after %v", resumed, l.name, resumed-paused)
		monoWaitGroup(t, &late, "the requests sent to the stopped leader to be answered")
		l.proxy.Heal()
		for _, op := range h.answered(l.name+"/late", lateSent) {
			for _, id := range op.ids {
				if id <= before {
					t.Fatalf("the stopped leader, woken, answered %v to a request sent at %v, not above %d answered before it was sent", op.ids, op.sent, before)
				}
			}
		}
		lateOK, lateRefused := h.count(l.name+"/late", lateSent)
		t.Logf("requests sent to the stopped leader after its successor answered: %d answered above every earlier ID (forwarded), %d refused",
			lateOK, lateRefused)
		issues(l, 20, resumed, "stopped leader resumed")

		// 3. kill -9 etcd and start it again.
		etcd.Kill(t)
		down := h.now()
		t.Logf("%v: etcd killed", down)
		for _, n := range nodes {
			fenced(n, 3, down+monoTTL, "etcd down for a TTL")
		}
		etcd.Restart(t)
		up := h.now()
		everyone(20, up, "etcd restarted")
		t.Logf("%v: etcd restarted; every node answered again %v later", up, (h.now() - up).Round(time.Millisecond))

		// 4. Cut the leader from etcd while clients still reach it.
		l = leader("before the cut", nil)
		l.proxy.Blackhole()
		cut := h.now()
		t.Logf("%v: leader %s cut from etcd", cut, l.name)
		fenced(l, 3, cut+monoTTL, "leader cut from etcd")
		next = leader("while the old leader is cut from etcd", l)
		issues(next, 20, cut+monoTTL, "new leader while the old one is cut")
		l.proxy.Heal()
		healed := h.now()
		issues(l, 20, healed, "cut leader healed")
		t.Logf("%v: cut healed; %s answers again after %v", healed, l.name, (h.now() - healed).Round(time.Millisecond))

		// 5. Restart every node at once.
		for _, n := range nodes {
			n.base.Store(nil)
			if err := n.d.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
		}
		for _, n := range nodes {
			select {
			case <-n.d.done:
			case <-time.After(monoWait):
				t.Fatalf("%s did not exit within %v of kill -9", n.name, monoWait)
			}
		}
		all := h.now()
		for _, n := range nodes {
			start(n)
		}
		everyone(20, all, "every node restarted")
		t.Logf("%v: every node killed and restarted; first answer %v after the kill", all, (monoFirstAnswer(h, all) - all).Round(time.Millisecond))
	}

	stopClients()
	select {
	case err := <-bad:
		t.Fatal(err)
	default:
	}
	for _, n := range nodes {
		n.d.stop(t)
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	ops := make([]lincheck.Op, len(h.ok))
	ids := 0
	for i, op := range h.ok {
		ops[i] = lincheck.Op{Sent: op.sent, Received: op.recv, IDs: op.ids, Label: op.node}
		ids += len(op.ids)
	}
	if vs := lincheck.Check(ops, 10); len(vs) > 0 {
		for _, v := range vs {
			t.Errorf("%s: %s", v.Kind, v.Msg)
		}
		t.FailNow()
	}
	t.Logf("linearizable: %d IDs in %d answers, %d refused requests, no duplicates, no ID below one answered before its request was sent; took %v",
		ids, len(h.ok), len(h.fails), h.now().Round(time.Millisecond))
}

// monoFirstAnswer returns when the first answer to a request sent after
// since arrived (since + an hour when none did).
func monoFirstAnswer(h *monoHistory, since time.Duration) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	first := since + time.Hour
	for _, op := range h.ok {
		if op.sent > since && op.recv < first {
			first = op.recv
		}
	}
	return first
}

// monoMaxBefore returns the highest ID answered before at.
func monoMaxBefore(h *monoHistory, at time.Duration) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var top int64
	for _, op := range h.ok {
		if op.recv < at {
			for _, id := range op.ids {
				top = max(top, id)
			}
		}
	}
	return top
}

// monoWaitState waits until every thread of pid is in state (T: stopped):
// kill(2) returns before a SIGSTOP takes effect.
func monoWaitState(t *testing.T, pid int, state byte) {
	t.Helper()
	testserver.Eventually(t, fmt.Sprintf("every thread of %d in state %c", pid, state), monoWait, func() bool {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		if err != nil || len(tasks) == 0 {
			return false
		}
		for _, f := range tasks {
			b, err := os.ReadFile(f)
			if err != nil {
				return false
			}
			// pid (comm) state ...: comm may hold spaces; the state follows the last ')'.
			i := strings.LastIndexByte(string(b), ')')
			if i < 0 || i+2 >= len(b) || b[i+2] != state {
				return false
			}
		}
		return true
	})
}

// monoWaitQueued waits until n requests wait unread at the server of
// base, whose process is stopped: connections in its listening socket's
// accept queue, plus accepted connections with bytes unread
// (/proc/net/tcp and tcp6: st 0A is LISTEN, whose rx_queue is the accept
// queue; 01 is ESTABLISHED). It fails the test after monoWait.
func monoWaitQueued(t *testing.T, base string, n int) {
	t.Helper()
	_, portText, _ := strings.Cut(strings.TrimPrefix(base, "http://"), ":")
	port, err := strconv.Atoi(strings.TrimSuffix(portText, "/"))
	if err != nil {
		t.Fatalf("no port in %q", base)
	}
	want := fmt.Sprintf(":%04X", port)
	testserver.Eventually(t, fmt.Sprintf("%d requests waiting in the socket of %s", n, base), monoWait, func() bool {
		queued := 0
		for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
			b, _ := os.ReadFile(f)
			for _, line := range strings.Split(string(b), "\n")[1:] {
				// sl local rem st tx_queue:rx_queue ...
				fs := strings.Fields(line)
				if len(fs) < 5 || !strings.HasSuffix(fs[1], want) {
					continue
				}
				_, rxText, _ := strings.Cut(fs[4], ":")
				rx, err := strconv.ParseInt(rxText, 16, 64)
				switch {
				case err != nil:
				case fs[3] == "0A":
					queued += int(rx)
				case fs[3] == "01" && rx > 0:
					queued++
				}
			}
		}
		return queued >= n
	})
}

// monoWaitGroup waits for wg, failing the test after monoWait.
func monoWaitGroup(t *testing.T, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(monoWait):
		t.Fatalf("timed out after %v waiting for %s", monoWait, what)
	}
}

// monoRounds is how many times the scenario runs its faults:
// IDMINT_MONOTONIC_ROUNDS, 1 when unset.
func monoRounds(t *testing.T) int {
	v := os.Getenv("IDMINT_MONOTONIC_ROUNDS")
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("IDMINT_MONOTONIC_ROUNDS=%q is not a whole number of rounds", v)
	}
	return n
}
