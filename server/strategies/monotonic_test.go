package strategies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/monotonic"
	"github.com/idmint/idmint/monotonic/lincheck"
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/testkit/testserver"
)

func idsOf(t *testing.T, h http.Handler, key string, count int) []int64 {
	t.Helper()
	code, body := get(t, h, "GET", fmt.Sprintf("/v1/keys/%s/ids?count=%d", key, count), "")
	var b struct{ IDs []string }
	if code != 200 || json.Unmarshal([]byte(body), &b) != nil || len(b.IDs) != count {
		t.Fatalf("%s count=%d: %d %s", key, count, code, body)
	}
	return ints(t, b.IDs)
}

// TestMonotonicZeroConfig: a monotonic key on a single node keeps its
// bound in the data directory; every way of asking (single, batch, range,
// Leaf's segment URL) answers strictly increasing values, and a restart
// starts above them all.
func TestMonotonicZeroConfig(t *testing.T) {
	dir := t.TempDir()
	keys := map[string]server.KeyConfig{
		"m":  {Strategy: "monotonic", Options: map[string]string{"window": "10"}},
		"mt": {Strategy: "monotonic", Options: map[string]string{"form": "timestamp"}},
	}
	s, h := serveWith(t, keys, setup{dir: dir})
	var last int64
	next := func(ids ...int64) {
		t.Helper()
		for _, id := range ids {
			if id <= last {
				t.Fatalf("%d after %d", id, last)
			}
			last = id
		}
	}
	next(idsOf(t, h, "m", 1)...)
	if last != 1 {
		t.Fatalf("first counter ID %d, want 1", last)
	}
	batch := idsOf(t, h, "m", 25)
	for i, id := range batch {
		if id != batch[0]+int64(i) {
			t.Fatalf("batch not consecutive: %v", batch)
		}
	}
	next(batch...)
	code, body := get(t, h, "GET", "/v1/keys/m/range?count=7", "")
	var rg struct {
		First string
		Count int
	}
	if code != 200 || json.Unmarshal([]byte(body), &rg) != nil {
		t.Fatalf("range: %d %s", code, body)
	}
	if first, _ := strconv.ParseInt(rg.First, 10, 64); first <= last || rg.Count != 7 {
		t.Fatalf("range %s after %d", body, last)
	} else {
		next(first, first+6)
	}
	code, body = get(t, h, "GET", "/api/segment/get/m", "")
	leaf, err := strconv.ParseInt(body, 10, 64)
	if code != 200 || err != nil {
		t.Fatalf("leaf: %d %s", code, body)
	}
	next(leaf)
	ts := idsOf(t, h, "mt", 3)
	p, err := monotonic.Decode(ts[0])
	if err != nil || time.Since(p.Time) > time.Minute || time.Since(p.Time) < -time.Minute {
		t.Fatalf("timestamp ID %d decodes to %+v, %v", ts[0], p, err)
	}
	s.Close(context.Background())
	_, h2 := serveWith(t, keys, setup{dir: dir})
	next(idsOf(t, h2, "m", 1)...)
	if ts2 := idsOf(t, h2, "mt", 1); ts2[0] <= ts[2] {
		t.Fatalf("timestamp after restart %d, before %d", ts2[0], ts[2])
	}
}

func TestMonotonicBadOptions(t *testing.T) {
	for _, o := range []map[string]string{
		{"form": "sometimes"}, {"ttl": "1"}, {"window": "0"}, {"time_window": "soon"},
		{"etcd": "nohost"}, {"peer_listen": "x"}, {"colour": "blue"},
	} {
		ps := checkMonotonic(server.KeyConfig{Strategy: "monotonic", Options: o}, &server.Config{})
		if len(ps) != 1 {
			t.Errorf("options %v: problems %v, want one", o, ps)
			continue
		}
		for f := range o {
			if ps[0].Field != "options."+f {
				t.Errorf("options %v: problem names %s", o, ps[0].Field)
			}
		}
	}
}

