package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

const committed = "../idmint.json"

// TestCommittedIsGenerated fails when deploy/grafana/idmint.json is not
// what the generator writes: one was edited without the other.
func TestCommittedIsGenerated(t *testing.T) {
	want, err := render()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the generator's output; edit deploy/grafana/gen and run: go generate ./deploy/grafana/gen", committed)
	}
}

// TestRunRefusesArguments: a stray argument is an error naming it, not
// ignored.
func TestRunRefusesArguments(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "d.json")
	if err := parseAndRun([]string{"gen", "-o", out}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(out); err != nil || !json.Valid(b) {
		t.Fatalf("-o %s wrote no valid JSON: %v", out, err)
	}
	err := parseAndRun([]string{"gen", "extra"})
	if err == nil || !strings.Contains(err.Error(), `"extra"`) {
		t.Fatalf("a stray argument: %v, want an error naming it", err)
	}
}

// load reads the committed file as Grafana does: as plain JSON, not
// through the generator's types.
func load(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", committed, err)
	}
	return d
}

// panels are the dashboard's panels, those inside collapsed rows too.
func panels(d map[string]any) []map[string]any {
	var out []map[string]any
	var walk func(list any)
	walk = func(list any) {
		l, _ := list.([]any)
		for _, p := range l {
			m, _ := p.(map[string]any)
			out = append(out, m)
			walk(m["panels"])
		}
	}
	walk(d["panels"])
	return out
}

// selectorRE is a series with label matchers.
var selectorRE = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*\{[^}]*\}`)

var uidRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,40}$`)

// TestImportable checks what Grafana needs to import the file (its UI's
// import and file provisioning): a title, a stable uid of at most 40
// characters of [a-zA-Z0-9_-], no numeric id (the importing Grafana gives
// one), a schemaVersion of Grafana 10 or 11, a time range, panels and the
// templating list with the variables every query uses.
func TestImportable(t *testing.T) {
	d := load(t)
	if s, _ := d["title"].(string); s == "" {
		t.Error("no title")
	}
	if uid, _ := d["uid"].(string); !uidRE.MatchString(uid) || uid != "idmint-overview" {
		t.Errorf("uid %q: want the stable idmint-overview (at most 40 of [a-zA-Z0-9_-]): a new uid imports a second dashboard beside the old one", uid)
	}
	if id, ok := d["id"]; !ok || id != nil {
		t.Errorf("id %v: want null, so the importing Grafana assigns one", id)
	}
	if v, _ := d["schemaVersion"].(float64); v < 36 || v > 41 {
		t.Errorf("schemaVersion %v: want Grafana 10 or 11's (36..41)", d["schemaVersion"])
	}
	tr, _ := d["time"].(map[string]any)
	if from, _ := tr["from"].(string); from == "" {
		t.Errorf("time %v: no from", d["time"])
	}
	if to, _ := tr["to"].(string); to == "" {
		t.Errorf("time %v: no to", d["time"])
	}
	if len(panels(d)) == 0 {
		t.Error("no panels")
	}
	tm, _ := d["templating"].(map[string]any)
	list, ok := tm["list"].([]any)
	if !ok {
		t.Fatalf("templating.list missing")
	}
	vars := map[string]map[string]any{}
	for _, v := range list {
		m, _ := v.(map[string]any)
		name, _ := m["name"].(string)
		if name == "" || vars[name] != nil {
			t.Errorf("variable %v: no name, or a second of that name", m)
		}
		vars[name] = m
	}
	if ds := vars["datasource"]; ds == nil || ds["type"] != "datasource" || ds["query"] != "prometheus" {
		t.Errorf("variable datasource %v: want type datasource of prometheus", ds)
	}
	for _, name := range []string{"job", "instance", "key"} {
		v := vars[name]
		if v == nil {
			t.Errorf("no variable %s", name)
			continue
		}
		checkDatasource(t, "variable "+name, v["datasource"])
		q, _ := v["query"].(map[string]any)
		if s, _ := q["query"].(string); v["type"] != "query" || !strings.HasPrefix(s, "label_values(") || s != v["definition"] {
			t.Errorf("variable %s: type %v, query %v, definition %v: want a label_values query", name, v["type"], q["query"], v["definition"])
		}
	}
	// Every $variable a query or variable uses is defined (or Grafana's own).
	used := regexp.MustCompile(`\$\{?(\w+)`)
	b, _ := os.ReadFile(committed)
	for _, m := range used.FindAllStringSubmatch(string(b), -1) {
		if vars[m[1]] == nil && !strings.HasPrefix(m[1], "__") {
			t.Errorf("$%s is used but no variable defines it", m[1])
		}
	}
}

