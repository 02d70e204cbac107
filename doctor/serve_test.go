package doctor_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/doctor"
	"github.com/idmint/idmint/testkit/servenode"
	"github.com/idmint/idmint/testkit/testserver"
)

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A real serve node runs the cheap checks at start: a segment key whose
// SQLite store shares the data directory with the witness is logged once
// (at info: a node alone is meant to start so) and exported as idmint_doctor_findings; a node with nothing
// to find exports no such series. Nodes then finds the node healthy and
// ready, and an address where nothing listens unhealthy.
func TestServeNodeFindings(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs idmint serve")
	}
	dir := t.TempDir()
	bin := servenode.Build(t, dir)
	start := func(name, yaml string) *servenode.Node {
		cfg := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		lf, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		n := &servenode.Node{Name: name, Bin: bin, Config: cfg, Data: filepath.Join(dir, name), Port: testserver.FreePort(t), Log: lf}
		t.Cleanup(func() { n.Cleanup(t) })
		n.Start(t)
		return n
	}
	n := start("segment", "keys: {order: {strategy: segment}, u: {strategy: uuid}}\n")
	const series = `idmint_doctor_findings{check="witness.same_domain",severity="info"} 1`
	if m := scrape(t, n.URL()); !strings.Contains(m, series) {
		t.Errorf("/metrics lacks %s:\n%s", series, grepLines(m, "idmint_doctor"))
	}
	log, err := os.ReadFile(n.Log.Name())
	if err != nil {
		t.Fatal(err)
	}
	if c := strings.Count(string(log), "check=witness.same_domain"); c != 1 || !strings.Contains(string(log), "level=INFO msg=\"doctor: IDs of key \\\"order\\\" repeat") {
		t.Errorf("want the finding logged once (at info: one node alone), logged %d times:\n%s", c, log)
	}
	clean := start("clean", "keys: {u: {strategy: uuid}}\n")
	if m := scrape(t, clean.URL()); strings.Contains(m, "idmint_doctor_findings") {
		t.Errorf("a node without findings exports %s", grepLines(m, "idmint_doctor"))
	}
	gone := fmt.Sprintf("http://127.0.0.1:%d", testserver.FreePort(t))
	hc := &http.Client{Timeout: 5 * time.Second}
	fs := doctor.Nodes(context.Background(), hc, []string{n.URL(), clean.URL(), gone}, "")
	health := find(fs, "nodes.health")
	if len(health) != 2 || !strings.Contains(health[0].Found, gone) || !strings.Contains(health[1].Found, gone) {
		t.Errorf("want /healthz and /readyz of %s alone unhealthy, got %+v", gone, health)
	}
	// The two live nodes serve different keys: order is on one only.
	keys := find(fs, "nodes.keys")
	if len(keys) != 1 || keys[0].Key != "order" {
		t.Errorf("want the nodes to disagree on key order, got %+v", keys)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Nodes compares what the nodes' /metrics say: builds (idmint_build_info)
// that differ are a warning, a key served with different strategies an
// error; nodes that agree give nothing. The token goes to /metrics only.
func TestNodesCompare(t *testing.T) {
	worker := 0
	node := func(build, strategy string) string {
		worker++
		worker := worker
		h := http.NewServeMux()
		h.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
		h.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
			if build == "unready" {
				http.Error(w, "key a: store down", http.StatusServiceUnavailable)
				return
			}
			io.WriteString(w, "ok")
		})
		h.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer tok" {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			fmt.Fprintf(w, "# HELP x\nidmint_build_info{commit=\"c\",goversion=\"go\",version=%q} 1\nidmint_ids_issued_total{key=\"a\",strategy=%q} 5\nidmint_worker_id{resource=\"snowflake:leaf\"} %d\n", build, strategy, worker)
		})
		s := httptest.NewServer(h)
		t.Cleanup(s.Close)
		return s.URL
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	same := []string{node("v1", "segment"), node("v1", "segment")}
	if fs := doctor.Nodes(context.Background(), hc, same, "tok"); len(fs) > 0 {
		t.Errorf("agreeing nodes: found %+v", fs)
	}
	if fs := find(doctor.Nodes(context.Background(), hc, same, ""), "nodes.metrics"); len(fs) != 2 {
		t.Errorf("no token: want /metrics unreadable on both, got %+v", fs)
	}
	fs := doctor.Nodes(context.Background(), hc, []string{node("v1", "segment"), node("v2", "snowflake")}, "tok")
	if b := find(fs, "nodes.build"); len(b) != 1 || b[0].Severity != doctor.Warning {
		t.Errorf("builds v1 and v2: got %+v", b)
	}
	if k := find(fs, "nodes.keys"); len(k) != 1 || k[0].Key != "a" || k[0].Severity != doctor.Error {
		t.Errorf("key a as segment and snowflake: got %+v", k)
	}
	if w := find(fs, "nodes.worker_id"); len(w) > 0 {
		t.Errorf("worker IDs differ: found %+v", w)
	}
	h := find(doctor.Nodes(context.Background(), hc, []string{node("unready", "segment")}, "tok"), "nodes.health")
	if len(h) != 1 || !strings.Contains(h[0].Found, "/readyz answered 503: key a: store down") {
		t.Errorf("a node answering /readyz 503: got %+v", h)
	}
}

// Two real zero-config nodes behind one load balancer each take worker ID 0
// from their own file coordinator: nodes.worker_id names it.
func TestNodesSameWorkerID(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs idmint serve")
	}
	dir := t.TempDir()
	bin := servenode.Build(t, dir)
	nodes := servenode.StartN(t, bin, dir, "keys: {snowflake: {strategy: snowflake}}\n", 2, false)
	hc := &http.Client{Timeout: 5 * time.Second}
	fs := find(doctor.Nodes(context.Background(), hc, []string{nodes[0].URL(), nodes[1].URL()}, ""), "nodes.worker_id")
	if len(fs) != 1 || fs[0].Severity != doctor.Error || !strings.Contains(fs[0].Found, "worker ID 0 of snowflake:leaf") {
		t.Fatalf("got %+v", fs)
	}
}
