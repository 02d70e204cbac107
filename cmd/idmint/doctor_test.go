package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idmint/idmint/testkit/testserver"
	"github.com/idmint/idmint/worker"
)

func writeConfig(t *testing.T, dir, name, yaml string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The exit status says the worst finding at or above --fail-on (3 a
// warning, 4 an error), 0 when there is none (the zero config's finding
// is info), 2 for bad input.
func TestDoctorExitStatus(t *testing.T) {
	dir := t.TempDir()
	clean := writeConfig(t, dir, "clean.yaml", "data_dir: "+dir+"\nkeys: {u: {strategy: uuid}}\n")
	zero := writeConfig(t, dir, "zero.yaml", "data_dir: "+dir+"\nkeys: {order: {strategy: segment}}\n")
	if err := os.Mkdir(filepath.Join(dir, "eu"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, filepath.Join(dir, "eu"), "zero.yaml", "data_dir: "+dir+"\nkeys: {order: {strategy: segment}}\n")
	// A monotonic key's bound and its witness in one etcd: a warning.
	warn := writeConfig(t, dir, "warn.yaml", "data_dir: "+dir+"\ncoordinator: etcd://e1:2379/idmint\nkeys: {seq: {strategy: monotonic}}\n")
	shared := writeConfig(t, dir, "shared.yaml", "data_dir: "+dir+`
coordinator: postgres://u@db1/ids
witness: none
stores: {default: "postgres://u@db1/ids"}
keys: {order: {strategy: segment}}
`)
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"--config", clean}, 0, "no findings"},
		{[]string{"--config", zero}, 0, "INFO  witness.same_domain  key order"},
		{[]string{"--config", warn}, 3, "WARNING  witness.same_domain  key seq"},
		{[]string{"--config", warn, "--fail-on", "error"}, 0, "witness.same_domain"},
		{[]string{"--config", shared}, 4, "ERROR  witness.missing  key order"},
		{[]string{"--config", shared, "--fail-on", "error"}, 4, "witness.missing"},
		{[]string{"--config", shared, "--fail-on", "never"}, 0, "witness.missing"},
		{[]string{"--config", zero, "--config", zero}, 4, "sites.number_line"},
		{[]string{"--config", zero, "--config", filepath.Join(dir, "eu", "zero.yaml")}, 4, "(" + zero + " + " + filepath.Join(dir, "eu", "zero.yaml") + ")"},
		{[]string{"--config", clean, "--fail-on", "critical"}, 2, ""},
		{[]string{"--config", clean, "--nodes", "node1:8080"}, 2, ""},
		{[]string{"--config", filepath.Join(dir, "missing.yaml")}, 2, ""},
		{[]string{"--config", clean, "stray"}, 2, ""},
	} {
		code, out, errs := runCLI(t, append([]string{"doctor"}, c.args...)...)
		if code != c.code || !strings.Contains(out, c.out) {
			t.Errorf("doctor %s: status %d, want %d with %q in the output\nstdout: %s\nstderr: %s", strings.Join(c.args, " "), code, c.code, c.out, out, errs)
		}
		if c.code == 2 && errs == "" {
			t.Errorf("doctor %s: bad input without a message", strings.Join(c.args, " "))
		}
	}
}

