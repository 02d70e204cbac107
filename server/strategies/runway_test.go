package strategies

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/snowflake"
	"github.com/idmint/idmint/testkit/testserver"
	"github.com/idmint/idmint/worker"
)

// sample returns the value of the series name{labels} in a scrape, and
// whether it is there.
func sample(t *testing.T, scrape, name, labels string) (float64, bool) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name+"{"+labels+"}") + ` (\S+)$`).FindStringSubmatch(scrape)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("%s{%s}: %v", name, labels, err)
	}
	return v, true
}

func mustSample(t *testing.T, scrape, name, labels string) float64 {
	t.Helper()
	v, ok := sample(t, scrape, name, labels)
	if !ok {
		t.Fatalf("no %s{%s} in the scrape:\n%s", name, labels, grepLines(scrape, "idmint_"))
	}
	return v
}

// runwayKeys are one key of every strategy with a runway figure.
func runwayKeys() map[string]server.KeyConfig {
	return map[string]server.KeyConfig{
		"sf":   {Strategy: "snowflake", Options: map[string]string{"worker_limit": "8"}},
		"js":   {Strategy: "snowflake", Layout: "jssafe"},
		"seg":  {Strategy: "segment", Step: 100},
		"mono": {Strategy: "monotonic"},
		"mt":   {Strategy: "monotonic", Options: map[string]string{"form": "timestamp"}},
		"ord":  {Strategy: "ordernum", Options: map[string]string{"format": "length=16", "key": orderKey1}},
	}
}

// TestRunwayMetrics: on the admin listener a node exports, per key, the
// end of a snowflake layout, a counter's ceiling and headroom, an order
// number format's share used, and for a coordinator that shares a pool the
// free worker IDs and the pool's size (worker_limit).
func TestRunwayMetrics(t *testing.T) {
	dir := t.TempDir()
	s, h := serveWith(t, runwayKeys(), setup{dir: dir, admin: "127.0.0.1:0",
		coord: "sqlite://" + filepath.Join(dir, "workers.db")})
	var seg []int64
	for _, k := range []string{"sf", "js", "seg", "mono", "mt", "ord"} {
		if code, body := get(t, h, "GET", "/v1/keys/"+k+"/ids?count=5", ""); code != 200 {
			t.Fatalf("%s: %d %s", k, code, body)
		}
	}
	seg = idsOf(t, h, "seg", 3)
	admin := s.AdminHandler()
	if code, _ := get(t, h, "GET", "/metrics", ""); code != 404 {
		t.Fatalf("public /metrics with an admin listener: %d, want 404", code)
	}
	var m string
	// The pool is counted in the background; the first listing runs at start.
	testserver.Eventually(t, "the worker pool's first count", 10*time.Second, func() bool {
		_, m = get(t, admin, "GET", "/metrics", "")
		_, ok := sample(t, m, "idmint_worker_ids", `resource="snowflake:leaf"`)
		return ok
	})

	for key, layout := range map[string]string{"sf": "leaf", "js": "jssafe"} {
		l, _ := snowflake.Lookup(layout)
		if got := mustSample(t, m, "idmint_layout_end_timestamp_seconds", `key="`+key+`",strategy="snowflake"`); got != float64(l.End().Unix()) {
			t.Errorf("%s: layout end %v, want %d (%s)", key, got, l.End().Unix(), l.End())
		}
	}
	if got := mustSample(t, m, "idmint_worker_ids", `resource="snowflake:leaf"`); got != 8 {
		t.Errorf("worker pool %v, want 8 (worker_limit)", got)
	}
	// Both layouts' nodes take their IDs from the one coordinator table:
	// two of the leaf pool's 8 are held.
	if got := mustSample(t, m, "idmint_worker_ids_free", `resource="snowflake:leaf"`); got != 6 {
		t.Errorf("free worker IDs %v, want 6 (this process holds two of 8)", got)
	}
	if got := mustSample(t, m, "idmint_worker_ids", `resource="snowflake:jssafe"`); got != 64 {
		t.Errorf("jssafe worker pool %v, want 64 (6-bit field)", got)
	}

	top := seg[len(seg)-1]
	if got := mustSample(t, m, "idmint_counter_ceiling", `key="seg",strategy="segment"`); got != math.MaxInt64 {
		t.Errorf("segment ceiling %v", got)
	}
	// The store claimed at least the IDs issued and at most two steps more.
	head := mustSample(t, m, "idmint_counter_headroom", `key="seg",strategy="segment"`)
	if head > float64(math.MaxInt64-top) || head < float64(math.MaxInt64-top-200) {
		t.Errorf("segment headroom %v after ID %d (step 100)", head, top)
	}
	if head := mustSample(t, m, "idmint_counter_headroom", `key="mono",strategy="monotonic"`); head > float64(math.MaxInt64-5) || head < float64(math.MaxInt64-1e6) {
		t.Errorf("monotonic headroom %v after 5 IDs", head)
	}
	if _, ok := sample(t, m, "idmint_counter_headroom", `key="mt",strategy="monotonic"`); ok {
		t.Error("a timestamp-form monotonic key has a counter headroom (its runway is its time, not a counter)")
	}
	// 5 order numbers of a 16-digit format: a share above 0.
	if used := mustSample(t, m, "idmint_ordernum_capacity_used_ratio", `key="ord",strategy="ordernum"`); used <= 0 || used > 1e-6 {
		t.Errorf("order-number share used %v after 5 numbers", used)
	}
}

