package regions

import (
	"database/sql"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idmint/idmint/region"
	"github.com/idmint/idmint/testkit/idtest"
	"github.com/idmint/idmint/testkit/servenode"
	"github.com/idmint/idmint/testkit/testserver"
)

// longRun is the long run's length (scripts/regions-soak.sh): the fault
// cycle repeats, each fault held longer, until it has passed.
var longRun = flag.Duration("regions.long", 0, "repeat the fault cycle (link cut, database failover, etcd loss) until this much time has passed, then move a node; 0: once, as the suite runs it")

// pace is each loader's pause between two answers: the short run draws
// as fast as two loaded cores allow; the long run draws slower, so that
// keeping every ID of half an hour fits in memory.
var pace = flag.Duration("regions.pace", 2*time.Millisecond, "each loader's pause between two answers")

// wait bounds every wait of the scenario for the nodes.
const wait = 90 * time.Second

// TestRegions is the proof on one machine: two regions, east (index 0)
// and west (index 1), each with its own etcd (coordinator and witness),
// its own PostgreSQL (west's with a streaming replica) and three real
// `idmint serve` nodes; a registry (an etcd outside both, reached by
// each region through its own link) where each region claims its index.
// One loader per key and node draws IDs all along, while:
//
//	(a) the link between the regions is cut (the registry is out of
//	    reach of both; the link drops every packet, or in the long run's
//	    even cycles refuses connections) and one node of each region
//	    restarts meanwhile: both regions keep serving, without one
//	    refusal;
//	(b) west's PostgreSQL fails over to its replica, which replication
//	    had left behind: east does not notice; west serves again;
//	(c) east's etcd is lost (its one member killed) and restored: west
//	    does not notice; east serves again without a restart;
//	(d) an operator moves a node from east to west: with only its
//	    region: section changed it refuses, naming both regions; pointed
//	    at west's etcd and database too, it serves west's numbers.
//
// Then a third region configured with west's index is refused, naming
// west. Every ID answered is checked: none twice across both regions, one
// node's answers increasing, counter keys inside their region's share,
// and the region-scoped monotonic key in real-time order within each
// region.
func TestRegions(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two etcds, three PostgreSQLs and seven idmint processes")
	}
	began := time.Now()
	loadBefore := loadAvg()
	registry := testserver.Addr(t, testserver.Etcd) // outside both regions
	prefix := testserver.Prefix(t)
	dir := t.TempDir()
	bin := servenode.Build(t, dir)
	east := startSite(t, "east", 0, registry, false)
	west := startSite(t, "west", 1, registry, true)
	sites := []*site{east, west}
	spec := map[string]region.Region{}
	for _, s := range sites {
		spec[s.name] = region.Region{Name: s.name, Index: s.index, Count: regionCount}
		s.nodes = servenode.StartN(t, bin, s.dir, s.config(s.registryURL(prefix)).yaml(), 3, false)
		for _, n := range s.nodes {
			n.Name = s.name + "/" + n.Name
		}
	}
	started := time.Since(began)
	t.Logf("servers and six nodes up after %v", started.Round(time.Millisecond))

	l := newLoad(*pace)
	slots := map[*site][]*slot{}
	for _, s := range sites {
		for _, n := range s.nodes {
			sl := &slot{name: n.Name}
			sl.set(n.URL(), s.name)
			slots[s] = append(slots[s], sl)
			l.run(sl)
		}
	}
	defer l.halt()
	all := func() []*slot { return append(append([]*slot(nil), slots[east]...), slots[west]...) }
	hold := int64(20) // answers per loader a fault is held for
	if *longRun > 0 {
		hold = 400
	}

	l.waitAnswers(t, "warm-up", hold, wait, all()...)
	// Nothing on the hot path crosses regions: once the nodes run, no
	// connection to the registry stays open.
	for _, s := range sites {
		testserver.Eventually(t, s.name+"'s link to the registry to carry no connection while serving", wait, func() bool { return s.link.Conns() == 0 })
	}

	for cycle := 1; ; cycle++ {
		linkCut(t, l, bin, sites, slots, hold, cycle)
		databaseFailover(t, l, east, west, slots, hold, cycle)
		etcdLoss(t, l, east, west, slots, hold, cycle)
		if *longRun == 0 || time.Since(began) > *longRun {
			break
		}
		// The next failover needs a replica of the promoted server.
		west.pg = west.replica.Server
		west.replica = testserver.StartReplica(t, west.pg)
	}
	moveNode(t, l, bin, east, west, slots, prefix, hold)
	takenIndex(t, bin, west, registry, prefix)
	awayKey(t, west)

	l.halt()
	elapsed := time.Since(began)
	for _, p := range l.phaseLog {
		t.Logf("phase %s", p)
	}
	for _, s := range sites {
		var per []string
		for _, p := range phases(l) {
			if n := l.refusals(s.name, p); n > 0 {
				per = append(per, fmt.Sprintf("%s %d", p, n))
			}
		}
		var byKey []string
		for _, k := range keys {
			n := 0
			for _, p := range phases(l) {
				n += l.refusalsOf(s.name, p, k.name)
			}
			if n > 0 {
				byKey = append(byKey, fmt.Sprintf("%s %d", k.name, n))
			}
		}
		t.Logf("region %s: %d refusals (by phase: %s; by key: %s); last: %s", s.name, l.refusals(s.name, ""), strings.Join(per, ", "), strings.Join(byKey, ", "), l.lastError(s.name))
	}
	vs := l.check(spec)
	report(t, vs, []string{"east", "west"})
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("%d requests in %v (%.0f/s); load average %s before, %s after; start-up %v; the test's heap %d MiB",
		l.requests.Load(), elapsed.Round(time.Millisecond), float64(l.requests.Load())/time.Since(l.start).Seconds(), loadBefore, loadAvg(),
		started.Round(time.Millisecond), ms.HeapInuse>>20)
}

