package regions

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idmint/idmint/region"
	"github.com/idmint/idmint/testkit/servenode"
	"github.com/idmint/idmint/testkit/tcpproxy"
	"github.com/idmint/idmint/testkit/testserver"
)

// regionCount is how many regions the ID space is split among: the two
// this test runs.
const regionCount = 2

// orderKey is the order-number key's AES key (a test value).
const orderKey = "000102030405060708090a0b0c0d0e0f"

// keySpec is one key every node serves, and what the test asserts of it.
type keySpec struct {
	name   string
	config string // the key's line under keys:
	count  int    // IDs per request
	text   bool   // IDs compared as strings (UUIDs, order numbers)
	// ordered: one node's answers strictly increase (each loader sends
	// one request at a time, so its answers are in real-time order).
	ordered bool
	// linear: real-time order across all nodes of a region (monotonic).
	linear bool
	// home: only this region serves the key (monotonic home_region); the
	// other region's loaders leave it alone, takenHome asks it once.
	home string
	// share says why an ID is not in the answering region's share of
	// the key's ID space ("" when it is); nil: no share to check.
	share func(r region.Region, num int64, str string) string
}

// keys are the keys of the proof, one per mechanism that keeps regions
// apart: a snowflake layout whose worker IDs the regions split, one whose
// datacenter field carries the region, a segment key on the region's
// share of the number line, a region-scoped monotonic key, a monotonic
// key served by its home region only, order numbers over a block of the permutation
// of one permuted sequence, and UUIDv7, which needs no coordination.
var keys = []keySpec{
	{name: "flake", config: "{strategy: snowflake}", count: 20, ordered: true, share: workerShare},
	{name: "tweet", config: "{strategy: snowflake, layout: twitter}", count: 20, ordered: true, share: datacenterShare},
	{name: "order", config: "{strategy: segment, step: 1000}", count: 50, ordered: true, share: lineShare},
	{name: "seq", config: `{strategy: monotonic, options: {ttl: "2", scope: region}}`, count: 3, ordered: true, linear: true, share: lineShare},
	{name: "home", config: `{strategy: monotonic, options: {ttl: "2", home_region: east}}`, count: 3, ordered: true, linear: true, home: "east"},
	{name: "orderno", config: fmt.Sprintf(`{strategy: ordernum, options: {format: "length=16", key: %q}}`, orderKey), count: 10, text: true, share: blockShare},
	{name: "uuid", config: "{strategy: uuid}", count: 10, text: true, ordered: true},
}

// nodeConfig is what one node's config says: its region, and the
// region's own etcd (coordinator and witness) and database.
type nodeConfig struct {
	region   string
	index    int
	etcd     string // host:port/prefix of the region's etcd
	store    string // PostgreSQL URL
	registry string // etcd URL of the registry, or ""
}

func (c nodeConfig) yaml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "coordinator: etcd://%s?ttl=3s\n", c.etcd)
	b.WriteString("drain_period: 0s\nmax_count: 100000\n")
	fmt.Fprintf(&b, "region:\n  name: %s\n  index: %d\n  count: %d\n", c.region, c.index, regionCount)
	if c.registry != "" {
		fmt.Fprintf(&b, "  registry: %s\n", c.registry)
	}
	fmt.Fprintf(&b, "stores:\n  default: %q\n", c.store)
	b.WriteString("keys:\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s: %s\n", k.name, k.config)
	}
	return b.String()
}

// site is one region: its own etcd and PostgreSQL, the address its nodes
// reach the database by (a proxy standing for the database's virtual IP,
// so a failover can move it), and its link to the registry, the only
// thing outside the region any of its nodes talks to.
type site struct {
	name    string
	index   int
	etcd    *testserver.Server
	pg      *testserver.Server
	replica *testserver.Replica // the database's replica, when it has one
	vip     *tcpproxy.Proxy
	link    *tcpproxy.Proxy
	dir     string
	nodes   []*servenode.Node
}

func (s *site) config(registry string) nodeConfig {
	return nodeConfig{region: s.name, index: s.index, etcd: s.etcd.Addr() + "/idmint",
		store: testserver.WithAddr(testserver.Postgres, s.pg.Addr(), s.vip.Addr()), registry: registry}
}

// registryURL is the registry as the site's nodes reach it: through the
// site's link.
func (s *site) registryURL(prefix string) string { return "etcd://" + s.link.Addr() + "/" + prefix }

