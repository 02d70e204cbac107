package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idmint/idmint/server/strategies"
	"github.com/idmint/idmint/snowflake"
	"github.com/idmint/idmint/testkit/testserver"
)

// The cluster scenario: three `idmint serve` processes share one private
// coordinator (etcd, or ZooKeeper) and a snowflake key limited to worker IDs
// 0..2, so every worker ID is taken and a process that loses its lease can
// only get one back when another holder leaves. Clients hammer every
// process throughout while
//
//  1. one process is SIGSTOPped past its lease TTL and a fresh process
//     takes its worker ID; the stopped one is resumed while the fresh one
//     still holds it, must refuse to issue (design.md U4), and must issue
//     again on its own once the fresh one has left (U9);
//  2. one process is killed with kill -9 and restarted on its data;
//  3. the coordinator is killed with kill -9 and restarted: every process
//     stops issuing when it can no longer prove its lease and issues again
//     on its own once the coordinator is back (U9).
//
// Every ID returned is kept and checked: no duplicates (U1), each process
// strictly increasing in the order of responses on one client connection
// (U2), and for each worker ID, every ID in a response that arrived before
// another request was sent is below every ID of that request's response,
// whichever processes answered (U3: a new holder starts after the previous
// holder's horizon).

const (
	// clusterTTL is the lease TTL: short, so the scenario fits in a
	// minute, long enough that keepalives (every TTL/3) survive a loaded
	// 2-core machine.
	clusterTTL = 3 * time.Second
	// clusterLimit is the key's worker_limit: exactly the three processes.
	clusterLimit = 3
	// clusterWait bounds every wait for something a process or server does.
	clusterWait = 45 * time.Second
)

func TestClusterChaosEtcd(t *testing.T) {
	runClusterChaos(t, testserver.Etcd)
}

func TestClusterChaosZooKeeper(t *testing.T) {
	runClusterChaos(t, testserver.ZooKeeper)
}

// clusterProc is one `idmint serve` process of the scenario.
type clusterProc struct {
	name  string // n0, n1, n2, fresh, n1-restarted
	data  string
	coord string
	d     *daemon
}

// clusterBatch is one successful response.
type clusterBatch struct {
	proc       string
	conn       string // the client connection it came on
	sent, recv time.Time
	ids        []int64
	failure    string // why a refused or failed request got no IDs
}

// clusterLoad records every response of the scenario's clients.
type clusterLoad struct {
	start time.Time
	mu    sync.Mutex
	ok    []clusterBatch
	fails []clusterBatch // failed requests: proc, conn, sent, recv
	last  map[string]string
}

func (l *clusterLoad) add(b clusterBatch, failure string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if failure != "" {
		b.failure = failure
		l.fails = append(l.fails, b)
		l.last[b.proc] = failure
		return
	}
	l.ok = append(l.ok, b)
}

// count returns how many responses proc gave after since: successful ones,
// and refusals.
func (l *clusterLoad) count(proc string, since time.Time) (ok, failed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range l.ok {
		if b.proc == proc && b.sent.After(since) {
			ok++
		}
	}
	for _, b := range l.fails {
		if b.proc == proc && b.sent.After(since) {
			failed++
		}
	}
	return ok, failed
}

func (l *clusterLoad) at(t time.Time) string { return t.Sub(l.start).Round(time.Millisecond).String() }

// target is what a client slot sends to: a process's name and base URL.
type target struct{ name, base string }

// errMalformed marks a successful response whose body is not what the API
// promises: a bug, not a fault to ride out.
var errMalformed = errors.New("malformed answer")