// TestMonotonicClusterThroughFollowers: three servers on one etcd; clients
// ask random nodes over HTTP (followers forward to the leader), the leader
// is closed midway, and the history is linearizable.
func TestMonotonicClusterThroughFollowers(t *testing.T) {
	addr := testserver.Addr(t, testserver.Etcd)
	key := testserver.Prefix(t)
	keys := map[string]server.KeyConfig{key: {Strategy: "monotonic", Options: map[string]string{"etcd": addr, "ttl": "2", "window": "100"}}}
	type node struct {
		s   *server.Server
		url string
	}
	var mu sync.Mutex
	var nodes []node
	start := func() node {
		s, h := serveWith(t, keys, setup{})
		hs := httptest.NewServer(h)
		t.Cleanup(hs.Close)
		return node{s, hs.URL}
	}
	for i := 0; i < 3; i++ {
		nodes = append(nodes, start())
	}
	clk := clock.NewReal()
	var ops []lincheck.Op
	var refused int
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for c := 0; c < 6; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(c)))
			for ctx.Err() == nil {
				mu.Lock()
				n := nodes[r.Intn(len(nodes))]
				mu.Unlock()
				count := 1 + r.Intn(3)
				sent := clk.Mono()
				req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/v1/keys/%s/ids?count=%d", n.url, key, count), nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					continue
				}
				var b struct{ IDs []string }
				err = json.NewDecoder(resp.Body).Decode(&b)
				resp.Body.Close()
				recv := clk.Mono()
				if resp.StatusCode != 200 || err != nil {
					if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
						t.Errorf("status %d without Retry-After", resp.StatusCode)
					}
					mu.Lock()
					refused++
					mu.Unlock()
					time.Sleep(10 * time.Millisecond)
					continue
				}
				ids := make([]int64, len(b.IDs))
				for i, s := range b.IDs {
					ids[i], _ = strconv.ParseInt(s, 10, 64)
				}
				mu.Lock()
				ops = append(ops, lincheck.Op{Sent: sent, Received: recv, IDs: ids, Label: n.url})
				mu.Unlock()
			}
		}(c)
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(ops) }
	testserver.Eventually(t, "requests served", 15*time.Second, func() bool { return count() > 300 })
	// Close the leader (the node whose metrics say so).
	var leader int = -1
	testserver.Eventually(t, "a node reporting leadership", 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i, n := range nodes {
			resp, err := http.Get(n.url + "/metrics")
			if err != nil {
				continue
			}
			var sb strings.Builder
			buf := make([]byte, 1<<16)
			for {
				k, err := resp.Body.Read(buf)
				sb.Write(buf[:k])
				if err != nil {
					break
				}
			}
			resp.Body.Close()
			if strings.Contains(sb.String(), "idmint_monotonic_leader{") && strings.Contains(sb.String(), `strategy="monotonic"} 1`) {
				leader = i
				return true
			}
		}
		return false
	})
	mu.Lock()
	old := nodes[leader]
	nodes[leader] = nodes[(leader+1)%3]
	mu.Unlock()
	old.s.Close(context.Background())
	n := count()
	testserver.Eventually(t, "requests served after the leader closed", 15*time.Second, func() bool { return count() > n+300 })
	cancel()
	wg.Wait()
	if v := lincheck.Check(ops, 10); len(v) > 0 {
		t.Fatalf("%d requests: %v", len(ops), v)
	}
	t.Logf("%d requests checked, %d refused (503 + Retry-After)", len(ops), refused)
}

// TestMonotonicLeaderNode: a cluster key's issuer names the leader it
// knows (the node name it published, as `idmint leaders` prints), on the
// leader and on a follower alike; a single-node key names none.
func TestMonotonicLeaderNode(t *testing.T) {
	addr := testserver.Addr(t, testserver.Etcd)
	key := testserver.Prefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type leaderNamer interface{ LeaderNode() string }
	open := func(opts map[string]string) leaderNamer {
		t.Helper()
		env := &server.Env{Clock: clock.NewReal(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Config: &server.Config{DataDir: t.TempDir(), Coordinator: "static://7"}}
		is, err := monotonicStrategy().New(ctx, env, key, server.KeyConfig{Strategy: "monotonic", Options: opts})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			is.Close(context.Background())
			// The shared resources the key opened: asked for again by
			// name, they are the ones it holds.
			for _, name := range []string{"monotonic cluster " + addr + " 127.0.0.1:0", "witness"} {
				if r, err := env.Shared(context.Background(), name, func(context.Context) (server.Resource, error) {
					return nil, errors.New("not opened")
				}); err == nil {
					r.Close(context.Background())
				}
			}
		})
		ln, ok := is.(leaderNamer)
		if !ok {
			t.Fatalf("the monotonic issuer %T has no LeaderNode", is)
		}
		return ln
	}
	if got := open(map[string]string{"etcd": "none"}).LeaderNode(); got != "" {
		t.Fatalf("a single-node key names leader %q; want none", got)
	}
	cluster := map[string]string{"etcd": addr, "ttl": "2"}
	a, b := open(cluster), open(cluster)
	for i, n := range []leaderNamer{a, b} {
		testserver.Eventually(t, fmt.Sprintf("node %d names the leader", i), 10*time.Second, func() bool { return n.LeaderNode() == server.NodeName() })
	}
}

// A monotonic key on the coordinator's etcd logs in with the coordinator
// URL's credentials; without them etcd refuses it.
func TestMonotonicEtcdAuth(t *testing.T) {
	srv := testserver.Start(t, testserver.Etcd)
	pw := testserver.EnableEtcdAuth(t, srv.Addr(), "idmint", "idmint-pw", "/idmint/")
	keys := map[string]server.KeyConfig{"seq": {Strategy: "monotonic", Options: map[string]string{"ttl": "2"}}}
	_, h := serveWith(t, keys, setup{coord: "etcd://idmint@" + srv.Addr() + "/idmint?name=auth&password_file=" + pw})
	testserver.Eventually(t, "a monotonic ID with etcd credentials", 20*time.Second, func() bool {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/v1/keys/seq/ids?count=2", nil)
		r.Host = "127.0.0.1"
		h.ServeHTTP(w, r)
		return w.Code == 200
	})
}
