package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idmint/idmint/testkit/tcpproxy"
	"github.com/idmint/idmint/testkit/testserver"
)

// The failover scenario: what an operator running Patroni or MHA sees.
// Three `idmint serve` processes share one database through an address
// that stands for its virtual IP (a tcpproxy), and etcd as their
// coordinator (so also as their cluster witness). The database has an
// asynchronous streaming replica. Under load:
//
//  1. replication is cut: the primary keeps acknowledging segments or
//     tickets the replica never sees;
//  2. one node is killed with kill -9;
//  3. the primary is killed with kill -9, the replica promoted, and the
//     virtual IP moved to it: the store has forgotten its last writes;
//  4. the killed node is started again on its data directory, remembering
//     nothing but its witness marks.
//
// Every ID answered is kept: none may be issued twice. On the code before
// the witness this found hundreds of thousands of duplicates per run.
// IDMINT_FAILOVER_BIN runs the scenario against another idmint binary (an
// older build, to watch it fail).

func TestFailoverSegmentPostgres(t *testing.T) {
	runFailover(t, testserver.Postgres, "segment")
}

func TestFailoverSegmentMariaDB(t *testing.T) {
	runFailover(t, testserver.MariaDB, "segment")
}

func TestFailoverTicketMariaDB(t *testing.T) {
	runFailover(t, testserver.MariaDB, "ticket")
}

func TestFailoverTicketPostgres(t *testing.T) {
	runFailover(t, testserver.Postgres, "ticket")
}

// TestFailoverLeafStyle: nodes that share only the database, as Leaf's
// do (no coordinator: each node's worker ID is its own file), keep their
// marks in a witness database of their own (witness: on another server).
func TestFailoverLeafStyle(t *testing.T) {
	runFailover(t, testserver.MariaDB, "segment", "postgres")
}

// failoverWait bounds every wait of the scenario.
const failoverWait = 60 * time.Second

// idRun is a run of IDs one answer held: [first, last], every step-th.
type idRun struct {
	first, last, step int64
	node              string
	at                time.Duration
}

// failoverLoad records every answer.
type failoverLoad struct {
	start time.Time
	mu    sync.Mutex
	runs  []idRun
	ok    map[string]int           // answers per node
	fails map[string]int           // refusals per node
	last  map[string]time.Duration // last answer per node
	lastE map[string]string        // last refusal per node
}

func (l *failoverLoad) record(r idRun, err string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != "" {
		l.fails[r.node]++
		l.lastE[r.node] = err
		return
	}
	l.runs = append(l.runs, r)
	l.ok[r.node]++
	l.last[r.node] = r.at
}

func (l *failoverLoad) answers(node string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ok[node]
}

func (l *failoverLoad) ids() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for _, r := range l.runs {
		n += (r.last-r.first)/r.step + 1
	}
	return n
}

// duplicates counts the IDs held by more than one answer.
func (l *failoverLoad) duplicates() (int64, string) {
	l.mu.Lock()
	runs := append([]idRun(nil), l.runs...)
	l.mu.Unlock()
	sort.Slice(runs, func(i, j int) bool { return runs[i].first < runs[j].first })
	var dup int64
	example := ""
	// Runs are contiguous (segment ranges) or single IDs (tickets, step 1
	// per answer here): an overlap of two sorted runs is a duplicate.
	hi, hiAt := int64(-1), -1
	for i, r := range runs {
		if r.first <= hi {
			end := min(hi, r.last)
			dup += end - r.first + 1
			if example == "" {
				p := runs[hiAt]
				example = fmt.Sprintf("[%d, %d] from %s at %v and [%d, %d] from %s at %v", p.first, p.last, p.node, p.at.Round(time.Millisecond),
					r.first, r.last, r.node, r.at.Round(time.Millisecond))
			}
		}
		if r.last > hi {
			hi, hiAt = r.last, i
		}
	}
	return dup, example
}