// TestRunwayOrdernumNeverPublic: where the public listener serves /metrics
// (metrics: public, or no admin listener), the share of an order-number
// format used is on neither listener: a public client could multiply it by
// the capacity and read the volume.
func TestRunwayOrdernumNeverPublic(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    setup
	}{
		{"metrics public", setup{admin: "127.0.0.1:0", public: true}},
		{"no admin listener", setup{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, h := serveWith(t, map[string]server.KeyConfig{
				"ord": {Strategy: "ordernum", Options: map[string]string{"format": "length=16", "key": orderKey1}},
			}, tc.o)
			if code, body := get(t, h, "GET", "/v1/keys/ord/ids?count=5", ""); code != 200 {
				t.Fatalf("%d %s", code, body)
			}
			for name, hd := range map[string]http.Handler{"public": h, "admin": s.AdminHandler()} {
				_, m := get(t, hd, "GET", "/metrics", "")
				if _, ok := sample(t, m, "idmint_ordernum_capacity", `key="ord",strategy="ordernum"`); !ok {
					t.Fatalf("%s /metrics lacks the order-number key's capacity:\n%s", name, m)
				}
				if regexp.MustCompile(`idmint_ordernum_capacity_used_ratio`).MatchString(m) {
					t.Errorf("%s /metrics shows the share used while /metrics is public:\n%s", name, grepLines(m, "ordernum"))
				}
			}
		})
	}
}

// TestRunwayWorkerPoolOnlyShared: a coordinator that gives the node one ID
// of its own (static here; file, ip, mac and k8s alike) has no pool to run
// out of, so no pool series: a pool of 1 with 0 free would page for ever.
func TestRunwayWorkerPoolOnlyShared(t *testing.T) {
	s, h := serveWith(t, map[string]server.KeyConfig{"sf": {Strategy: "snowflake"}}, setup{admin: "127.0.0.1:0"})
	if code, body := get(t, h, "GET", "/v1/keys/sf/ids", ""); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	_, m := get(t, s.AdminHandler(), "GET", "/metrics", "")
	mustSample(t, m, "idmint_lease_held", `resource="snowflake:leaf"`)
	if regexp.MustCompile(`idmint_worker_ids`).MatchString(m) {
		t.Errorf("a static coordinator has worker pool series:\n%s", grepLines(m, "worker"))
	}
	for coord, pooled := range map[string]bool{
		"static://7": false, "file:///var/lib/idmint/worker": false, "ip://": false, "mac://": false, "k8s://": false,
		"etcd://h:2379/p": true, "zk://h:2181/p": true, "postgres://u@h/db": true, "mysql://u@tcp(h)/db": true, "sqlite:///x.db": true,
	} {
		if got := pooledCoordinator(coord); got != pooled {
			t.Errorf("pooledCoordinator(%q) = %v, want %v", coord, got, pooled)
		}
	}
}

func TestFreeWorkerIDs(t *testing.T) {
	hs := []worker.Holder{
		{ID: 0, Live: true},
		{ID: 1, Live: false}, // recorded, its lease ended: free again
		{ID: 2, Live: true},
		{ID: 9, Live: true}, // outside this node's pool (another worker_limit)
	}
	for _, tc := range []struct{ pool, want int64 }{{8, 6}, {2, 1}, {10, 7}} {
		if got := freeWorkerIDs(hs, tc.pool); got != tc.want {
			t.Errorf("pool %d: %d free, want %d", tc.pool, got, tc.want)
		}
	}
}

