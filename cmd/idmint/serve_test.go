package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	v1 "github.com/idmint/idmint/api/idmintv1"
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/server/strategies"
	"github.com/idmint/idmint/testkit/idtest"
	"github.com/idmint/idmint/testkit/testserver"
)

// buildBinary builds cmd/idmint into a temporary directory once per test.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "idmint")
	cmd := idtest.BuildCommand(bin)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build: %v", err)
	}
	return bin
}

// daemon is a running `idmint serve`.
type daemon struct {
	cmd    *exec.Cmd
	base   string
	grpc   string
	stderr *bytes.Buffer
	done   chan error
}

// startDaemon runs the binary with args and waits for its "listening on"
// line (it listens on a port the kernel picks).
func startDaemon(t *testing.T, bin string, args ...string) *daemon {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), "IDMINT_CONFIG=")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{cmd: cmd, stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	cmd.Stderr = &lockedWriter{w: d.stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		d.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-d.done
		}
	})
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("idmint serve exited before listening; stderr:\n%s", d.stderr)
			}
			if a, found := strings.CutPrefix(l, "idmint: grpc on "); found {
				d.grpc, _, _ = strings.Cut(a, " ")
			}
			if a, found := strings.CutPrefix(l, "idmint: listening on "); found {
				d.base = a
				logs.Store(a, cmd.Stderr)
			}
			if d.base != "" && d.grpc != "" {
				go func() {
					for range lines {
					}
				}()
				return d
			}
		case <-timeout:
			t.Fatalf("idmint serve did not report its address; stderr:\n%s", d.stderr)
		}
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

var logs sync.Map // base URL -> *bytes.Buffer of the daemon's stderr

func logOf(base string) string {
	if b, ok := logs.Load(base); ok {
		return b.(*lockedWriter).String()
	}
	return ""
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.(*bytes.Buffer).String()
}

// stop sends SIGTERM and waits for a clean exit; once the daemon says it
// drains, a second SIGTERM skips the rest of the drain period (the tests
// have no load balancer to drain for).
func (d *daemon) stop(t *testing.T) {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(60 * time.Second)
	again := false
	for {
		select {
		case err := <-d.done:
			if err != nil {
				t.Fatalf("idmint serve exited with %v after SIGTERM; stderr:\n%s", err, d.stderr)
			}
			return
		case <-deadline:
			t.Fatalf("idmint serve did not stop after SIGTERM; stderr:\n%s", d.stderr)
		case <-time.After(10 * time.Millisecond):
			if !again && strings.Contains(d.cmd.Stderr.(*lockedWriter).String(), "shutdown: draining") {
				again = true
				d.cmd.Process.Signal(syscall.SIGTERM) // an error: it exited meanwhile
			}
		}
	}
}

// hammer runs clients concurrent clients against every key, each making
// rounds requests that alternate Leaf single-ID and /v1 batch calls, and
// returns every ID by key.
func hammer(t *testing.T, d *daemon, keys []string, clients, rounds int) map[string][]string {
	t.Helper()
	base := d.base
	cc, err := grpc.NewClient(d.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	gc := v1.NewIDsClient(cc)
	var mu sync.Mutex
	got := map[string][]string{}
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			key := keys[c%len(keys)]
			var mine []string
			for r := 0; r < rounds; r++ {
				if c%3 == 2 { // a gRPC client
					resp, err := gc.NextIDs(context.Background(), &v1.NextIDsRequest{Key: key, Count: uint32(20 + c)})
					if err != nil {
						errs <- fmt.Errorf("grpc NextIDs %s: %w", key, err)
						return
					}
					for _, id := range resp.Ids {
						mine = append(mine, strconv.FormatInt(id, 10))
					}
					mine = append(mine, resp.TextIds...)
					if len(resp.Ids)+len(resp.TextIds) != 20+c {
						errs <- fmt.Errorf("grpc NextIDs %s: %d IDs, want %d", key, len(resp.Ids)+len(resp.TextIds), 20+c)
						return
					}
					continue
				}
				if r%2 == 0 && key != "uuid" {
					url := base + "/api/segment/get/" + key
					if key == "snowflake" {
						url = base + "/api/snowflake/get/" + key
					}
					b, err := get(hc, url)
					if err != nil {
						errs <- err
						return
					}
					mine = append(mine, string(b))
					continue
				}
				b, err := get(hc, fmt.Sprintf("%s/v1/keys/%s/ids?count=%d", base, key, 50+c))
				if err != nil {
					errs <- err
					return
				}
				var body struct{ IDs []string }
				if err := json.Unmarshal(b, &body); err != nil || len(body.IDs) != 50+c {
					errs <- fmt.Errorf("batch body %s: %v", b, err)
					return
				}
				mine = append(mine, body.IDs...)
			}
			mu.Lock()
			got[key] = append(got[key], mine...)
			mu.Unlock()
		}(c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("%v; server log:\n%s", err, logOf(base))
	}
	return got
}