// linkCut is fault (a): the registry is out of reach of both regions
// (both links cut: silent, or refusing connections) while one node of
// each restarts: the restarted nodes
// start on the claim their data directory cached, and neither region
// refuses a request.
func linkCut(t *testing.T, l *load, bin string, sites []*site, slots map[*site][]*slot, hold int64, cycle int) {
	// A partition that drops every packet (odd cycles), or one that
	// refuses every connection (even ones, in the long run).
	how := "silent"
	if cycle%2 == 0 {
		how = "refusing"
	}
	phase := fmt.Sprintf("link cut #%d (%s)", cycle, how)
	l.setPhase(phase)
	for _, s := range sites {
		if how == "silent" {
			s.link.Blackhole()
		} else {
			s.link.Cut()
		}
	}
	for _, s := range sites {
		// A follower restarts: a monotonic leader's kill -9 would make
		// the others refuse until a new one is elected, which is not
		// what this fault is about.
		i := follower(t, s)
		restart(t, s.nodes[i], slots[s][i], s.name)
		if lg := logOf(s.nodes[i]); !strings.Contains(lg, "registry is out of reach") {
			t.Errorf("%s restarted while the registry was out of reach, but did not log that it serves on its cached claim", s.nodes[i].Name)
		}
	}
	var sls []*slot
	for _, s := range sites {
		sls = append(sls, slots[s]...)
	}
	l.waitAnswers(t, phase, hold, wait, sls...)
	for _, s := range sites {
		s.link.Heal()
	}
	for _, s := range sites {
		if n := l.refusals(s.name, phase); n > 0 {
			t.Errorf("%s: %d refusals while the link between the regions was cut; last: %s", s.name, n, l.lastError(s.name))
		}
	}
}