// TestCounterStatsExact: the headroom is exact even where the float64 of
// the ceiling is not.
func TestCounterStatsExact(t *testing.T) {
	for _, tc := range []struct {
		ceiling, highest int64
		want             float64
	}{
		{math.MaxInt64, math.MaxInt64 - 7, 7},
		{1<<53 - 1, 1<<53 - 10, 9},
		{math.MaxInt64, 0, math.MaxInt64},
		{1<<53 - 1, -1, 1<<53 - 1}, // nothing claimed yet
	} {
		st := counterStats(tc.ceiling, tc.highest)
		if st[0].Name != "counter_ceiling" || st[1].Name != "counter_headroom" || st[1].Value != tc.want {
			t.Errorf("counterStats(%d, %d) = %+v, want headroom %v", tc.ceiling, tc.highest, st, tc.want)
		}
	}
}

// TestRegionRunway: a key on region 1 of 2 reports the top of its share
// as its ceiling and the headroom left in that share (2^62-1 counter
// values), not the whole line's; without a region nothing changes.
func TestRegionRunway(t *testing.T) {
	one := newRegionLine(&server.Config{Region: server.RegionConfig{Name: "west", Index: 1, Count: 2}}, "k")
	// Near the end of its share, where a float64 is exact: 7 left.
	st := one.runway(math.MaxInt64, 1<<62-8)
	if st[0].Value != float64(math.MaxInt64) || st[1].Value != 7 {
		t.Errorf("region 1 of 2 at counter 2^62-8: ceiling %v headroom %v, want 2^63-1 and 7", st[0].Value, st[1].Value)
	}
	zero := newRegionLine(&server.Config{Region: server.RegionConfig{Name: "east", Index: 0, Count: 2}}, "k")
	if st := zero.runway(math.MaxInt64, 1<<62-8); st[0].Value != float64(1<<62-1) || st[1].Value != 7 {
		t.Errorf("region 0 of 2 near its end: ceiling %v headroom %v, want 2^62-1 and 7", st[0].Value, st[1].Value)
	}
	if st := zero.runway(1<<53-1, 5); st[1].Value != float64(1<<53-1-5) {
		t.Errorf("a redis key (ceiling 2^53-1) in region 0 of 2: headroom %v", st[1].Value)
	}
	if st := (regionLine{}).runway(math.MaxInt64, 7); st[1].Value != float64(math.MaxInt64-7) {
		t.Errorf("no region: headroom %v", st[1].Value)
	}
}

// TestWorkerPoolWatch: the pool is listed at once and then every
// poolEvery on the node's clock; a failed listing makes the count unknown
// (no series) until one succeeds, and Close stops the watch.
func TestWorkerPoolWatch(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var (
		mu   sync.Mutex
		hs   = []worker.Holder{{ID: 0, Live: true}}
		fail error
		n    int
	)
	list := func(ctx context.Context) ([]worker.Holder, error) {
		mu.Lock()
		defer mu.Unlock()
		n++
		return hs, fail
	}
	r := &nodeResource{pool: &workerPool{}}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.wg.Add(1)
	go r.watchPool(list, 4, clk, slog.New(slog.DiscardHandler))
	defer func() { r.cancel(); r.wg.Wait() }()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// wait waits for the watch to sleep again after its want-th listing.
	listings := func() int { mu.Lock(); defer mu.Unlock(); return n }
	wait := func(want int) {
		t.Helper()
		if err := clk.WaitForSleepers(ctx, 1); err != nil || listings() != want {
			t.Fatalf("waiting for listing %d: %v (listed %d times)", want, err, listings())
		}
	}
	stats := func() map[string]float64 {
		m := map[string]float64{}
		for _, s := range r.poolStats() {
			m[s.Name] = s.Value
		}
		return m
	}
	wait(1)
	if got := stats(); got["worker_ids_free"] != 3 || got["worker_ids"] != 4 {
		t.Fatalf("after the first listing: %v, want 3 of 4 free", got)
	}
	mu.Lock()
	hs = append(hs, worker.Holder{ID: 2, Live: true})
	mu.Unlock()
	clk.Advance(poolEvery - time.Millisecond)
	if listings() != 1 {
		t.Fatal("listed again before poolEvery")
	}
	clk.Advance(time.Millisecond)
	wait(2)
	if got := stats(); got["worker_ids_free"] != 2 {
		t.Fatalf("after the second listing: %v, want 2 free", got)
	}
	mu.Lock()
	fail = errors.New("coordinator down")
	mu.Unlock()
	clk.Advance(poolEvery)
	wait(3)
	if got := stats(); len(got) != 0 {
		t.Fatalf("after a failed listing: %v, want no series", got)
	}
	mu.Lock()
	fail = nil
	mu.Unlock()
	clk.Advance(poolEvery)
	wait(4)
	if got := stats(); got["worker_ids_free"] != 2 {
		t.Fatalf("after a listing succeeded again: %v, want 2 free", got)
	}
}