// startSite starts a region's servers: etcd, PostgreSQL (with a
// streaming replica when replica is set), the database's virtual IP and
// the link to the registry at registry (host:port).
func startSite(t *testing.T, name string, index int, registry string, replica bool) *site {
	t.Helper()
	s := &site{name: name, index: index, dir: t.TempDir()}
	s.etcd = testserver.Start(t, testserver.Etcd)
	s.pg = testserver.Start(t, testserver.Postgres)
	if replica {
		s.replica = testserver.StartReplica(t, s.pg)
	}
	var err error
	if s.vip, err = tcpproxy.Listen(s.pg.HostPort()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.vip.Close() })
	if s.link, err = tcpproxy.Listen(registry); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.link.Close() })
	return s
}

// slot is one place a loader sends requests to: a node, which the test
// may stop, restart or move to the other region.
type slot struct {
	name  string
	cur   atomic.Pointer[target]
	lives int // targets set so far
}

// target is one life of a slot's node: where it answers, for which
// region.
type target struct {
	url    string
	region string
	life   int
}

// set points the slot at a node (url "": the node is down; its loaders
// wait). Only the test's goroutine calls it.
func (sl *slot) set(url, region string) {
	if url == "" {
		sl.cur.Store(nil)
		return
	}
	sl.cur.Store(&target{url: url, region: region, life: sl.lives})
	sl.lives++
}

// op is one answered request.
type op struct {
	region     string
	life       int
	sent, recv time.Duration
	nums       []int64
	strs       []string
}

// stream is one loader: one key on one slot, one request at a time.
type stream struct {
	slot     *slot
	key      keySpec
	ops      []op // owned by the loader until it stops
	answered atomic.Int64
}

// refusal counts refused requests: per region, phase and key.
type refusalKey struct{ region, phase, key string }

// load runs the loaders and keeps every answer and refusal.
type load struct {
	start    time.Time
	phase    atomic.Pointer[string]
	streams  []*stream
	hc       *http.Client
	stop     chan struct{}
	wg       sync.WaitGroup
	requests atomic.Int64

	mu      sync.Mutex
	refused map[refusalKey]int
	// storeFault is, per region, the phase its store last failed over
	// in: a refusal for a failed allocation from the store is that
	// phase's, whenever it comes (a node finds a pooled connection to the
	// old primary dead only when it next takes a segment, which may be
	// phases later). A witness's failure ("the store failed: key ...:
	// witness: ...") is not: a region whose witness were another
	// region's etcd must be caught refusing in that etcd's outage.
	storeFault map[string]string
	lastErr    map[string]string // per region
	stopped    bool
	pace       time.Duration
	phaseLog   []string
}

func newLoad(pace time.Duration) *load {
	l := &load{start: time.Now(), stop: make(chan struct{}), refused: map[refusalKey]int{}, storeFault: map[string]string{}, lastErr: map[string]string{}, pace: pace,
		hc: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	l.setPhase("start")
	return l
}

func (l *load) setPhase(p string) {
	l.phase.Store(&p)
	l.mu.Lock()
	l.phaseLog = append(l.phaseLog, fmt.Sprintf("%s at %v", p, time.Since(l.start).Round(time.Millisecond)))
	l.mu.Unlock()
}

// run starts one loader per key on sl.
func (l *load) run(sl *slot) {
	for _, k := range keys {
		s := &stream{slot: sl, key: k}
		l.streams = append(l.streams, s)
		l.wg.Go(func() { l.loop(s) })
	}
}

func (l *load) loop(s *stream) {
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		tg := s.slot.cur.Load()
		if tg == nil || (s.key.home != "" && tg.region != s.key.home) {
			time.Sleep(20 * time.Millisecond) // the node is down: wait for the test to start it
			continue
		}
		sent := time.Since(l.start)
		ids, err := l.fetch(tg.url + "/v1/keys/" + s.key.name + "/ids?count=" + strconv.Itoa(s.key.count))
		recv := time.Since(l.start)
		l.requests.Add(1)
		if err != nil {
			if s.slot.cur.Load() != tg {
				continue // the test stopped or moved the node meanwhile
			}
			l.mu.Lock()
			phase := *l.phase.Load()
			if f := l.storeFault[tg.region]; f != "" && strings.Contains(err.Error(), "the store failed: allocate") {
				phase = f
			}
			l.refused[refusalKey{tg.region, phase, s.key.name}]++
			l.lastErr[tg.region] = fmt.Sprintf("%s %s: %v", s.slot.name, s.key.name, err)
			l.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			continue
		}
		o := op{region: tg.region, life: tg.life, sent: sent, recv: recv}
		if s.key.text {
			o.strs = ids
		} else {
			o.nums = make([]int64, len(ids))
			for i, id := range ids {
				n, perr := strconv.ParseInt(id, 10, 64)
				if perr != nil {
					o.strs = ids // kept as text: the check reports it
					o.nums = nil
					break
				}
				o.nums[i] = n
			}
		}
		s.ops = append(s.ops, o)
		s.answered.Add(1)
		if l.pace > 0 {
			time.Sleep(l.pace)
		}
	}
}