// runFailover runs the scenario. With witnessDB "postgres" the nodes have
// no coordinator and keep their marks in a database of the shared
// PostgreSQL server (witness:); otherwise etcd is both.
func runFailover(t *testing.T, kind testserver.Kind, strategy string, witnessDB ...string) {
	if testing.Short() {
		t.Skip("runs a database, its replica and four idmint processes")
	}
	// Each scenario has its own database, replica and etcd prefix; they
	// mostly wait (kills, promotion), so they share the package's time.
	t.Parallel()
	etcd := testserver.Addr(t, testserver.Etcd)
	primary := testserver.Start(t, kind)
	replica := testserver.StartReplica(t, primary)
	vip, err := tcpproxy.Listen(primary.HostPort())
	if err != nil {
		t.Fatal(err)
	}
	defer vip.Close()
	bin := os.Getenv("IDMINT_FAILOVER_BIN")
	if bin == "" {
		bin = buildBinary(t)
	}

	storeURL := testserver.WithAddr(kind, primary.Addr(), vip.Addr())
	if kind == testserver.MariaDB {
		storeURL = "mysql://root@" + vip.Addr() + "/idmint"
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "idmint.yaml")
	key := "order"
	yaml := fmt.Sprintf("max_count: 1000000\nstores:\n  db: %q\nkeys:\n", storeURL)
	coord := fmt.Sprintf("etcd://%s/idmint?name=%s", etcd, testserver.Prefix(t))
	if len(witnessDB) > 0 {
		yaml = fmt.Sprintf("witness: %q\n", testserver.Database(t, testserver.Postgres)) + yaml
		coord = ""
	}
	if strategy == "segment" {
		yaml += "  order: {strategy: segment, store: db, step: 100}\n"
	} else {
		yaml += "  order: {strategy: ticket, options: {servers: db}}\n"
	}
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	nodes := map[string]*daemon{}
	var nodesMu sync.Mutex
	bases := map[string]*atomic.Pointer[string]{}
	start := func(name string) {
		args := []string{"--config", cfg, "--data", filepath.Join(dir, name)}
		if coord != "" {
			args = append(args, "--coordinator", coord)
		}
		d := startDaemon(t, bin, args...)
		nodesMu.Lock()
		nodes[name] = d
		nodesMu.Unlock()
		bases[name].Store(&d.base)
	}
	names := []string{"n0", "n1", "n2"}
	for _, n := range names {
		bases[n] = &atomic.Pointer[string]{}
		start(n)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		nodesMu.Lock()
		defer nodesMu.Unlock()
		for name, d := range nodes {
			log := strings.Split(logOf(d.base), "\n")
			t.Logf("log of %s:\n%s", name, strings.Join(log[max(0, len(log)-30):], "\n"))
		}
	})

	load := &failoverLoad{start: time.Now(), ok: map[string]int{}, fails: map[string]int{}, last: map[string]time.Duration{}, lastE: map[string]string{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, n := range names {
		for c := range 2 {
			wg.Go(func() {
				hc := &http.Client{Timeout: 10 * time.Second}
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					base := bases[n].Load()
					if base == nil {
						time.Sleep(20 * time.Millisecond)
						continue
					}
					u := fmt.Sprintf("%s/v1/keys/%s/range?count=1000000", *base, key) // the rest of a segment: one load per answer
					if strategy == "ticket" {
						u = fmt.Sprintf("%s/v1/keys/%s/ids?count=%d", *base, key, 1+(i+c)%20)
					}
					runs, err := fetchRuns(hc, u)
					at := time.Since(load.start)
					if err != nil {
						load.record(idRun{node: n, at: at}, err.Error())
						time.Sleep(50 * time.Millisecond)
						continue
					}
					for _, r := range runs {
						r.node, r.at = n, at
						load.record(r, "")
					}
				}
			})
		}
	}
	stopped := false
	stopLoad := func() {
		if !stopped {
			close(stop)
			stopped = true
			wg.Wait()
		}
	}
	defer stopLoad()
	// waitAnswers waits until every node in ns answered n more times.
	waitAnswers := func(why string, n int, ns ...string) {
		t.Helper()
		from := map[string]int{}
		for _, name := range ns {
			from[name] = load.answers(name)
		}
		deadline := time.Now().Add(failoverWait)
		for _, name := range ns {
			for load.answers(name) < from[name]+n {
				if time.Now().After(deadline) {
					load.mu.Lock()
					e := load.lastE[name]
					load.mu.Unlock()
					t.Fatalf("%s: %s answered %d of %d requests within %v; last refusal: %s", why, name, load.answers(name)-from[name], n, failoverWait, e)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}

	waitAnswers("before the cut", 20, names...)
	replica.WaitCaughtUp(t, failoverWait)
	replica.Proxy.Cut() // 1. the replica falls behind
	waitAnswers("after the cut", 40, names...)
	bases["n2"].Store(nil) // 2. n2 dies
	nodes["n2"].cmd.Process.Kill()
	<-nodes["n2"].done
	waitAnswers("after n2 died", 20, "n0", "n1")
	primary.Kill(t) // 3. the primary dies; the lagging replica takes over
	replica.Promote(t)
	switched := time.Since(load.start)
	vip.Retarget(replica.HostPort())
	start("n2") // 4. n2 comes back on its data directory
	waitAnswers("after the failover", 40, names...)
	stopLoad()

	// Time each node took to answer again after the switch.
	load.mu.Lock()
	for _, n := range names {
		first := time.Duration(-1)
		for _, r := range load.runs {
			if r.node == n && r.at > switched && (first < 0 || r.at < first) {
				first = r.at
			}
		}
		t.Logf("%s: first answer %v after the switch; %d answers, %d refusals in all", n, (first - switched).Round(time.Millisecond), load.ok[n], load.fails[n])
	}
	load.mu.Unlock()
	dup, example := load.duplicates()
	t.Logf("%s on %s: %d IDs in %d answers, %d duplicates", strategy, kind, load.ids(), len(load.runs), dup)
	if dup > 0 {
		t.Fatalf("%d IDs issued twice across the failover, e.g. %s", dup, example)
	}
	// The repair is visible: some node logged the store going back (a
	// ticket node may see the server's new identity first, and log that,
	// with both values, instead).
	saw := false
	nodesMu.Lock()
	for _, d := range nodes {
		l := logOf(d.base)
		saw = saw || strings.Contains(l, "went back below the witness") || strings.Contains(l, "the server behind the URL changed")
	}
	nodesMu.Unlock()
	if !saw {
		t.Errorf("no node logged that the store went back below the witness or changed")
	}
}

// fetchRuns asks u for IDs and returns them as runs: one run for a range
// answer, one per ID for an ids answer.
func fetchRuns(hc *http.Client, u string) ([]idRun, error) {
	resp, err := hc.Get(u)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%d %s %v", resp.StatusCode, body, err)
	}
	var v struct {
		First, Last string
		IDs         []string
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", errMalformed, body, err)
	}
	num := func(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }
	if v.First != "" {
		return []idRun{{first: num(v.First), last: num(v.Last), step: 1}}, nil
	}
	out := make([]idRun, len(v.IDs))
	for i, s := range v.IDs {
		out[i] = idRun{first: num(s), last: num(s), step: 1}
	}
	return out, nil
}