func get(hc *http.Client, url string) ([]byte, error) {
	resp, err := hc.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return b, nil
}

// servedKeys are the zero-config keys of the binary built from this tree.
func servedKeys(t *testing.T) []string {
	reg := server.NewRegistry()
	if err := strategies.Register(reg); err != nil {
		t.Fatal(err)
	}
	var ks []string
	for k := range defaultKeys(reg) {
		ks = append(ks, k)
	}
	return ks
}

func checkUnique(t *testing.T, seen map[string]map[string]bool, got map[string][]string) int {
	t.Helper()
	n := 0
	for key, ids := range got {
		if seen[key] == nil {
			seen[key] = map[string]bool{}
		}
		for _, id := range ids {
			if seen[key][id] {
				t.Fatalf("key %s: duplicate ID %s", key, id)
			}
			seen[key][id] = true
			n++
		}
	}
	return n
}

// TestServeEndToEnd builds the real binary, runs it with no configuration
// on a fresh data directory, hammers every default key with 50 concurrent
// clients (HTTP Leaf-style, HTTP /v1 batches and gRPC), stops it with SIGTERM, restarts it on the same data and hammers
// it again: no ID of any key may repeat, within a run or across the two.
func TestServeEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	data := filepath.Join(t.TempDir(), "data")
	keys := servedKeys(t)
	seen := map[string]map[string]bool{}
	total := 0
	for run := 0; run < 2; run++ {
		d := startDaemon(t, bin, "--data", data)
		got := hammer(t, d, keys, 50, 6)
		for _, k := range keys {
			if len(got[k]) == 0 {
				t.Fatalf("run %d: no IDs for key %s", run, k)
			}
		}
		total += checkUnique(t, seen, got)
		d.stop(t)
		if !strings.Contains(d.stderr.String(), "shutdown: done") {
			t.Errorf("run %d: no shutdown log:\n%s", run, d.stderr)
		}
		// stop's second SIGTERM came within the 5 s drain period.
		if !strings.Contains(d.stderr.String(), "drain cut short by a second signal") {
			t.Errorf("run %d: the second SIGTERM did not cut the drain short:\n%s", run, d.stderr)
		}
	}
	t.Logf("%d IDs over keys %v, two runs, no duplicates", total, keys)
	if _, err := os.Stat(filepath.Join(data, "worker")); err != nil {
		t.Fatalf("no worker file in the data directory: %v", err)
	}
}

// TestServeEndToEndEtcdPostgres is the same with the worker lease in etcd
// and the segment store in PostgreSQL (scripts/test.sh starts both).
func TestServeEndToEndEtcdPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	etcd := testserver.Addr(t, testserver.Etcd)
	pg := testserver.Database(t, testserver.Postgres)
	bin := buildBinary(t)
	keys := servedKeys(t)
	cfg := filepath.Join(t.TempDir(), "idmint.yaml")
	yaml := fmt.Sprintf("coordinator: etcd://%s/%s\nstores:\n  default: %s\n", etcd, testserver.Prefix(t), pg)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "data")
	seen := map[string]map[string]bool{}
	for run := 0; run < 2; run++ {
		d := startDaemon(t, bin, "--data", data, "--config", cfg)
		checkUnique(t, seen, hammer(t, d, keys, 50, 4))
		d.stop(t)
	}
}