// fetch asks for IDs; any answer but 200 with IDs is an error.
func (l *load) fetch(u string) ([]string, error) {
	resp, err := l.hc.Get(u)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	var v struct{ IDs []string }
	if err := json.Unmarshal(body, &v); err != nil || len(v.IDs) == 0 {
		return nil, fmt.Errorf("answer without IDs: %s (%v)", body, err)
	}
	return v.IDs, nil
}

// halt stops the loaders and waits for them.
func (l *load) halt() {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	l.stopped = true
	l.mu.Unlock()
	close(l.stop)
	l.wg.Wait()
}

// refusals returns the refusals of region in phase ("" for every phase).
func (l *load) refusals(region, phase string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for k, v := range l.refused {
		if k.region == region && (phase == "" || k.phase == phase) {
			n += v
		}
	}
	return n
}

// refusalsOf returns the refusals of region's key in phase.
func (l *load) refusalsOf(region, phase, key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refused[refusalKey{region, phase, key}]
}

func (l *load) lastError(region string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastErr[region]
}

// waitAnswers waits until every loader of every slot in sls has n more
// answers, failing the test after d with the slowest loader and its
// region's last refusal.
func (l *load) waitAnswers(t *testing.T, why string, n int64, d time.Duration, sls ...*slot) {
	t.Helper()
	from := map[*stream]int64{}
	var ws []*stream
	for _, s := range l.streams {
		if tg := s.slot.cur.Load(); slices.Contains(sls, s.slot) && (s.key.home == "" || tg == nil || tg.region == s.key.home) {
			from[s] = s.answered.Load()
			ws = append(ws, s)
		}
	}
	deadline := time.Now().Add(d)
	for _, s := range ws {
		for s.answered.Load() < from[s]+n {
			if time.Now().After(deadline) {
				region := "?"
				if tg := s.slot.cur.Load(); tg != nil {
					region = tg.region
				}
				t.Fatalf("%s: %s answered %d of %d requests for key %s within %v; last refusal in %s: %s",
					why, s.slot.name, s.answered.Load()-from[s], n, s.key.name, d, region, l.lastError(region))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// refusedStart runs `idmint serve` on config and data and expects it to
// refuse: to exit with an error within d. It returns the output. A node
// that becomes ready instead fails the test.
func refusedStart(t *testing.T, bin, config, data string, d time.Duration) string {
	t.Helper()
	port := testserver.FreePort(t)
	var out strings.Builder
	cmd := exec.Command(bin, "serve", "--config", config, "--data", data, "--listen", "127.0.0.1:"+strconv.Itoa(port))
	cmd.Env = append(os.Environ(), "IDMINT_CONFIG=")
	// One writer for both: os/exec then calls it from one goroutine at a
	// time, and out is read only once the process has exited.
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(d)
	for {
		select {
		case err := <-done:
			if err == nil {
				t.Fatalf("idmint serve on %s exited 0; want a refusal. Output:\n%s", config, out.String())
			}
			return out.String()
		default:
		}
		if resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port)); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				cmd.Process.Kill()
				<-done
				t.Fatalf("idmint serve on %s became ready; want a refusal. Output:\n%s", config, out.String())
			}
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-done
			t.Fatalf("idmint serve on %s neither refused nor became ready within %v. Output:\n%s", config, d, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// writeConfig writes a node config to dir/name.yaml and returns its path.
func writeConfig(t *testing.T, dir, name string, c nodeConfig) string {
	t.Helper()
	p := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(p, []byte(c.yaml()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// logOf returns a node's log so far.
func logOf(n *servenode.Node) string {
	b, _ := os.ReadFile(n.Log.Name())
	return string(b)
}

// duplicates counts the numbers that occur more than once in sorted xs
// and returns up to three of them.
func duplicates[T int64 | string](xs []T) (int, []T) {
	n := 0
	var ex []T
	for i := 1; i < len(xs); i++ {
		if xs[i] == xs[i-1] {
			n++
			if len(ex) < 3 {
				ex = append(ex, xs[i])
			}
		}
	}
	return n, ex
}

func sortedCopy[T int64 | string](xs []T) []T {
	out := slices.Clone(xs)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