// --json prints one document: its format, what was checked, the findings
// with every field, the counts by severity and the worst.
func TestDoctorJSON(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "a.yaml", "data_dir: "+dir+`
coordinator: postgres://u@db1/ids
witness: none
stores: {default: "postgres://u@db1/ids"}
keys: {order: {strategy: segment}, u: {strategy: uuid}}
`)
	code, out, errs := runCLI(t, "doctor", "--config", cfg, "--json")
	if code != 4 {
		t.Fatalf("status %d, want 4: %s", code, errs)
	}
	var doc struct {
		Format  int `json:"format"`
		Checked struct {
			Configs []string `json:"configs"`
			Connect *bool    `json:"connect"`
			Nodes   []string `json:"nodes"`
		} `json:"checked"`
		Findings []map[string]string `json:"findings"`
		Counts   map[string]int      `json:"counts"`
		Worst    string              `json:"worst"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if doc.Format != 1 || len(doc.Checked.Configs) != 1 || doc.Checked.Configs[0] != "a.yaml" || doc.Checked.Connect == nil || *doc.Checked.Connect || doc.Checked.Nodes == nil {
		t.Errorf("checked: %+v (format %d)", doc.Checked, doc.Format)
	}
	if doc.Worst != "error" || doc.Counts["error"] != 1 || len(doc.Counts) != 3 {
		t.Errorf("worst %q counts %v", doc.Worst, doc.Counts)
	}
	if len(doc.Findings) != 1 {
		t.Fatalf("findings: %v", doc.Findings)
	}
	f := doc.Findings[0]
	for _, field := range []string{"check", "severity", "key", "promise", "found", "fix"} {
		if f[field] == "" {
			t.Errorf("finding has no %s: %v", field, f)
		}
	}
	if f["check"] != "witness.missing" || f["severity"] != "error" || f["key"] != "order" {
		t.Errorf("finding %v", f)
	}
}

// --connect and --nodes through the command: a real PostgreSQL coordinator
// whose only worker ID is held, and a node whose /readyz answers 503, give
// an error each in the JSON document, which says it connected and which
// node it asked.
func TestDoctorConnectAndNodes(t *testing.T) {
	pg := testserver.Database(t, testserver.Postgres)
	ctx := context.Background()
	as, err := worker.Open(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := as.Acquire(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); as.Close() })
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	}))
	t.Cleanup(node.Close)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "a.yaml", fmt.Sprintf("data_dir: %s\ncoordinator: %q\nwitness: none\nkeys: {sf: {strategy: snowflake, options: {worker_limit: \"1\"}}}\n", dir, pg))
	code, out, errs := runCLI(t, "doctor", "--config", cfg, "--connect", "--nodes", node.URL, "--json")
	if code != 4 {
		t.Fatalf("status %d, want 4\n%s\n%s", code, out, errs)
	}
	var doc struct {
		Checked struct {
			Connect bool     `json:"connect"`
			Nodes   []string `json:"nodes"`
		} `json:"checked"`
		Findings []struct{ Check, Severity string } `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range doc.Findings {
		got[f.Check] = f.Severity
	}
	if !doc.Checked.Connect || len(doc.Checked.Nodes) != 1 || got["workers.exhausted"] != "error" || got["nodes.health"] != "error" {
		t.Errorf("checked %+v, findings %v", doc.Checked, got)
	}
}

// Two regions' configs as docs/regions.md shows them: compared, no site
// check finds an overlap and nothing is an error; a third region given
// east's index is an error naming both files and the index.
func TestDoctorRegions(t *testing.T) {
	dir := t.TempDir()
	site := func(name string, index int) string {
		return writeConfig(t, dir, name+".yaml", fmt.Sprintf(`data_dir: %s
coordinator: etcd://etcd.%[2]s:2379/idmint
stores:
  default: postgres://idmint@pg.%[2]s/ids
region: {name: %[2]s, index: %[3]d, count: 2, registry: "etcd://registry:2379/regions"}
keys:
  order: {strategy: segment}
  flake: {strategy: snowflake}
  seq:   {strategy: monotonic, options: {scope: region}}
`, dir, name, index))
	}
	east, west, north := site("east", 0), site("west", 1), site("north", 0)
	code, out, errs := runCLI(t, "doctor", "--json", "--config", east, "--config", west)
	var rep struct {
		Findings []struct{ Check, Severity, Site string }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("status %d: %v\n%s\n%s", code, err, out, errs)
	}
	for _, f := range rep.Findings {
		if strings.HasPrefix(f.Check, "sites.") || f.Severity == "error" {
			t.Errorf("east + west: %+v", f)
		}
	}
	code, out, errs = runCLI(t, "doctor", "--config", east, "--config", north)
	if code != doctorExitError || !strings.Contains(out, "ERROR  sites.region_index  (east.yaml + north.yaml)") || !strings.Contains(out, "both index 0") {
		t.Errorf("east + north: status %d\n%s\n%s", code, out, errs)
	}
}