func checkDatasource(t *testing.T, what string, ds any) {
	t.Helper()
	m, _ := ds.(map[string]any)
	if m["type"] != "prometheus" || m["uid"] != "${datasource}" {
		t.Errorf("%s: datasource %v, want {type: prometheus, uid: ${datasource}} (the datasource variable)", what, ds)
	}
}

// TestPanels checks every panel: a unique id and a title; each one that
// queries uses the datasource variable, has queries with unique refIds
// and an expr that parses as PromQL; every panel fits the 24 columns and
// none overlaps another.
func TestPanels(t *testing.T) {
	d := load(t)
	ids := map[float64]string{}
	type rect struct {
		title      string
		x, y, w, h int
	}
	var rects []rect
	for _, p := range panels(d) {
		title, _ := p["title"].(string)
		if title == "" {
			t.Errorf("panel %v has no title", p["id"])
		}
		id, ok := p["id"].(float64)
		if !ok || id <= 0 {
			t.Errorf("panel %q: id %v, want a positive number", title, p["id"])
		} else if other, dup := ids[id]; dup {
			t.Errorf("panels %q and %q share id %v", other, title, id)
		}
		ids[id] = title
		g, _ := p["gridPos"].(map[string]any)
		r := rect{title: title}
		for k, dst := range map[string]*int{"x": &r.x, "y": &r.y, "w": &r.w, "h": &r.h} {
			v, ok := g[k].(float64)
			if !ok {
				t.Errorf("panel %q: gridPos.%s missing", title, k)
			}
			*dst = int(v)
		}
		if r.x < 0 || r.y < 0 || r.w < 1 || r.h < 1 || r.x+r.w > 24 {
			t.Errorf("panel %q: gridPos %+v does not fit 24 columns", title, g)
		}
		rects = append(rects, r)
		typ, _ := p["type"].(string)
		if typ == "row" {
			if p["targets"] != nil {
				t.Errorf("row %q has queries", title)
			}
			continue
		}
		if !slices.Contains([]string{"timeseries", "stat", "table", "state-timeline"}, typ) {
			t.Errorf("panel %q: type %q", title, typ)
		}
		checkDatasource(t, "panel "+title, p["datasource"])
		targets, _ := p["targets"].([]any)
		if len(targets) == 0 {
			t.Errorf("panel %q has no queries", title)
		}
		refs := map[string]bool{}
		for i, tg := range targets {
			m, _ := tg.(map[string]any)
			what := fmt.Sprintf("panel %q query %d", title, i)
			checkDatasource(t, what, m["datasource"])
			ref, _ := m["refId"].(string)
			if ref == "" || refs[ref] {
				t.Errorf("%s: refId %q empty or not unique", what, ref)
			}
			refs[ref] = true
			expr, _ := m["expr"].(string)
			if strings.TrimSpace(expr) == "" {
				t.Errorf("%s: no expr", what)
				continue
			}
			names, err := parsePromQL(expr)
			if err != nil {
				t.Errorf("%s: %s\n  %v", what, expr, err)
			}
			// Every series follows the Job and Node variables.
			sel := 0
			for _, m := range selectorRE.FindAllString(expr, -1) {
				if strings.Contains(m, `job=~"$job"`) && strings.Contains(m, `instance=~"$instance"`) {
					sel++
				}
			}
			if sel != len(names) {
				t.Errorf("%s: %s: %d series, %d of them selected by job and instance", what, expr, len(names), sel)
			}
		}
	}
	for i, a := range rects {
		for _, b := range rects[i+1:] {
			if a.x < b.x+b.w && b.x < a.x+a.w && a.y < b.y+b.h && b.y < a.y+a.h {
				t.Errorf("panels %q %+v and %q %+v overlap", a.title, a, b.title, b)
			}
		}
	}
}

// exprs are every query of the committed dashboard.
func exprs(t *testing.T) []string {
	var out []string
	for _, p := range panels(load(t)) {
		targets, _ := p["targets"].([]any)
		for _, tg := range targets {
			m, _ := tg.(map[string]any)
			e, _ := m["expr"].(string)
			out = append(out, e)
		}
	}
	return out
}