// follower returns the index of a node of s that leads none of the
// monotonic keys.
func follower(t *testing.T, s *site) int {
	t.Helper()
	for i, n := range s.nodes {
		leads := false
		for _, k := range keys {
			leads = leads || (k.linear && idtest.MonotonicLeader(n.URL(), k.name))
		}
		if !leads {
			return i
		}
	}
	t.Fatalf("every node of %s leads a monotonic key", s.name)
	return 0
}

// restart kills a node with kill -9 and starts it again on its data
// directory; its loaders wait meanwhile.
func restart(t *testing.T, n *servenode.Node, sl *slot, regionName string) {
	t.Helper()
	sl.set("", "")
	n.Kill(t)
	n.Start(t)
	sl.set(n.URL(), regionName)
}

// databaseFailover is fault (b): west's PostgreSQL fails over to a
// replica that replication left behind; the nodes' address of it (the
// virtual IP) moves to the replica. East must not notice.
func databaseFailover(t *testing.T, l *load, east, west *site, slots map[*site][]*slot, hold int64, cycle int) {
	phase := fmt.Sprintf("west database failover #%d", cycle)
	l.setPhase(phase)
	west.replica.WaitCaughtUp(t, wait)
	west.replica.Proxy.Cut() // the replica falls behind
	// Until west's nodes have taken a segment the replica never saw.
	db, err := sql.Open("pgx", west.pg.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	taken := func() int64 {
		var n int64
		if err := db.QueryRow("SELECT COALESCE(sum(max_id), 0) FROM leaf_alloc").Scan(&n); err != nil {
			t.Fatalf("read west's segment rows: %v", err)
		}
		return n
	}
	before := taken()
	testserver.Eventually(t, "west to take a segment the replica never sees", wait, func() bool { return taken() > before })
	db.Close()
	l.waitAnswers(t, phase+": replication cut", hold, wait, slots[west]...)
	logged := noticed(west)
	l.mu.Lock()
	l.storeFault[west.name] = phase
	l.mu.Unlock()
	west.pg.Kill(t) // the primary dies with writes the replica never saw
	west.replica.Promote(t)
	west.vip.Retarget(west.replica.HostPort())
	l.waitAnswers(t, phase+": after the switch", hold, wait, append(slots[west], slots[east]...)...)
	// The replica lost segments west had served: the nodes notice the
	// switch (the server's identity changed, or the store went back below
	// the region's witness marks) when they next take a segment, which
	// may be after they have answered for a while from their buffers.
	testserver.Eventually(t, "a west node to log the failover of its store", wait, func() bool { return noticed(west) > logged })
	if n := l.refusals(east.name, phase); n > 0 {
		t.Errorf("east: %d refusals while west's database failed over; last: %s", n, l.lastError(east.name))
	}
	t.Logf("%s: west refused %d requests around the switch", phase, l.refusals(west.name, phase))
}

// noticed counts the store failovers s's nodes have logged.
func noticed(s *site) int {
	seen := 0
	for _, n := range s.nodes {
		lg := logOf(n)
		seen += strings.Count(lg, "went back below the witness") + strings.Count(lg, "the store's server changed")
	}
	return seen
}

// etcdLoss is fault (c): east's etcd (its only member, so its quorum) is
// killed, held down until east refuses, and restarted. West must not
// notice; east must serve again without a restart.
func etcdLoss(t *testing.T, l *load, east, west *site, slots map[*site][]*slot, hold int64, cycle int) {
	phase := fmt.Sprintf("east etcd lost #%d", cycle)
	l.setPhase(phase)
	east.etcd.Kill(t)
	testserver.Eventually(t, "east's monotonic key to refuse without its etcd", wait, func() bool {
		return l.refusalsOf(east.name, phase, "seq") > 0
	})
	l.waitAnswers(t, phase+": west", hold, wait, slots[west]...)
	east.etcd.Restart(t)
	back := fmt.Sprintf("east etcd back #%d", cycle)
	l.setPhase(back)
	l.waitAnswers(t, back, hold, wait, append(slots[east], slots[west]...)...)
	for _, p := range []string{phase, back} {
		if n := l.refusals(west.name, p); n > 0 {
			t.Errorf("west: %d refusals in phase %q; last: %s", n, p, l.lastError(west.name))
		}
	}
	t.Logf("%s: east refused %d requests without its etcd, %d after it came back", phase, l.refusals(east.name, phase), l.refusals(east.name, back))
}

// moveNode is fault (d): an operator moves east's third node to west.
// Changing only its region: section is refused, naming both regions (its
// coordinator still records east); changing its coordinator and database
// to west's too, it starts as a west node and serves west's numbers.
func moveNode(t *testing.T, l *load, bin string, east, west *site, slots map[*site][]*slot, prefix string, hold int64) {
	l.setPhase("node moved")
	n, sl := east.nodes[2], slots[east][2]
	sl.set("", "")
	n.Signal(t, syscall.SIGTERM) // the operator stops it
	select {
	case <-n.Done():
	case <-time.After(wait):
		t.Fatalf("%s did not stop within %v of SIGTERM", n.Name, wait)
	}
	half := east.config(west.registryURL(prefix))
	half.region, half.index = west.name, west.index
	out := refusedStart(t, bin, writeConfig(t, east.dir, "half-moved", half), n.Data, wait)
	for _, want := range []string{"west (index 1 of 2)", "east (index 0 of 2)"} {
		if !strings.Contains(out, want) {
			t.Errorf("a node configured as west on east's etcd refused, but its error does not name %q:\n%s", want, out)
		}
	}
	lf, err := os.Create(filepath.Join(west.dir, "moved.log"))
	if err != nil {
		t.Fatal(err)
	}
	moved := &servenode.Node{Name: "west/n3 (was east/n2)", Bin: bin, Config: filepath.Join(west.dir, "idmint.yaml"), Data: n.Data, Port: n.Port, Log: lf}
	t.Cleanup(func() { moved.Cleanup(t) })
	moved.Start(t)
	sl.name = moved.Name
	sl.set(moved.URL(), west.name)
	if !strings.Contains(logOf(moved), "moved to another region") {
		t.Errorf("%s started on a data directory of east without logging the move", moved.Name)
	}
	l.waitAnswers(t, "after the move", hold, wait, append(slots[east][:2], slots[west]...)...)
	l.waitAnswers(t, "the moved node", hold, wait, sl)
}

// takenIndex starts a third region, north, configured with west's index
// against the same registry: it must refuse, naming west.
func takenIndex(t *testing.T, bin string, west *site, registry, prefix string) {
	north := nodeConfig{region: "north", index: west.index, etcd: testserver.Addr(t, testserver.Etcd) + "/" + testserver.Prefix(t),
		store: testserver.Database(t, testserver.Postgres), registry: "etcd://" + registry + "/" + prefix}
	dir := t.TempDir()
	out := refusedStart(t, bin, writeConfig(t, dir, "north", north), filepath.Join(dir, "data"), wait)
	if !strings.Contains(out, "held by region west") {
		t.Errorf("a region claiming west's index was refused, but not naming west:\n%s", out)
	}
	t.Logf("north, configured with index %d, refused: %s", west.index, lastLine(out))
}

// phases lists the phases in the order they began.
func phases(l *load) []string {
	var out []string
	for _, p := range l.phaseLog {
		out = append(out, p[:strings.LastIndex(p, " at ")])
	}
	return out
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// loadAvg is the machine's 1-minute load average, for the figures.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// awayKey asks a west node for the monotonic key whose home is east: it
// must refuse, naming east.
func awayKey(t *testing.T, west *site) {
	resp, err := http.Get(west.nodes[0].URL() + "/v1/keys/home/ids?count=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK || !strings.Contains(string(body), "east") {
		t.Errorf("west answered %d %s for the key whose home region is east; want a refusal naming east", resp.StatusCode, body)
	}
	t.Logf("west, asked for east's key: %d %s", resp.StatusCode, strings.TrimSpace(string(body)))
}
