package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/testkit/testserver"
)

func TestMonotonicSeedBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "idmint.yaml")
	if err := os.WriteFile(cfg, []byte("keys:\n  order: {strategy: segment}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badWitness := filepath.Join(dir, "witness.yaml")
	if err := os.WriteFile(badWitness, []byte("witness: redis://127.0.0.1:1\nkeys:\n  seq: {strategy: monotonic}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "missing action"},
		{[]string{"plant", "seq", "5"}, `"plant"`},
		{[]string{"seed"}, "KEY VALUE"},
		{[]string{"seed", "seq"}, "KEY VALUE"},
		{[]string{"seed", "seq", "5", "6"}, `unexpected argument "6"`},
		{[]string{"seed", "seq", "many", "--data", dir}, `VALUE: "many"`},
		{[]string{"seed", "seq", "-5", "--data", dir}, "VALUE: -5 is negative"},
		{[]string{"seed", "seq", "1.5", "--data", dir}, `VALUE: "1.5"`},
		{[]string{"seed", "seq", "99999999999999999999", "--data", dir}, `VALUE: "99999999999999999999"`},
		{[]string{"seed", "a/b", "5", "--data", dir}, `KEY: bad key name: "a/b"`},
		{[]string{"seed", "", "5", "--data", dir}, "KEY: bad key name"},
		{[]string{"seed", "seq", "5", "--bogus"}, "bogus"},
		{[]string{"seed", "seq", "5", "--config", filepath.Join(dir, "none.yaml")}, "--config"},
		{[]string{"seed", "order", "5", "--config", cfg, "--data", dir}, `"order" is a segment key`},
		{[]string{"seed", "seq", "5", "--config", badWitness, "--data", dir}, `witness: must be "none" or an etcd://`},
	} {
		code, out, errOut := runCLI(t, append([]string{"monotonic"}, tc.args...)...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("monotonic %q: exit %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
	if code, out, _ := runCLI(t, "monotonic", "seed", "-h"); code != 0 || !strings.Contains(out, "Usage: idmint monotonic seed KEY VALUE") {
		t.Errorf("monotonic seed -h: exit %d:\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "marks.log")); err == nil {
		t.Error("a refused seed wrote the marks")
	}
}

var listenRE = regexp.MustCompile(`idmint: listening on (http://\S+)`)

// firstMonotonic asks an in-process server for one ID of key, waiting for
// a leader when the key is a cluster one.
func firstMonotonic(t *testing.T, p *inProcess, key string) int64 {
	t.Helper()
	m := listenRE.FindStringSubmatch(p.stdout.String())
	if m == nil {
		t.Fatalf("no listening address in:\n%s", p.stdout)
	}
	var id int64
	testserver.Eventually(t, "key "+key+" to answer", 20*time.Second, func() bool {
		resp, err := http.Get(m[1] + "/v1/keys/" + key + "/ids?count=1")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			return false
		}
		var b struct{ IDs []string }
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&b) != nil || len(b.IDs) != 1 {
			t.Fatalf("key %s: status %d", key, resp.StatusCode)
		}
		id, err = strconv.ParseInt(b.IDs[0], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return true
	})
	return id
}

// TestMonotonicSeedThenServe: seed 1000, then a fresh key's first value
// is above 1000; a seed while the server runs on the data directory is
// refused, naming the server; a lower seed changes nothing.
func TestMonotonicSeedThenServe(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "idmint.yaml")
	if err := os.WriteFile(cfg, []byte("keys:\n  seq: {strategy: monotonic}\n  ts: {strategy: monotonic, options: {form: timestamp}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "monotonic", "seed", "seq", "1000", "--config", cfg, "--data", dir)
	if code != 0 || !strings.Contains(out, "serves above 1000") || !strings.Contains(out, "data directory") || !strings.Contains(out, "1000") {
		t.Fatalf("seed: exit %d:\n%s%s", code, out, errOut)
	}
	if code, out, _ := runCLI(t, "monotonic", "seed", "seq", "10", "--data", dir); code != 0 || !strings.Contains(out, "already above the seed") || !strings.Contains(out, "serves above 1000") {
		t.Fatalf("lower seed: exit %d:\n%s", code, out)
	}
	p, ok := serveInProcess(t, nil, "--config", cfg, "--data", dir, "--listen", "127.0.0.1:0")
	if !ok {
		t.Fatalf("serve exited: %s", p.stderr)
	}
	if v := firstMonotonic(t, p, "seq"); v <= 1000 {
		t.Fatalf("seeded 1000, first value %d", v)
	}
	code, out, errOut = runCLI(t, "monotonic", "seed", "seq", "5000", "--data", dir)
	if code != 1 || out != "" {
		t.Fatalf("seed while serving: exit %d, stdout %q", code, out)
	}
	for _, want := range []string{"idmint serve runs on the data directory", "stop it", "pid " + strconv.Itoa(os.Getpid())} {
		if !strings.Contains(errOut, want) {
			t.Errorf("refusal lacks %q: %s", want, errOut)
		}
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("serve exit %d: %s", code, p.stderr)
	}
	// Stopped: the seed goes in, and the next start serves above it.
	if code, _, errOut := runCLI(t, "monotonic", "seed", "seq", "5000", "--data", dir); code != 0 {
		t.Fatalf("seed after stop: %s", errOut)
	}
	p, ok = serveInProcess(t, nil, "--config", cfg, "--data", dir, "--listen", "127.0.0.1:0")
	if !ok {
		t.Fatalf("serve exited: %s", p.stderr)
	}
	if v := firstMonotonic(t, p, "seq"); v <= 5000 {
		t.Fatalf("seeded 5000, first value %d", v)
	}
}

// TestMonotonicSeedCluster: with an etcd:// coordinator the seed goes to
// the cluster witness too, so a node on another data directory starts
// above it.
func TestMonotonicSeedCluster(t *testing.T) {
	addr := testserver.Addr(t, testserver.Etcd)
	coord := fmt.Sprintf("etcd://%s/%s?name=app", addr, testserver.Prefix(t))
	code, out, errOut := runCLI(t, "monotonic", "seed", "seq", "7000", "--data", t.TempDir(), "--coordinator", coord)
	if code != 0 || !strings.Contains(out, "data directory") || !strings.Contains(out, "etcd "+addr) {
		t.Fatalf("seed: exit %d:\n%s%s", code, out, errOut)
	}
	cfg := filepath.Join(t.TempDir(), "idmint.yaml")
	if err := os.WriteFile(cfg, []byte("keys:\n  seq: {strategy: monotonic, options: {ttl: \"2\"}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, ok := serveInProcess(t, nil, "--config", cfg, "--data", t.TempDir(), "--coordinator", coord, "--listen", "127.0.0.1:0")
	if !ok {
		t.Fatalf("serve exited: %s", p.stderr)
	}
	if v := firstMonotonic(t, p, "seq"); v <= 7000 {
		t.Fatalf("seeded 7000 in the cluster witness, first value on another node %d", v)
	}
}
