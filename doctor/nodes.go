package doctor

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// NodeFacts is what Nodes learnt of one node.
type NodeFacts struct {
	URL string
	// Build is "version commit" from idmint_build_info; "" when the node
	// does not export it (or its /metrics could not be read).
	Build string
	// Keys maps each key the node exports a series of to its strategy
	// (the key and strategy labels of idmint_* series).
	Keys map[string]string
	// Workers maps each worker-ID lease resource to the worker ID held
	// (idmint_worker_id{resource}).
	Workers map[string]int64
	// Metrics reports whether /metrics could be read.
	Metrics bool
}

var (
	buildRE  = regexp.MustCompile(`^idmint_build_info\{(.*)\} `)
	keyedRE  = regexp.MustCompile(`^idmint_\w+\{(.*)\} `)
	workerRE = regexp.MustCompile(`^idmint_worker_id\{(.*)\} (\d+)$`)
	labelRE  = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)
)

func labels(s string) map[string]string {
	m := map[string]string{}
	for _, l := range labelRE.FindAllStringSubmatch(s, -1) {
		m[l[1]] = l[2]
	}
	return m
}

// Nodes asks each node (its base URL) for /healthz, /readyz and /metrics
// (with token as a bearer token when given) and reports a node that is not
// healthy or ready (nodes.health), nodes that run different builds
// (nodes.build) and nodes that serve a key with different strategies or
// not at all (nodes.keys), and nodes that hold the same worker ID for the
// same layout (nodes.worker_id).
func Nodes(ctx context.Context, hc *http.Client, urls []string, token string) []Finding {
	facts := make([]NodeFacts, len(urls))
	found := make([][]Finding, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Go(func() { facts[i], found[i] = askNode(ctx, hc, strings.TrimSuffix(u, "/"), token) })
	}
	wg.Wait()
	var fs []Finding
	for _, f := range found {
		fs = append(fs, f...)
	}
	fs = append(fs, compareNodes(facts)...)
	Sort(fs)
	return fs
}

func askNode(ctx context.Context, hc *http.Client, base, token string) (NodeFacts, []Finding) {
	nf := NodeFacts{URL: base, Keys: map[string]string{}, Workers: map[string]int64{}}
	get := func(path string, auth bool) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			return 0, "", err
		}
		if auth && token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		return resp.StatusCode, string(b), err
	}
	var fs []Finding
	health := func(path, promise string) {
		code, body, err := get(path, false)
		if err == nil && code == http.StatusOK {
			return
		}
		what := fmt.Sprintf("%s%s answered %d: %s", base, path, code, strings.TrimSpace(firstLine(body)))
		if err != nil {
			what = fmt.Sprintf("%s%s: %v", base, path, err)
		}
		fs = append(fs, Finding{Check: "nodes.health", Severity: Error, Promise: promise, Found: what,
			Fix: "read the node's log (it names the key or resource that is not ready); a node that is not ready gets no traffic from a load balancer that probes /readyz"})
	}
	health("/healthz", "the node serves")
	health("/readyz", "the node issues IDs of every key")
	code, body, err := get("/metrics", true)
	if err != nil || code != http.StatusOK {
		fs = append(fs, Finding{Check: "nodes.metrics", Severity: Info,
			Promise: "nodes can be compared (build, keys)",
			Found:   fmt.Sprintf("%s/metrics could not be read (status %d, %v)", base, code, err),
			Fix:     "name the admin listener's URL in --nodes, or give the admin token (the config's admin_token) when /metrics is behind it"})
		return nf, fs
	}
	nf.Metrics = true
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		ln := sc.Text()
		if m := buildRE.FindStringSubmatch(ln); m != nil {
			l := labels(m[1])
			nf.Build = strings.TrimSpace(l["version"] + " " + l["commit"])
		}
		if m := workerRE.FindStringSubmatch(ln); m != nil {
			if id, err := strconv.ParseInt(m[2], 10, 64); err == nil {
				nf.Workers[labels(m[1])["resource"]] = id
			}
		}
		if m := keyedRE.FindStringSubmatch(ln); m != nil {
			if l := labels(m[1]); l["key"] != "" && l["strategy"] != "" {
				nf.Keys[l["key"]] = l["strategy"]
			}
		}
	}
	return nf, fs
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// compareNodes reports the nodes whose build or keys differ from the rest.
func compareNodes(facts []NodeFacts) []Finding {
	var fs []Finding
	builds := map[string][]string{}
	for _, f := range facts {
		if f.Metrics {
			b := f.Build
			if b == "" {
				b = "(no idmint_build_info)"
			}
			builds[b] = append(builds[b], f.URL)
		}
	}
	if len(builds) > 1 {
		var parts []string
		for _, b := range keyNamesOf(builds) {
			parts = append(parts, fmt.Sprintf("%s on %s", b, strings.Join(builds[b], ", ")))
		}
		fs = append(fs, Finding{Check: "nodes.build", Severity: Warning,
			Promise: "every node behaves alike (the same build): during a rolling update this is expected, after it a node was left behind",
			Found:   "the nodes run different builds: " + strings.Join(parts, "; "),
			Fix:     "finish the rollout: upgrade (or roll back) the nodes left on the other build"})
	}
	held := map[string][]string{} // resource and worker ID -> nodes
	for _, f := range facts {
		for res, id := range f.Workers {
			k := fmt.Sprintf("worker ID %d of %s", id, res)
			held[k] = append(held[k], f.URL)
		}
	}
	for _, k := range keyNamesOf(held) {
		if us := held[k]; len(us) > 1 {
			sort.Strings(us)
			fs = append(fs, Finding{Check: "nodes.worker_id", Severity: Error,
				Promise: "no two nodes stamp snowflake IDs with the same worker ID: with the same one, they issue the same IDs in the same millisecond",
				Found:   fmt.Sprintf("%s is held by %d nodes at once: %s", k, len(us), strings.Join(us, ", ")),
				Fix:     "give the nodes one shared coordinator (etcd://, zk://, a SQL database) instead of each its own file:// or static:// worker ID; a data directory copied to a second machine carries its worker ID with it"})
		}
	}
	all := map[string]map[string][]string{} // key -> strategy -> nodes
	var withMetrics []string
	for _, f := range facts {
		if !f.Metrics {
			continue
		}
		withMetrics = append(withMetrics, f.URL)
		for k, s := range f.Keys {
			if all[k] == nil {
				all[k] = map[string][]string{}
			}
			all[k][s] = append(all[k][s], f.URL)
		}
	}
	for _, k := range keyNamesOf(all) {
		by := all[k]
		n := 0
		for _, us := range by {
			n += len(us)
		}
		if len(by) == 1 && n == len(withMetrics) {
			continue
		}
		var parts []string
		for _, s := range keyNamesOf(by) {
			us := by[s]
			sort.Strings(us)
			parts = append(parts, fmt.Sprintf("%s on %s", s, strings.Join(us, ", ")))
		}
		if n < len(withMetrics) {
			parts = append(parts, fmt.Sprintf("absent on %d node(s)", len(withMetrics)-n))
		}
		fs = append(fs, Finding{Check: "nodes.keys", Severity: Error, Key: k,
			Promise: fmt.Sprintf("a client gets IDs of key %q from one ID space whichever node answers", k),
			Found:   fmt.Sprintf("the nodes disagree on key %q: %s", k, strings.Join(parts, "; ")),
			Fix:     "give every node the same configuration (and create API keys on every node, or on a node whose key store the others share)"})
	}
	return fs
}