// request sends one request to tg on hc: a /v1 batch of count IDs, or a
// Leaf single ID when count is 0, records the outcome and returns the IDs.
func (l *clusterLoad) request(hc *http.Client, tg target, conn string, count int) ([]int64, error) {
	url := tg.base + "/api/snowflake/get/snowflake"
	if count > 0 {
		url = fmt.Sprintf("%s/v1/keys/snowflake/ids?count=%d", tg.base, count)
	}
	b := clusterBatch{proc: tg.name, conn: conn, sent: time.Now()}
	resp, err := hc.Get(url)
	if err != nil {
		b.recv = time.Now()
		l.add(b, err.Error())
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	b.recv = time.Now()
	if err != nil || resp.StatusCode != http.StatusOK {
		l.add(b, fmt.Sprintf("%d %s %v", resp.StatusCode, body, err))
		return nil, fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	ids, err := parseIDBody(url, body, count)
	if err != nil {
		return nil, err
	}
	b.ids = ids
	l.add(b, "")
	return b.ids, nil
}

// clients runs perSlot client goroutines per slot until stop closes. Each
// goroutine sends one request at a time to its slot's current target on
// one connection of its own (a new one when the target changes), asking
// for a single ID or a batch of 1..20, and keeps going through failures.
// A malformed success ends the goroutine with an error on bad.
func (l *clusterLoad) clients(slots []*atomic.Pointer[target], perSlot int, stop <-chan struct{}, bad chan<- error) *sync.WaitGroup {
	var wg sync.WaitGroup
	for s, slot := range slots {
		for g := range perSlot {
			wg.Go(func() {
				var (
					cur *target
					hc  *http.Client
				)
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					tg := slot.Load()
					if tg == nil {
						time.Sleep(10 * time.Millisecond)
						continue
					}
					if tg != cur {
						if hc != nil {
							hc.CloseIdleConnections()
						}
						cur = tg
						hc = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}}
					}
					conn := fmt.Sprintf("slot%d/client%d/%s", s, g, tg.name)
					_, err := l.request(hc, *tg, conn, (i*7+g)%21)
					if errors.Is(err, errMalformed) {
						bad <- err
						return
					}
					if err != nil {
						time.Sleep(50 * time.Millisecond)
					} else {
						time.Sleep(3 * time.Millisecond)
					}
				}
			})
		}
	}
	return &wg
}