func TestServeCheck(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte(`
listen: 0.0.0.0:80
max_count: -1
keys:
  order:
    strategy: nope
  "bad key":
    strategy: snowflake
    layout: nosuch
`), 0o600)
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	code := run(context.Background(), e, []string{"serve", "--check", "--config", bad, "--data", dir})
	if code != 2 {
		t.Fatalf("exit %d, want 2; stderr %s", code, errb.String())
	}
	for _, want := range []string{"listen:", "max_count:", "keys.order.strategy:", "keys.bad key:", "keys.bad key.layout:"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("--check output lacks %q:\n%s", want, errb.String())
		}
	}
	// One frame: the problems under one "idmint serve:" line, not
	// followed by a second "invalid configuration".
	if n := strings.Count(errb.String(), "idmint serve:"); n != 1 || strings.Contains(errb.String(), "invalid configuration") {
		t.Errorf("--check output in %d frames:\n%s", n, errb.String())
	}
	out.Reset()
	errb.Reset()
	code = run(context.Background(), e, []string{"serve", "--check", "--data", dir})
	if code != 0 || !strings.Contains(out.String(), "configuration OK") {
		t.Fatalf("zero config --check: %d %s %s", code, out.String(), errb.String())
	}
	code = run(context.Background(), e, []string{"serve", "--check", "--config", filepath.Join(dir, "missing.yaml")})
	if code != 2 {
		t.Fatalf("missing config: exit %d", code)
	}
	// The user did not call a Go package: no "server: " in what they read.
	broken := filepath.Join(dir, "broken.yaml")
	os.WriteFile(broken, []byte("keys: [\n"), 0o600)
	errb.Reset()
	code = run(context.Background(), e, []string{"serve", "--check", "--config", broken, "--data", dir})
	if msg := errb.String(); code != 2 || !strings.Contains(msg, "config has 1 problem(s)") || strings.Contains(msg, "server: ") {
		t.Errorf("broken config: exit %d, %q; want the problem without Go package prefixes", code, msg)
	}
	code = run(context.Background(), e, []string{"serve", "--log-format", "xml", "--check"})
	if code != 2 {
		t.Fatalf("bad log format: exit %d", code)
	}
	// The environment overrides the file; flags override the environment.
	e.getenv = func(k string) string {
		if k == "IDMINT_LISTEN" {
			return "0.0.0.0:9"
		}
		return ""
	}
	if code := run(context.Background(), e, []string{"serve", "--check", "--data", dir}); code != 2 {
		t.Fatalf("IDMINT_LISTEN on all interfaces without admin token: exit %d", code)
	}
	if code := run(context.Background(), e, []string{"serve", "--check", "--data", dir, "--listen", "127.0.0.1:9"}); code != 0 {
		t.Fatalf("flag over env: exit %d: %s", code, errb.String())
	}
}

// serve raises the collector's target to serveGOGC unless GOGC is set.
func TestServeGC(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	if _, set := serveGC(func(k string) string { return map[string]string{"GOGC": "50"}[k] }); set {
		t.Fatal("serveGC overrode GOGC=50")
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GOGC set: the percentage moved to %d", got)
	}
	if pct, set := serveGC(func(string) string { return "" }); !set || pct != serveGOGC {
		t.Fatalf("GOGC unset: serveGC = %d, %v", pct, set)
	}
	if got := debug.SetGCPercent(100); got != serveGOGC {
		t.Fatalf("GOGC unset: the percentage is %d, want %d", got, serveGOGC)
	}
}

// serve gives the runtime memory_limit as its soft limit unless
// GOMEMLIMIT is set or the config says -1.
func TestServeMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(old)
	debug.SetMemoryLimit(1 << 40)
	if _, set := serveMemoryLimit(func(k string) string { return map[string]string{"GOMEMLIMIT": "1GiB"}[k] }, 128<<20); set {
		t.Fatal("serveMemoryLimit overrode GOMEMLIMIT")
	}
	if _, set := serveMemoryLimit(func(string) string { return "" }, -1); set {
		t.Fatal("memory_limit -1 set a limit")
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<40 {
		t.Fatalf("the limit moved to %d without being asked", got)
	}
	if limit, set := serveMemoryLimit(func(string) string { return "" }, 128<<20); !set || limit != 128<<20 {
		t.Fatalf("serveMemoryLimit = %d, %v", limit, set)
	}
	if got := debug.SetMemoryLimit(-1); got != 128<<20 {
		t.Fatalf("the runtime's limit is %d, want %d", got, 128<<20)
	}
}

// The banner names a few keys whole and many by count: 10,000 keys
// printed 69 KB of names at every start.
func TestBannerKeyList(t *testing.T) {
	many := make([]string, 10000)
	for i := range many {
		many[i] = fmt.Sprintf("k%d", i)
	}
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{nil, "(none yet: create them with POST /v1/keys)"},
		{[]string{"order", "snowflake"}, "order, snowflake"},
		{many[:bannerKeys], strings.Join(many[:bannerKeys], ", ")},
		{many, strings.Join(many[:bannerKeys], ", ") + ", … and 9988 more (10000 in all; GET /v1/keys lists them)"},
	} {
		if got := keyList(tc.names); got != tc.want {
			t.Errorf("keyList(%d names) = %q, want %q", len(tc.names), got, tc.want)
		}
	}
}
