package strategies

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/testkit/testserver"
)

// syncBuffer is a log sink safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// serveMono is serveWith for the monotonic tests: the coordinator is
// given (serveWith's is static://7), and the log is kept.
func serveMono(t *testing.T, keys map[string]server.KeyConfig, dir, coordinator string) (*server.Server, http.Handler, *syncBuffer) {
	t.Helper()
	reg := server.NewRegistry()
	if err := Register(reg); err != nil {
		t.Fatal(err)
	}
	cfg := &server.Config{DataDir: dir, Coordinator: coordinator, Stores: map[string]string{"default": "sqlite://" + filepath.Join(dir, "seg.db")}, Keys: keys}
	cfg.SetDefaults()
	if err := cfg.Validate(reg); err != nil {
		t.Fatal(err)
	}
	log := &syncBuffer{}
	s, err := server.New(context.Background(), server.Options{Config: cfg, Registry: reg, Surfaces: surfaces, Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatalf("server.New: %v\n%s", err, log)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s, s.Handler(), log
}

// firstIDs asks key for count IDs until a leader answers (a cluster key
// refuses with 503 until one is elected).
func firstIDs(t *testing.T, h http.Handler, key string, count int) []int64 {
	t.Helper()
	var ids []int64
	testserver.Eventually(t, "the monotonic key "+key+" to answer", 20*time.Second, func() bool {
		code, body := get(t, h, "GET", fmt.Sprintf("/v1/keys/%s/ids?count=%d", key, count), "")
		if code == http.StatusServiceUnavailable {
			return false
		}
		var b struct{ IDs []string }
		if code != 200 || json.Unmarshal([]byte(body), &b) != nil || len(b.IDs) != count {
			t.Fatalf("%s count=%d: %d %s", key, count, code, body)
		}
		ids = ints(t, b.IDs)
		return true
	})
	return ids
}

func etcdCoordinator(t *testing.T, addr, name string) string {
	return "etcd://" + addr + "/" + testserver.Prefix(t) + "?name=" + name
}

// TestMonotonicFileToEtcdCoordinator is the single node growing into a
// cluster: a monotonic key answered from its bound file, then the node is
// restarted on the same data directory with an etcd:// coordinator (the
// key's state moves to an empty etcd prefix). It must not answer 1..5
// again. Nor must it when the data directory predates the witness (only
// the bound file knows).
func TestMonotonicFileToEtcdCoordinator(t *testing.T) {
	addr := testserver.Addr(t, testserver.Etcd)
	keys := map[string]server.KeyConfig{"seq": {Strategy: "monotonic"}}
	dir := t.TempDir()
	s, h, _ := serveMono(t, keys, dir, "static://7")
	single := idsOf(t, h, "seq", 5)
	if single[0] != 1 {
		t.Fatalf("single node answered %v", single)
	}
	if _, body := get(t, h, "GET", "/metrics", ""); !strings.Contains(body, `idmint_monotonic_went_back_total{key="seq",strategy="monotonic"} 0`) {
		t.Errorf("/metrics of a new key's first start:\n%s", grepLines(body, "monotonic_"))
	}
	s.Close(context.Background())
	s, h, log := serveMono(t, keys, dir, etcdCoordinator(t, addr, "app"))
	cluster := firstIDs(t, h, "seq", 5)
	if cluster[0] <= single[4] {
		t.Fatalf("after --coordinator etcd:// the key answered %v again (the single node answered %v)", cluster, single)
	}
	if !strings.Contains(log.String(), "monotonic: source starts above a bound known elsewhere") {
		t.Errorf("no INFO line saying the start was moved up:\n%s", log)
	}
	// Counted where an alert sees it.
	if _, body := get(t, h, "GET", "/metrics", ""); !strings.Contains(body, `idmint_monotonic_went_back_total{key="seq",strategy="monotonic"} 1`) {
		t.Errorf("/metrics does not count the etcd bound found below the witness's mark:\n%s", grepLines(body, "monotonic_"))
	}
	s.Close(context.Background())

	// A data directory from before the witness: the bound file alone.
	old := t.TempDir()
	if err := os.WriteFile(filepath.Join(old, "monotonic-seq.bound"), []byte("5000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, h, _ = serveMono(t, keys, old, etcdCoordinator(t, addr, "app"))
	if v := firstIDs(t, h, "seq", 1); v[0] <= 5000 {
		t.Fatalf("bound file 5000 in the data directory, first cluster value %d", v[0])
	}
}

// TestMonotonicEtcdPrefixChange: the coordinator's ?name= changes (the key
// moves to another etcd prefix), and so does options.etcd; the node's
// witness keeps the key above what it answered.
func TestMonotonicEtcdPrefixChange(t *testing.T) {
	addr := testserver.Addr(t, testserver.Etcd)
	key := testserver.Prefix(t)
	dir := t.TempDir()
	keys := map[string]server.KeyConfig{key: {Strategy: "monotonic", Options: map[string]string{"ttl": "2"}}}
	s, h, _ := serveMono(t, keys, dir, etcdCoordinator(t, addr, "a"))
	a := firstIDs(t, h, key, 20)
	s.Close(context.Background())
	s, h, _ = serveMono(t, keys, dir, etcdCoordinator(t, addr, "b"))
	b := firstIDs(t, h, key, 1)
	if b[0] <= a[19] {
		t.Fatalf("coordinator name a answered up to %d, name b then answered %d", a[19], b[0])
	}
	s.Close(context.Background())
	// options.etcd: the key's state under /idmint/monotonic/ instead.
	keys[key] = server.KeyConfig{Strategy: "monotonic", Options: map[string]string{"ttl": "2", "etcd": addr}}
	_, h, _ = serveMono(t, keys, dir, "static://7")
	if c := firstIDs(t, h, key, 1); c[0] <= b[0] {
		t.Fatalf("options.etcd answered %d after %d", c[0], b[0])
	}
}

// TestMonotonicBoundFileUnderClusterCoordinatorWarns: a monotonic key
// served from the node's own bound file (no etcd:// coordinator, or
// options.etcd: none) under a coordinator that implies several nodes is
// refused unless it says node_local: true, and then warns, naming the key;
// a single node does neither.
func TestMonotonicBoundFileUnderClusterCoordinatorWarns(t *testing.T) {
	const warning = "monotonic: key served from this node's own bound file although the coordinator implies several nodes"
	cases := []struct {
		name, coordinator string
		options           map[string]string
		warn              bool
	}{
		{"single node", "static://7", nil, false},
		{"postgres coordinator", "postgres://idmint@127.0.0.1:1/none", nil, true},
		{"options.etcd none", "static://7", map[string]string{"etcd": "none"}, false},
	}
	if addr := os.Getenv("IDMINT_TEST_ETCD"); addr != "" { // without it, the other cases still run
		cases = append(cases, struct {
			name, coordinator string
			options           map[string]string
			warn              bool
		}{"etcd coordinator, options.etcd none", etcdCoordinator(t, addr, "w"), map[string]string{"etcd": "none"}, true})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			keys := map[string]server.KeyConfig{"bills": {Strategy: "monotonic", Options: tc.options, NodeLocal: tc.warn}}
			_, h, log := serveMono(t, keys, t.TempDir(), tc.coordinator)
			if ids := idsOf(t, h, "bills", 3); ids[0] != 1 {
				t.Fatalf("first IDs %v", ids)
			}
			got := log.String()
			if strings.Contains(got, warning) != tc.warn {
				t.Fatalf("warning %v, want %v:\n%s", !tc.warn, tc.warn, got)
			}
			if tc.warn && !strings.Contains(got, "level=WARN") || tc.warn && !strings.Contains(got, "key=bills") {
				t.Fatalf("the warning is not a WARN naming the key:\n%s", got)
			}
		})
	}
	if ps := checkMonotonic(server.KeyConfig{Strategy: "monotonic", Options: map[string]string{"etcd": "none"}}, &server.Config{}); len(ps) != 0 {
		t.Fatalf("options.etcd: none refused: %v", ps)
	}
	cluster := &server.Config{Coordinator: "postgres://idmint@127.0.0.1:1/none"}
	ps := checkMonotonic(server.KeyConfig{Strategy: "monotonic"}, cluster)
	if len(ps) != 1 || ps[0].Field != "options.etcd" || !strings.Contains(ps[0].Message, "node_local") {
		t.Fatalf("a bound-file key under a postgres coordinator: %v; want refused on options.etcd, naming node_local", ps)
	}
}

// TestSeedMonotonic: a seeded key's first value is above the seed, in a
// File source; the seed never lowers a mark; bad input is refused.
func TestSeedMonotonic(t *testing.T) {
	dir := t.TempDir()
	cfg := &server.Config{DataDir: dir, Coordinator: "static://7"}
	ctx := context.Background()
	ms, err := SeedMonotonic(ctx, cfg, nil, "seq", 1000)
	if err != nil || len(ms) != 1 || ms[0].Before != 0 || ms[0].After != 1000 || !strings.Contains(ms[0].Witness, dir) {
		t.Fatalf("SeedMonotonic = %+v, %v", ms, err)
	}
	if ms, err := SeedMonotonic(ctx, cfg, nil, "seq", 10); err != nil || ms[0].Before != 1000 || ms[0].After != 1000 {
		t.Fatalf("a lower seed: %+v, %v", ms, err)
	}
	for _, bad := range []struct {
		key string
		v   int64
	}{{"seq", -1}, {"", 5}, {"a/b", 5}} {
		if _, err := SeedMonotonic(ctx, cfg, nil, bad.key, bad.v); err == nil {
			t.Errorf("SeedMonotonic(%q, %d) accepted", bad.key, bad.v)
		}
	}
	_, h, _ := serveMono(t, map[string]server.KeyConfig{"seq": {Strategy: "monotonic"}}, dir, "static://7")
	if v := idsOf(t, h, "seq", 1); v[0] <= 1000 {
		t.Fatalf("seeded 1000, first value %d", v[0])
	}
	if _, err := SeedMonotonic(ctx, cfg, nil, "seq", 5000); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("seeding a data directory a server holds: %v", err)
	}
}