func runClusterChaos(t *testing.T, kind testserver.Kind) {
	if testing.Short() {
		t.Skip("runs a coordinator and four idmint processes")
	}
	began := time.Now()
	coord := testserver.Start(t, kind)
	bin := buildBinary(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "idmint.yaml")
	yaml := fmt.Sprintf("keys:\n  snowflake:\n    strategy: snowflake\n    options:\n      worker_limit: \"%d\"\n", clusterLimit)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	prefix := testserver.Prefix(t)
	// coordURL is node i's coordinator. ZooKeeper gives a worker ID to an
	// endpoint (Leaf's scheme), so the fresh process takes node 0's by
	// using node 0's endpoint; etcd gives the lowest free ID to anyone.
	coordURL := func(i int) string {
		if kind == testserver.ZooKeeper {
			return fmt.Sprintf("zk://%s/snowflake/%s?ttl=%v&endpoint=127.0.0.1:%d", coord.Addr(), prefix, clusterTTL, 7000+i)
		}
		return fmt.Sprintf("etcd://%s/idmint?name=%s&ttl=%v", coord.Addr(), prefix, clusterTTL)
	}
	leaf, ok := snowflake.Lookup(strategies.DefaultLayout)
	if !ok {
		t.Fatal("no leaf layout")
	}
	workerOf := func(id int64) int64 {
		p, err := snowflake.Decode(leaf, id)
		if err != nil {
			t.Fatalf("decode %d: %v", id, err)
		}
		return p.Node["worker"]
	}

	var procs []*clusterProc
	start := func(name, data, coordinator string) *clusterProc {
		t.Helper()
		p := &clusterProc{name: name, data: data, coord: coordinator}
		p.d = startDaemon(t, bin, "--config", cfg, "--data", data, "--coordinator", coordinator)
		procs = append(procs, p)
		return p
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, p := range procs {
			// The lease's story, without a line per refused request.
			var keep []string
			for _, line := range strings.Split(logOf(p.d.base), "\n") {
				if !strings.Contains(line, "issuer refused") {
					keep = append(keep, line)
				}
			}
			t.Logf("log of %s (%s), refusals left out:\n%s", p.name, p.d.base, strings.Join(keep[max(0, len(keep)-40):], "\n"))
		}
	})

	load := &clusterLoad{start: began, last: map[string]string{}}
	slots := make([]*atomic.Pointer[target], 4) // n0, n1, n2, fresh
	for i := range slots {
		slots[i] = &atomic.Pointer[target]{}
	}
	point := func(slot int, p *clusterProc) {
		if p == nil {
			slots[slot].Store(nil)
			return
		}
		slots[slot].Store(&target{p.name, p.d.base})
	}
	stop := make(chan struct{})
	bad := make(chan error, 16)
	var stopped bool
	stopClients := func(wg *sync.WaitGroup) {
		if !stopped {
			close(stop)
			stopped = true
		}
		wg.Wait()
	}
	// probe asks p for one batch on a connection of its own, records it,
	// and returns its IDs (nil when refused).
	probe := func(p *clusterProc) []int64 {
		hc := &http.Client{Timeout: 10 * time.Second}
		defer hc.CloseIdleConnections()
		ids, err := load.request(hc, target{p.name, p.d.base}, "probe/"+p.name, 5)
		if errors.Is(err, errMalformed) {
			t.Fatal(err)
		}
		return ids
	}
	// issues waits until p has answered n requests sent after since.
	issues := func(p *clusterProc, n int, since time.Time, why string) {
		t.Helper()
		deadline := time.Now().Add(clusterWait)
		for {
			got, _ := load.count(p.name, since)
			if got >= n {
				return
			}
			select {
			case err := <-bad:
				t.Fatal(err)
			default:
			}
			if time.Now().After(deadline) {
				load.mu.Lock()
				last := load.last[p.name]
				load.mu.Unlock()
				t.Fatalf("%s: %s answered %d of %d requests sent after %s within %v; last refusal: %s",
					why, p.name, got, n, load.at(since), clusterWait, last)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// fenced waits until p has refused n requests sent after since, and
	// fails at once if p answers one of them: from since on, p cannot
	// prove its lease (design.md U4).
	fenced := func(p *clusterProc, n int, since time.Time, why string) {
		t.Helper()
		testserver.Eventually(t, fmt.Sprintf("%s: %s to refuse %d requests sent after %s", why, p.name, n, load.at(since)), clusterWait, func() bool {
			ok, failed := load.count(p.name, since)
			if ok > 0 {
				load.mu.Lock()
				defer load.mu.Unlock()
				for _, b := range load.ok {
					if b.proc == p.name && b.sent.After(since) {
						t.Fatalf("%s: %s issued %v (sent %s on %s) though it cannot prove its lease since %s",
							why, p.name, b.ids, load.at(b.sent), b.conn, load.at(since))
					}
				}
			}
			return failed >= n
		})
	}

	// Three processes take worker IDs 0..2.
	var nodes [3]*clusterProc
	worker := map[string]int64{}
	for i := range nodes {
		nodes[i] = start(fmt.Sprintf("n%d", i), filepath.Join(dir, fmt.Sprintf("n%d", i)), coordURL(i))
		ids := probe(nodes[i])
		if len(ids) == 0 {
			t.Fatalf("%s issues nothing after start: %s", nodes[i].name, load.last[nodes[i].name])
		}
		worker[nodes[i].name] = workerOf(ids[0])
	}
	w := []int64{worker["n0"], worker["n1"], worker["n2"]}
	if slices.Sort(w); !slices.Equal(w, []int64{0, 1, 2}) {
		t.Fatalf("worker IDs of n0, n1, n2 = %d, %d, %d; want 0, 1, 2 in some order", worker["n0"], worker["n1"], worker["n2"])
	}
	for i, p := range nodes {
		point(i, p)
	}
	wg := load.clients(slots, 2, stop, bad)
	defer stopClients(wg)
	for _, p := range nodes {
		issues(p, 20, began, "warm-up")
	}

	// 1. SIGSTOP n0 past its TTL; a fresh process takes its worker ID.
	n0 := nodes[0]
	if err := n0.d.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	fresh := start("fresh", filepath.Join(dir, "fresh"), coordURL(0)) // waits for n0's lease to expire
	t.Logf("%s: n0 stopped; fresh process serving after %v", load.at(time.Now()), time.Since(paused).Round(time.Millisecond))
	ids := probe(fresh)
	if len(ids) == 0 || workerOf(ids[0]) != worker["n0"] {
		t.Fatalf("fresh process issues %v, want IDs of n0's worker ID %d; last refusal: %s", ids, worker["n0"], load.last["fresh"])
	}
	point(3, fresh)
	issues(fresh, 20, paused, "fresh process")

	// Resume n0 while the fresh process holds its worker ID: it must
	// refuse, whatever it held before the pause.
	if err := n0.d.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	fenced(n0, 10, resumed, "resumed past its TTL while the fresh process holds its worker ID")
	issues(fresh, 20, time.Now(), "fresh process after n0 resumed")
	point(3, nil)
	freshLeaving := time.Now()
	fresh.d.stop(t)
	t.Logf("%s: fresh process stopped", load.at(time.Now()))
	// n0 issues again on its own, with the worker ID the fresh one freed.
	issues(n0, 20, freshLeaving, "n0 recovering without a restart")

	// 2. kill -9 n1 and restart it on its data.
	n1 := nodes[1]
	point(1, nil)
	if err := n1.d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-n1.d.done
	killed := time.Now()
	n1b := start("n1-restarted", n1.data, n1.coord) // waits for the dead lease to expire
	t.Logf("%s: n1 killed; restarted after %v", load.at(time.Now()), time.Since(killed).Round(time.Millisecond))
	if ids := probe(n1b); len(ids) == 0 || workerOf(ids[0]) != worker["n1"] {
		t.Fatalf("restarted n1 issues %v, want IDs of worker ID %d (the only free one)", ids, worker["n1"])
	}
	point(1, n1b)
	issues(n1b, 20, killed, "restarted n1")

	// 3. kill -9 the coordinator: every process stops issuing once it can
	// no longer prove its lease; restart it: every process issues again.
	live := []*clusterProc{n0, n1b, nodes[2]}
	coord.Kill(t)
	down := time.Now()
	for _, p := range live {
		fenced(p, 3, down.Add(clusterTTL), "coordinator down for a TTL")
	}
	t.Logf("%s: coordinator killed; every process refuses after %v", load.at(time.Now()), time.Since(down).Round(time.Millisecond))
	coord.Restart(t)
	up := time.Now()
	for _, p := range live {
		issues(p, 20, up, "coordinator restarted")
	}
	t.Logf("%s: coordinator restarted; every process issues again after %v", load.at(time.Now()), time.Since(up).Round(time.Millisecond))

	stopClients(wg)
	select {
	case err := <-bad:
		t.Fatal(err)
	default:
	}
	for _, p := range live {
		p.d.stop(t)
	}

	// The checks, over every ID returned.
	load.mu.Lock()
	defer load.mu.Unlock()
	total, err := checkClusterIDs(load, workerOf)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range load.ok {
		switch {
		case b.proc == "fresh":
			for _, id := range b.ids {
				if workerOf(id) != worker["n0"] {
					t.Fatalf("fresh process issued %d with worker ID %d, want n0's %d", id, workerOf(id), worker["n0"])
				}
			}
		case b.proc == "n0" && b.sent.After(resumed) && b.recv.Before(freshLeaving):
			t.Fatalf("n0 issued %v (sent %s, answered %s) after its pause, while the fresh process held its worker ID",
				b.ids, load.at(b.sent), load.at(b.recv))
		case b.proc == "n0" && b.sent.After(freshLeaving) && b.recv.Before(down):
			for _, id := range b.ids {
				if workerOf(id) != worker["n0"] {
					t.Fatalf("n0 issued %d with worker ID %d after recovering; the only free one was %d", id, workerOf(id), worker["n0"])
				}
			}
		}
	}
	per := map[string]int{}
	for _, b := range load.ok {
		per[b.proc] += len(b.ids)
	}
	failed := map[string]int{}
	var slowest clusterBatch
	for _, b := range append(load.ok, load.fails...) {
		if b.recv.Sub(b.sent) > slowest.recv.Sub(slowest.sent) {
			slowest = b
		}
	}
	for _, b := range load.fails {
		failed[b.proc]++
	}
	outcome := fmt.Sprintf("%d IDs", len(slowest.ids))
	if slowest.failure != "" {
		outcome = slowest.failure
	}
	t.Logf("slowest request: %v, to %s sent at %s: %s", slowest.recv.Sub(slowest.sent).Round(time.Millisecond), slowest.proc, load.at(slowest.sent), outcome)
	t.Logf("%d IDs in %d responses, no duplicates, in order; IDs by process %v; refused requests by process %v; took %v",
		total, len(load.ok), per, failed, time.Since(began).Round(time.Millisecond))
}

// checkClusterIDs returns the number of IDs in load's responses, or an
// error naming the first duplicate ID, the first connection whose IDs do
// not strictly increase, or the first worker ID whose IDs go back in real
// time: for each worker ID, a response received before another request was
// sent must hold only IDs below that request's, whichever processes
// answered.
func checkClusterIDs(load *clusterLoad, workerOf func(int64) int64) (int, error) {
	var all []int64
	owner := map[int64][]string{}
	for _, b := range load.ok {
		all = append(all, b.ids...)
	}
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			for _, b := range load.ok {
				if slices.Contains(b.ids, all[i]) {
					owner[all[i]] = append(owner[all[i]], fmt.Sprintf("%s on %s sent %s", b.proc, b.conn, load.at(b.sent)))
				}
			}
			return 0, fmt.Errorf("duplicate ID %d (worker %d): issued by %v", all[i], workerOf(all[i]), owner[all[i]])
		}
	}

	// Per connection, in the order of responses (one request at a time).
	last := map[string]int64{}
	for _, b := range load.ok {
		prev, seen := last[b.conn]
		for _, id := range b.ids {
			if seen && id <= prev {
				return 0, fmt.Errorf("%s: on %s, ID %d (sent %s) is not above the previous %d", b.proc, b.conn, id, load.at(b.sent), prev)
			}
			prev, seen = id, true
		}
		last[b.conn] = prev
	}

	// Per worker ID, in real time across processes.
	type span struct {
		b      *clusterBatch
		lo, hi int64
	}
	byWorker := map[int64][]span{}
	for i := range load.ok {
		b := &load.ok[i]
		seen := map[int64]*span{}
		for _, id := range b.ids {
			w := workerOf(id)
			if s, ok := seen[w]; ok {
				s.lo, s.hi = min(s.lo, id), max(s.hi, id)
				continue
			}
			seen[w] = &span{b, id, id}
		}
		for w, s := range seen {
			byWorker[w] = append(byWorker[w], *s)
		}
	}
	for w, spans := range byWorker {
		bySent := slices.Clone(spans)
		slices.SortFunc(bySent, func(a, b span) int { return a.b.sent.Compare(b.b.sent) })
		byRecv := spans
		slices.SortFunc(byRecv, func(a, b span) int { return a.b.recv.Compare(b.b.recv) })
		var top *span
		j := 0
		for _, s := range bySent {
			for ; j < len(byRecv) && byRecv[j].b.recv.Before(s.b.sent); j++ {
				if top == nil || byRecv[j].hi > top.hi {
					top = &byRecv[j]
				}
			}
			if top != nil && s.lo <= top.hi {
				return 0, fmt.Errorf("worker %d goes back in time: %s answered %d (sent %s on %s) after %s had answered %d (by %s on %s)",
					w, s.b.proc, s.lo, load.at(s.b.sent), s.b.conn, top.b.proc, top.hi, load.at(top.b.recv), top.b.conn)
			}
		}
	}
	return len(all), nil
}

