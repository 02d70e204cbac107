package deploy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/server/strategies"
	"github.com/idmint/idmint/testkit/servenode"
	"github.com/idmint/idmint/testkit/testserver"
)

// ruleFile is a Prometheus rules file, the fields the tests read.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Record      string            `yaml:"record"`
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// ruleTestFile is a promtool rules test file, the fields the tests read.
type ruleTestFile struct {
	Tests []struct {
		Name  string `yaml:"name"`
		Cases []struct {
			Alert  string `yaml:"alertname"`
			Alerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func ruleFiles(t *testing.T) map[string]ruleFile {
	t.Helper()
	paths, _ := filepath.Glob("prometheus/*.rules.yaml")
	if len(paths) == 0 {
		t.Fatal("no rules files in deploy/prometheus")
	}
	out := map[string]ruleFile{}
	for _, p := range paths {
		var f ruleFile
		readYAML(t, p, &f)
		out[p] = f
	}
	return out
}

// promtool returns promtool's path, or skips the test when it is missing
// (fails under CI=true). scripts/test.sh installs it, as root (Debian's
// prometheus package).
func promtool(t *testing.T) string {
	t.Helper()
	p := lookTool("promtool", nil)
	if p == "" {
		msg := "promtool is not installed (Debian package prometheus); run the whole suite with scripts/test.sh (as root), which installs it"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

// TestPrometheusRules: promtool accepts every rules file and passes its
// unit tests.
func TestPrometheusRules(t *testing.T) {
	pt := promtool(t)
	files, _ := filepath.Glob("prometheus/*.rules.yaml")
	tests, _ := filepath.Glob("prometheus/*.rules.test.yaml")
	var rules []string
	for _, f := range files {
		if !strings.HasSuffix(f, ".test.yaml") {
			rules = append(rules, filepath.Base(f))
		}
	}
	if len(tests) == 0 {
		t.Fatal("no promtool test files (prometheus/*.rules.test.yaml)")
	}
	runTool(t, "prometheus", nil, pt, append([]string{"check", "rules"}, rules...)...)
	for i := range tests {
		tests[i] = filepath.Base(tests[i])
	}
	runTool(t, "prometheus", nil, pt, append([]string{"test", "rules"}, tests...)...)
}

// TestAlertsComplete: every alert has a severity, a summary, a description
// and a runbook_url naming a heading of docs/operations.md, and the
// promtool tests see it fire once and stay quiet once.
func TestAlertsComplete(t *testing.T) {
	ops, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	headings := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#+ (.*)$`).FindAllStringSubmatch(string(ops), -1) {
		headings[githubAnchor(m[1])] = true
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	tests, _ := filepath.Glob("prometheus/*.rules.test.yaml")
	for _, p := range tests {
		var f ruleTestFile
		readYAML(t, p, &f)
		for _, tc := range f.Tests {
			for _, c := range tc.Cases {
				if len(c.Alerts) > 0 {
					fires[c.Alert] = true
				} else {
					quiet[c.Alert] = true
				}
			}
		}
	}
	const runbooks = "https://github.com/idmint/idmint/blob/main/docs/operations.md#"
	n := 0
	for path, f := range ruleFiles(t) {
		for _, g := range f.Groups {
			for _, r := range g.Rules {
				if r.Alert == "" {
					continue
				}
				n++
				where := path + ": alert " + r.Alert
				if s := r.Labels["severity"]; s != "critical" && s != "warning" {
					t.Errorf("%s: severity %q, want critical or warning", where, s)
				}
				for _, a := range []string{"summary", "description", "runbook_url"} {
					if strings.TrimSpace(r.Annotations[a]) == "" {
						t.Errorf("%s: no %s annotation", where, a)
					}
				}
				if u := r.Annotations["runbook_url"]; !strings.HasPrefix(u, runbooks) || !headings[strings.TrimPrefix(u, runbooks)] {
					t.Errorf("%s: runbook_url %q is not %s<a heading of docs/operations.md>", where, u, runbooks)
				}
				if !fires[r.Alert] || !quiet[r.Alert] {
					t.Errorf("%s: the promtool tests must see it fire (%v) and stay quiet (%v)", where, fires[r.Alert], quiet[r.Alert])
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no alerts in deploy/prometheus")
	}
}

// githubAnchor is the id GitHub gives a heading.
func githubAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// A use of a series name in a rule or a dashboard.
type nameUse struct {
	name, where string
}

var (
	// PromQL string literals: label values, regexes, durations in quotes.
	promStringRE = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	// An idmint series (idmint_...) or recording rule (idmint:...) name.
	promNameRE = regexp.MustCompile(`(?:^|[^A-Za-z0-9_:$])(idmint[_:][A-Za-z0-9_:]*)`)
)

// seriesNames returns the idmint names a PromQL expression uses.
func seriesNames(expr string) []string {
	var out []string
	for _, m := range promNameRE.FindAllStringSubmatch(promStringRE.ReplaceAllString(expr, `""`), -1) {
		out = append(out, m[1])
	}
	return out
}

// ruleUses returns the names every rules file's expressions use, and the
// names its recording rules define.
func ruleUses(files map[string]ruleFile) (uses []nameUse, recorded map[string]bool) {
	recorded = map[string]bool{}
	for path, f := range files {
		for _, g := range f.Groups {
			for _, r := range g.Rules {
				what := "alert " + r.Alert
				if r.Record != "" {
					recorded[r.Record] = true
					what = "record " + r.Record
				}
				for _, n := range seriesNames(r.Expr) {
					uses = append(uses, nameUse{n, path + ": " + what})
				}
			}
		}
	}
	return uses, recorded
}

// dashboardUses returns the names the queries of every Grafana dashboard
// in deploy/grafana use: each panel target's expr and each template
// variable's query.
func dashboardUses(t *testing.T) []nameUse {
	t.Helper()
	paths, _ := filepath.Glob("grafana/*.json")
	var uses []nameUse
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		walkQueries(v, "", func(at, q string) {
			for _, n := range seriesNames(q) {
				uses = append(uses, nameUse{n, p + ": " + at})
			}
		})
	}
	return uses
}

// walkQueries calls f with every string under a key "expr", "query" or
// "definition" in a dashboard, and the JSON path to it.
func walkQueries(v any, at string, f func(at, q string)) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if s, ok := v[k].(string); ok && (k == "expr" || k == "query" || k == "definition") {
				f(at+"."+k, s)
				continue
			}
			walkQueries(v[k], at+"."+k, f)
		}
	case []any:
		for i, e := range v {
			walkQueries(e, at+"["+strconv.Itoa(i)+"]", f)
		}
	}
}

// unknownNames returns a line for every use of a name that is neither
// exported (known) nor recorded by a rule, sorted. A name beginning with
// one of unchecked (the prefix of a strategy the node could not serve
// here) is left out.
func unknownNames(uses []nameUse, known, recorded map[string]bool, unchecked []string) []string {
	var out []string
	for _, u := range uses {
		if known[u.name] || recorded[u.name] {
			continue
		}
		if slices.ContainsFunc(unchecked, func(p string) bool { return strings.HasPrefix(u.name, p) }) {
			continue
		}
		out = append(out, fmt.Sprintf("%s (in %s)", u.name, u.where))
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// exposedNames returns the series names of a /metrics page: each family
// of its # TYPE lines, histograms and summaries with their _bucket, _sum
// and _count series.
func exposedNames(r io.Reader) (map[string]bool, error) {
	names := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || f[0] != "#" || f[1] != "TYPE" {
			continue
		}
		names[f[2]] = true
		switch f[3] {
		case "histogram":
			names[f[2]+"_bucket"] = true
			fallthrough
		case "summary":
			names[f[2]+"_sum"] = true
			names[f[2]+"_count"] = true
		}
	}
	return names, sc.Err()
}

// TestMetricNameCheck: the check below finds a misspelt name, a recording
// rule nobody defines, and one in a dashboard's query, and ignores names in
// label values.
func TestMetricNameCheck(t *testing.T) {
	known, err := exposedNames(strings.NewReader("# HELP idmint_lease_held x\n# TYPE idmint_lease_held gauge\nidmint_lease_held 1\n" +
		"# TYPE idmint_http_request_duration_seconds histogram\n"))
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.Unmarshal([]byte(`groups:
  - name: g
    rules:
      - record: idmint:held:min
        expr: min(idmint_lease_held)
      - alert: A
        expr: idmint_lease_hold == 0 or idmint:held:max == 0 or idmint_lease_held{key="idmint_nothing"} == 0
      - alert: B
        expr: histogram_quantile(0.99, rate(idmint_http_request_duration_seconds_bucket[5m])) > idmint_ticket_servers
`), &f); err != nil {
		t.Fatal(err)
	}
	uses, recorded := ruleUses(map[string]ruleFile{"r.yaml": f})
	var dash any
	json.Unmarshal([]byte(`{"panels":[{"targets":[{"expr":"rate(idmint_ids_issued_totl[5m])"}]}],
		"templating":{"list":[{"query":{"query":"label_values(idmint_lease_held, resource)"}}]}}`), &dash)
	walkQueries(dash, "", func(at, q string) {
		for _, n := range seriesNames(q) {
			uses = append(uses, nameUse{n, "d.json: " + at})
		}
	})
	got := unknownNames(uses, known, recorded, []string{"idmint_ticket_"})
	want := []string{
		"idmint:held:max (in r.yaml: alert A)",
		"idmint_ids_issued_totl (in d.json: .panels[0].targets[0].expr)",
		"idmint_lease_hold (in r.yaml: alert A)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("unknown names:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestMetricNames starts a real node with a key of every strategy the
// server registers, scrapes its /metrics on the admin listener, and fails
// on every idmint series name a rule in deploy/prometheus or a dashboard
// in deploy/grafana uses that the node does not export. Ticket and redis
// keys need their servers (IDMINT_TEST_MYSQL, IDMINT_TEST_REDIS; under
// CI=true a missing one fails): without one, names of that strategy
// (idmint_ticket_*, idmint_redis_*) go unchecked, and the test says so.
func TestMetricNames(t *testing.T) {
	bin := idmint(t)
	dir := t.TempDir()
	keys := map[string]string{
		"sf":   "{strategy: snowflake}",
		"js":   `{strategy: snowflake, layout: jssafe, options: {worker_limit: "16"}}`,
		"seg":  "{strategy: segment, step: 100}",
		"mono": "{strategy: monotonic}",
		"mt":   "{strategy: monotonic, options: {form: timestamp}}",
		"ord":  `{strategy: ordernum, options: {format: "length=16", key: "000102030405060708090a0b0c0d0e0f"}}`,
		"u4":   `{strategy: uuid, options: {version: "4"}}`,
		"u7":   "{strategy: uuid}",
		"ulid": "{strategy: ulid}", "ksuid": "{strategy: ksuid}", "oid": "{strategy: objectid}", "xid": "{strategy: xid}",
		"tr":   "{strategy: timeid-random}",
		"f128": `{strategy: flake128, options: {worker: "1"}}`,
	}
	stores := map[string]string{}
	var unchecked []string
	if os.Getenv("IDMINT_TEST_MYSQL") != "" || os.Getenv("CI") == "true" {
		stores["tick"] = mysqlStoreURL(t, testserver.Database(t, testserver.MariaDB))
		keys["tk"] = "{strategy: ticket, store: tick}"
	} else {
		unchecked = append(unchecked, "idmint_ticket_")
		t.Log("IDMINT_TEST_MYSQL is not set: no ticket key, idmint_ticket_* names go unchecked (scripts/test.sh starts MariaDB)")
	}
	if os.Getenv("IDMINT_TEST_REDIS") != "" || os.Getenv("CI") == "true" {
		keys["rd"] = fmt.Sprintf("{strategy: redis, options: {redis: %q, counter_key: %q}}",
			"redis://"+testserver.Addr(t, testserver.Redis)+"/0", testserver.Prefix(t)+":rd")
	} else {
		unchecked = append(unchecked, "idmint_redis_")
		t.Log("IDMINT_TEST_REDIS is not set: no redis key, idmint_redis_* names go unchecked (scripts/test.sh starts Redis)")
	}

	// Every strategy the server registers has a key here (or is one the
	// machine lacks a server for).
	reg := server.NewRegistry()
	if err := strategies.Register(reg); err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, k := range keys {
		served[regexp.MustCompile(`strategy: ([a-z0-9-]+)`).FindStringSubmatch(k)[1]] = true
	}
	for _, s := range reg.Strategies() {
		if !served[s] && !slices.Contains(unchecked, "idmint_"+s+"_") {
			t.Errorf("strategy %s has no key in TestMetricNames: add one, so the names it exports are checked", s)
		}
	}

	adminPort := testserver.FreePort(t)
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "admin_listen: 127.0.0.1:%d\n", adminPort)
	// A coordinator with a shared pool, so the node exports its free
	// worker IDs.
	fmt.Fprintf(&cfg, "coordinator: sqlite://%s\n", filepath.Join(dir, "workers.db"))
	// A region of one (which changes no ID), so the node exports
	// idmint_region_info.
	cfg.WriteString("region: {name: dc1, index: 0, count: 1}\n")
	if len(stores) > 0 {
		cfg.WriteString("stores:\n")
		for n, u := range stores {
			fmt.Fprintf(&cfg, "  %s: %q\n", n, u)
		}
	}
	cfg.WriteString("keys:\n")
	names := make([]string, 0, len(keys))
	for n := range keys {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&cfg, "  %s: %s\n", n, keys[n])
	}
	cfgPath := filepath.Join(dir, "idmint.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	lf, err := os.Create(filepath.Join(dir, "node.log"))
	if err != nil {
		t.Fatal(err)
	}
	nd := &servenode.Node{Name: "node", Bin: bin, Config: cfgPath, Data: filepath.Join(dir, "data"), Port: testserver.FreePort(t), Log: lf}
	t.Cleanup(func() { nd.Cleanup(t) })
	nd.Start(t)

	hc := &http.Client{Timeout: 10 * time.Second}
	for _, n := range names {
		resp, err := hc.Get(nd.URL() + "/v1/keys/" + n + "/ids?count=3")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("key %s: %d %s", n, resp.StatusCode, body)
		}
	}
	var known map[string]bool
	// The worker pool is counted in the background, at once after start.
	testserver.Eventually(t, "the node to export its worker pool", 30*time.Second, func() bool {
		resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", adminPort))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("admin /metrics: %d", resp.StatusCode)
		}
		known, err = exposedNames(resp.Body)
		return err == nil && known["idmint_worker_ids_free"]
	})
	for _, want := range []string{"idmint_layout_end_timestamp_seconds", "idmint_worker_ids", "idmint_counter_headroom", "idmint_counter_ceiling", "idmint_ordernum_capacity_used_ratio", "idmint_region_info", "idmint_doctor_findings"} {
		if !known[want] {
			t.Errorf("the node does not export %s", want)
		}
	}

	uses, recorded := ruleUses(ruleFiles(t))
	uses = append(uses, dashboardUses(t)...)
	if len(uses) == 0 {
		t.Fatal("no series names found in the rules and dashboards")
	}
	for _, u := range unknownNames(uses, known, recorded, unchecked) {
		t.Errorf("unknown series %s", u)
	}
	if len(unchecked) > 0 {
		t.Logf("unchecked prefixes: %v", unchecked)
	}
}

// mysqlStoreURL turns testserver's go-sql-driver DSN into the mysql:// URL
// a config's stores take.
func mysqlStoreURL(t *testing.T, dsn string) string {
	t.Helper()
	m := regexp.MustCompile(`^([^@]*)@tcp\(([^)]*)\)/([^?]*)(\?.*)?$`).FindStringSubmatch(dsn)
	if m == nil {
		t.Fatalf("unexpected MariaDB DSN form %q", dsn)
	}
	return "mysql://" + m[1] + "@" + m[2] + "/" + m[3] + m[4]
}