// pending are series agreed for the runway and build metrics, written
// beside the dashboard; once their code is in the tree the source scan
// finds them and this list only repeats it.
var pending = []string{
	"idmint_build_info",
	"idmint_layout_end_timestamp_seconds",
	"idmint_worker_ids_free", "idmint_worker_ids",
	"idmint_counter_ceiling", "idmint_counter_headroom",
	"idmint_ordernum_capacity_used_ratio",
}

// sourceNames are the series idmint's code names: "idmint_..." literals,
// and the Name of each server.Stat, which /metrics exports as
// idmint_<name>. It reads the module's Go files outside tests.
func sourceNames(t *testing.T) map[string]bool {
	t.Helper()
	lit := regexp.MustCompile(`"(idmint_[a-z0-9_]+)"`)
	stat := regexp.MustCompile(`Name:\s*"([a-z][a-z0-9_]*)"`)
	names := map[string]bool{}
	root := filepath.Join("..", "..", "..")
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && path != root && (strings.HasPrefix(e.Name(), ".") || e.Name() == "node_modules" || e.Name() == "testdata") {
			return filepath.SkipDir
		}
		if e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range lit.FindAllSubmatch(b, -1) {
			names[string(m[1])] = true
		}
		if bytes.Contains(b, []byte("server.Stat")) || bytes.Contains(b, []byte("[]Stat")) {
			for _, m := range stat.FindAllSubmatch(b, -1) {
				names["idmint_"+string(m[1])] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !names["idmint_ids_issued_total"] || !names["idmint_segment_remaining"] {
		t.Fatalf("the source scan found neither idmint_ids_issued_total nor idmint_segment_remaining: it reads the wrong files")
	}
	return names
}

// TestMetricNamesExist fails on a series no code exports, such as a typo
// (a query of an unknown series draws nothing and says nothing). The
// test that scrapes a real node's /metrics checks the same names against
// what a node serves.
func TestMetricNamesExist(t *testing.T) {
	known := sourceNames(t)
	for _, n := range pending {
		known[n] = true
	}
	// The Go runtime's and the process's series of client_golang's
	// collectors, which the server registers (checked below).
	for _, n := range []string{"process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
		"process_max_fds", "process_start_time_seconds", "go_goroutines", "go_memstats_heap_inuse_bytes", "go_gc_gomemlimit_bytes"} {
		known[n] = true
	}
	src, err := os.ReadFile(filepath.Join("..", "..", "..", "server", "metrics.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"collectors.NewGoCollector(", "collectors.NewProcessCollector("} {
		if !bytes.Contains(src, []byte(c)) {
			t.Errorf("server/metrics.go no longer registers %s): the dashboard's Process row shows nothing", c)
		}
	}
	isKnown := func(n string) bool {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(n, suffix); ok && known[base] {
				return true
			}
		}
		return known[n]
	}
	used := map[string]bool{}
	for _, e := range exprs(t) {
		names, err := parsePromQL(e)
		if err != nil {
			continue // TestPanels reports it
		}
		for _, n := range names {
			used[n] = true
		}
	}
	// The variables' label_values(metric{...}, label) queries too.
	b, _ := os.ReadFile(committed)
	for _, m := range regexp.MustCompile(`label_values\((\w+)`).FindAllStringSubmatch(string(b), -1) {
		used[m[1]] = true
	}
	var unknown []string
	for n := range used {
		if !isKnown(n) {
			unknown = append(unknown, n)
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		t.Errorf("series no idmint code exports: %v", unknown)
	}
	if len(used) < 30 {
		t.Errorf("only %d series found in the queries: the extraction is broken", len(used))
	}
}

// TestPromtoolChecksQueries runs Prometheus's own parser over every query
// (promtool check rules, each query a recording rule), with Grafana's
// variables replaced by values Prometheus takes.
func TestPromtoolChecksQueries(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is not installed under CI=true; scripts/test.sh installs it (Debian's prometheus package)")
		}
		t.Skip("skipping: promtool is not installed; run the whole suite with bash scripts/test.sh, which installs Debian's prometheus package")
	}
	vars := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h",
		"$job", ".+", "$instance", ".+", "$key", ".+")
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	all := exprs(t)
	for i, e := range all {
		q, _ := json.Marshal(vars.Replace(e)) // a JSON string is a YAML string
		fmt.Fprintf(&rules, "      - record: dashboard:query%d\n        expr: %s\n", i, q)
	}
	file := filepath.Join(t.TempDir(), "queries.rules.yaml")
	if err := os.WriteFile(file, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("%d rules found", len(all))) {
		t.Fatalf("promtool checked a different number of queries than the %d the dashboard has:\n%s", len(all), out)
	}
}