// TestCheckClusterIDs shows that the scenario's checks catch what they are
// for, on responses made up by hand: worker ID = id / 1000.
func TestCheckClusterIDs(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_800_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	b := func(proc, conn string, sent, recv int, ids ...int64) clusterBatch {
		return clusterBatch{proc: proc, conn: conn, sent: at(sent), recv: at(recv), ids: ids}
	}
	workerOf := func(id int64) int64 { return id / 1000 }
	for _, tc := range []struct {
		name    string
		batches []clusterBatch
		want    string // "" when the responses are fine
	}{
		{"fine", []clusterBatch{
			b("n0", "c0", 0, 10, 1, 2, 3), b("n0", "c0", 11, 20, 4),
			b("n1", "c1", 0, 30, 1001, 1002),
			// A fresh process on worker 0 after n0's answers, then n0
			// back on worker 0 after it: each above the one before.
			b("fresh", "c2", 21, 25, 5, 6), b("n0", "c0", 26, 27, 7),
			// Overlapping in time: no order owed between them.
			b("n1", "c3", 1, 40, 1000), b("n2", "c4", 0, 50, 2000),
		}, ""},
		{"duplicate", []clusterBatch{b("n0", "c0", 0, 1, 1, 2), b("n1", "c1", 0, 1, 1002, 2)}, "duplicate ID 2"},
		{"connection out of order", []clusterBatch{b("n0", "c0", 0, 1, 5), b("n0", "c0", 2, 3, 4)}, "ID 4 (sent 2ms) is not above the previous 5"},
		{"batch out of order", []clusterBatch{b("n0", "c0", 0, 1, 5, 4)}, "is not above the previous 5"},
		{"new holder below the old", []clusterBatch{
			b("n0", "c0", 0, 10, 7, 8),
			b("fresh", "c1", 20, 30, 6),
		}, "worker 0 goes back in time: fresh answered 6"},
		{"old holder below the new", []clusterBatch{
			b("fresh", "c1", 0, 10, 1009),
			b("n0", "c0", 20, 30, 1010), b("n0", "c2", 31, 32, 1008),
		}, "worker 1 goes back in time: n0 answered 1008"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			load := &clusterLoad{start: t0, ok: tc.batches}
			n, err := checkClusterIDs(load, workerOf)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if want := 11; n != want {
					t.Fatalf("counted %d IDs, want %d", n, want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// parseIDBody reads a successful answer of url: a bare ID (Leaf's route,
// count 0) or /v1's {"ids":[...]} holding count IDs. Anything else is
// errMalformed.
func parseIDBody(url string, body []byte, count int) (ids []int64, err error) {
	var text []string
	if count == 0 {
		text = []string{string(body)}
	} else {
		var v struct{ IDs []string }
		if err := json.Unmarshal(body, &v); err != nil || len(v.IDs) != count {
			return nil, fmt.Errorf("%w: GET %s: body %s: %v (want %d IDs)", errMalformed, url, body, err, count)
		}
		text = v.IDs
	}
	for _, s := range text {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: GET %s: ID %q is not an int64: %v", errMalformed, url, s, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
