package doctor

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/server/strategies"
	"github.com/idmint/idmint/snowflake"
	"github.com/idmint/idmint/sqldb"
	"github.com/idmint/idmint/worker"
)

// Check runs the cheap checks on one configuration (after SetDefaults;
// validate it first: these checks assume every field reads) and returns
// what they found, sorted. It does no I/O.
func Check(cfg *server.Config, o Options) []Finding {
	var fs []Finding
	for _, c := range configChecks {
		fs = append(fs, c(cfg, o)...)
	}
	Sort(fs)
	return fs
}

// configChecks are the checks of one configuration, in no particular order.
var configChecks = []func(*server.Config, Options) []Finding{
	checkWitness,
	checkNodeLocal,
	checkTokens,
	checkLayoutEnd,
	checkWorkerPool,
	checkUnfenced,
	checkRegionRegistry,
}

// source is where a key's numbers come from.
type source struct {
	// shown names the source for people (passwords redacted).
	shown string
	// id identifies the number line for comparisons between sites: two
	// keys of one name with equal ids share one line.
	id string
	// shared: several nodes can draw from it (a network server).
	shared bool
	// inDataDir: it lives in the node's data directory.
	inDataDir bool
	// hosts are the network servers it lives on (host:port).
	hosts []string
}

// keySource returns the source of a key whose numbers come from a store
// (segment, ordernum, ticket, redis, monotonic), and false for other keys.
func keySource(cfg *server.Config, k server.KeyConfig) (source, bool) {
	switch k.Strategy {
	case "segment", "ordernum":
		u := cfg.Stores[k.Store]
		return urlSource(cfg, u, "store "+strconv.Quote(k.Store)+" ("+sqldb.Redact(u)+")"), true
	case "ticket":
		var urls, shown, hosts []string
		entries := []string{k.Store}
		if v, ok := k.Options["servers"]; ok {
			entries = strings.Split(v, ",")
		}
		for _, e := range entries {
			u := resolve(cfg, strings.TrimSpace(e))
			urls = append(urls, u)
			shown = append(shown, sqldb.Redact(u))
			hosts = append(hosts, urlHosts(u)...)
		}
		sort.Strings(urls)
		id := "ticket:" + strings.Join(urls, ",") + "|offsets=" + k.Options["offsets"] + "|step=" + k.Options["step"]
		return source{shown: "ticket servers " + strings.Join(shown, ", "), id: id, shared: true, hosts: hosts}, true
	case "redis":
		u := resolve(cfg, k.Options["redis"])
		return source{shown: "Redis " + sqldb.Redact(u), id: "redis:" + u + "|" + k.Options["counter_key"], shared: true, hosts: urlHosts(u)}, true
	case "monotonic":
		hosts, prefix, err := monotonicEtcd(cfg, k)
		if err != nil || len(hosts) == 0 {
			dir := absDir(cfg.DataDir)
			return source{shown: "its bound file in the data directory " + dir, id: "file:" + dir, inDataDir: true}, true
		}
		return source{shown: "etcd " + strings.Join(hosts, ","), id: "etcd:" + strings.Join(sorted(hosts), ",") + prefix, shared: true, hosts: hosts}, true
	}
	return source{}, false
}

// monotonicEtcd is where a monotonic key keeps its bound (as the
// monotonic strategy reads its options): its own options.etcd, or the
// coordinator's etcd; no hosts: the data directory.
func monotonicEtcd(cfg *server.Config, k server.KeyConfig) ([]string, string, error) {
	if v, ok := k.Options["etcd"]; ok {
		if v == "none" {
			return nil, "", nil
		}
		return strings.Split(v, ","), strategies.MonotonicOptionPrefix, nil
	}
	hosts, prefix := strategies.MonotonicCoordinatorPrefix(cfg.Coordinator)
	return hosts, prefix, nil
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

// resolve is a stores: name's URL, or v itself.
func resolve(cfg *server.Config, v string) string {
	if u, ok := cfg.Stores[v]; ok {
		return u
	}
	return v
}

// urlSource describes a segment store URL.
func urlSource(cfg *server.Config, u, shown string) source {
	s := source{shown: shown, id: "store:" + u}
	if fileStore(u) {
		p := filePath(u)
		s.id = "store:file:" + p
		s.inDataDir = within(absDir(cfg.DataDir), p)
		return s
	}
	s.shared = u != ""
	s.hosts = urlHosts(u)
	return s
}

// fileStore reports whether a store URL names a file on this node.
func fileStore(u string) bool {
	scheme, _, _ := strings.Cut(u, "://")
	switch strings.ToLower(scheme) {
	case "sqlite", "sqlite3", "file":
		return true
	}
	return false
}

// filePath is the file a sqlite:// URL names, absolute.
func filePath(u string) string {
	_, rest, _ := strings.Cut(u, "://")
	rest, _, _ = strings.Cut(rest, "?")
	return absDir(rest)
}

func absDir(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Clean(p)
}

// within reports whether path p lies in directory dir.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// urlHosts returns the host:port pairs a network URL names (etcd and zk
// URLs may list several), lower-cased; nil for anything else.
func urlHosts(u string) []string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		if i := strings.Index(u, "tcp("); i >= 0 { // go-sql-driver DSN
			if j := strings.IndexByte(u[i:], ')'); j > 0 {
				return []string{strings.ToLower(u[i+4 : i+j])}
			}
		}
		return nil
	}
	scheme = strings.ToLower(scheme)
	def := map[string]string{"postgres": "5432", "postgresql": "5432", "mysql": "3306", "redis": "6379", "rediss": "6379", "etcd": "2379", "zk": "2181", "zookeeper": "2181"}[scheme]
	if def == "" {
		return nil
	}
	auth := rest
	if i := strings.IndexAny(auth, "/?#"); i >= 0 {
		auth = auth[:i]
	}
	if i := strings.LastIndexByte(auth, '@'); i >= 0 {
		auth = auth[i+1:]
	}
	if strings.HasPrefix(auth, "tcp(") && strings.HasSuffix(auth, ")") {
		auth = auth[4 : len(auth)-1]
	}
	var out []string
	for _, h := range strings.Split(auth, ",") {
		if h == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), def)
		}
		out = append(out, strings.ToLower(h))
	}
	return out
}

// clusterWitness is the witness a node keeps besides its data directory,
// as the server resolves it: witness:, or the coordinator when it is
// etcd:// or zk://; "" when there is none.
func clusterWitness(cfg *server.Config) string {
	src := cfg.Witness
	if src == "" {
		if kind, _ := cfg.ClusterCoordinator(); kind == "etcd" || kind == "zk" || kind == "zookeeper" {
			src = cfg.Coordinator
		}
	}
	if src == "none" {
		return ""
	}
	return src
}

// severalNodes reports whether the configuration implies several nodes,
// and says why.
func severalNodes(cfg *server.Config, o Options) (string, bool) {
	if kind, ok := cfg.ClusterCoordinator(); ok {
		return fmt.Sprintf("the coordinator (%s) implies several nodes", kind), true
	}
	if o.Nodes > 1 {
		return fmt.Sprintf("%d nodes were named", o.Nodes), true
	}
	return "", false
}

func keyNames(cfg *server.Config) []string {
	names := make([]string, 0, len(cfg.Keys))
	for n := range cfg.Keys {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// checkWitness: witness.missing and witness.same_domain.
func checkWitness(cfg *server.Config, o Options) []Finding {
	var fs []Finding
	cw := clusterWitness(cfg)
	why, several := severalNodes(cfg, o)
	cwHosts := map[string]bool{}
	for _, h := range urlHosts(cw) {
		cwHosts[h] = true
	}
	for _, name := range keyNames(cfg) {
		k := cfg.Keys[name]
		src, ok := keySource(cfg, k)
		if !ok {
			continue
		}
		switch {
		case src.shared && cw == "":
			// One node alone repeats nothing: its data directory remembers
			// what it issued. Other nodes may share the store unseen.
			sev, found := Info, fmt.Sprintf("key %q draws its numbers from %s, which other nodes can share, and the node keeps no witness outside it (witness: %s); safe while this node is the store's only user", name, src.shown, witnessWords(cfg))
			if several {
				sev, found = Error, fmt.Sprintf("key %q draws its numbers from %s and %s, but the node keeps no witness outside the store (witness: %s)", name, src.shown, why, witnessWords(cfg))
			}
			fs = append(fs, Finding{Check: "witness.missing", Severity: sev, Key: name,
				Promise: fmt.Sprintf("IDs of key %q may repeat after its store fails over to a lagging replica or is restored from a backup: each node remembers only what it issued itself, so one node can issue numbers another node issued", name),
				Found:   found,
				Fix:     "set witness: to an etcd://, zk:// or postgres:///mysql:// URL of a server other than the store (an etcd:// or zk:// coordinator is the default witness)"})
		case src.inDataDir && cw == "":
			// On one node (the zero-config default) this is how the node
			// is meant to start, so it is said, not warned about at every
			// start; beside other nodes it is a warning.
			sev := Info
			if several {
				sev = Warning
			}
			fs = append(fs, Finding{Check: "witness.same_domain", Severity: sev, Key: name,
				Promise: fmt.Sprintf("IDs of key %q repeat if the data directory %s is restored from a backup or snapshot: its numbers (%s) and the witness's marks both live in it, so both go back together", name, absDir(cfg.DataDir), src.shown),
				Found:   fmt.Sprintf("key %q keeps its numbers in the data directory and witness is %s", name, witnessWords(cfg)),
				Fix:     "set witness: to an etcd://, zk:// or database URL on another machine (then a restored directory is raised above the marks), or never restore the data directory: start from an empty one with options.floor above the highest ID issued"})
		case cw != "":
			var same []string
			for _, h := range src.hosts {
				if cwHosts[h] {
					same = append(same, h)
				}
			}
			if len(same) > 0 {
				fs = append(fs, Finding{Check: "witness.same_domain", Severity: Warning, Key: name,
					Promise: fmt.Sprintf("IDs of key %q may repeat when the server at %s fails over or is restored: the key's numbers and the witness's marks live on the same server, so both go back together", name, strings.Join(same, ", ")),
					Found:   fmt.Sprintf("key %q draws from %s and the witness is %s, on the same server", name, src.shown, sqldb.Redact(cw)),
					Fix:     "put the witness on servers the key's store does not use (another etcd, ZooKeeper or database cluster)"})
			}
		}
	}
	return fs
}

// witnessWords describes the witness setting for a finding.
func witnessWords(cfg *server.Config) string {
	switch cfg.Witness {
	case "none":
		return `"none": the data directory only`
	case "":
		return fmt.Sprintf("not set, and the coordinator %s is no etcd:// or zk://, so the data directory only", sqldb.Redact(cfg.Coordinator))
	}
	return sqldb.Redact(cfg.Witness)
}

// checkNodeLocal: node_local.cluster.
func checkNodeLocal(cfg *server.Config, o Options) []Finding {
	why, several := severalNodes(cfg, o)
	if !several {
		return nil
	}
	var fs []Finding
	for _, name := range keyNames(cfg) {
		k := cfg.Keys[name]
		if !k.NodeLocal {
			continue
		}
		where := "this node"
		if src, ok := keySource(cfg, k); ok && !src.shared {
			where = src.shown
		}
		fs = append(fs, Finding{Check: "node_local.cluster", Severity: Warning, Key: name,
			Promise: fmt.Sprintf("IDs of key %q repeat across nodes: each node numbers on its own (%s), so two nodes behind one load balancer hand out the same IDs", name, where),
			Found:   fmt.Sprintf("key %q has node_local: true and %s", name, why),
			Fix:     "move the key to a shared store (stores: a PostgreSQL or MySQL URL, store: on the key) or give monotonic keys an etcd; keep node_local only if every client talks to one node and the IDs of different nodes never meet"})
	}
	return fs
}

// checkTokens: tokens.admin and tokens.keys.
func checkTokens(cfg *server.Config, o Options) []Finding {
	var fs []Finding
	var open []string
	for _, l := range []struct{ field, addr string }{{"listen", cfg.Listen}, {"grpc_listen", cfg.GRPCListen}, {"admin_listen", cfg.AdminListen}} {
		if l.addr != "" && !loopback(l.addr) {
			open = append(open, l.field+" "+l.addr)
		}
	}
	if len(open) == 0 {
		return nil
	}
	if cfg.AdminToken == "" {
		fs = append(fs, Finding{Check: "tokens.admin", Severity: Error,
			Promise: "only the operator administers keys: without admin_token, anyone who reaches a non-loopback listener could delete a key and create it again below the IDs it issued (the node refuses to start this way)",
			Found:   "admin_token is empty and the node listens on " + strings.Join(open, ", "),
			Fix:     "set admin_token (at least 16 characters; IDMINT_ADMIN_TOKEN) or listen on 127.0.0.1 only"})
	}
	public := !loopback(cfg.Listen) || (cfg.GRPCListen != "" && !loopback(cfg.GRPCListen))
	if !public {
		return fs
	}
	var bare []string
	for _, name := range keyNames(cfg) {
		if len(cfg.Keys[name].Tokens) == 0 {
			bare = append(bare, name)
		}
	}
	if len(bare) > 0 {
		fs = append(fs, Finding{Check: "tokens.keys", Severity: Warning,
			Promise: "only your services draw IDs: a key without tokens serves anyone who reaches the listener, who can use up its rate limit or its number line",
			Found:   fmt.Sprintf("%d key(s) without tokens on a non-loopback listener: %s", len(bare), shownList(bare, 10)),
			Fix:     "give each key tokens: (at least 16 characters; clients send Authorization: Bearer TOKEN), or keep the listener on a network only your services reach"})
	}
	return fs
}

// loopback reports whether host:port names loopback interfaces only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// layoutOf resolves a snowflake key's layout as the server does: a
// layouts: entry, a built-in name, or the default.
func layoutOf(cfg *server.Config, k server.KeyConfig) (snowflake.Layout, string, error) {
	name := k.Layout
	if name == "" {
		name = strategies.DefaultLayout
	}
	if spec, ok := cfg.Layouts[name]; ok {
		l, err := snowflake.ParseLayout(spec)
		return l, name, err
	}
	if l, ok := snowflake.Lookup(name); ok {
		return l, name, nil
	}
	return snowflake.Layout{}, name, fmt.Errorf("doctor: unknown layout %q", name)
}

// snowflakeKey is a snowflake key of a config with its layout resolved.
type snowflakeKey struct {
	name       string
	k          server.KeyConfig
	l          snowflake.Layout
	layoutName string
}

// snowflakeKeys lists the config's snowflake keys by name with their
// layouts; a key whose layout does not resolve is left out (config.invalid
// reports it).
func snowflakeKeys(cfg *server.Config) []snowflakeKey {
	var out []snowflakeKey
	for _, name := range keyNames(cfg) {
		k := cfg.Keys[name]
		if k.Strategy != "snowflake" {
			continue
		}
		l, lname, err := layoutOf(cfg, k)
		if err != nil {
			continue
		}
		out = append(out, snowflakeKey{name: name, k: k, l: l, layoutName: lname})
	}
	return out
}

// checkLayoutEnd: layout.end.
func checkLayoutEnd(cfg *server.Config, o Options) []Finding {
	now := o.now()
	var fs []Finding
	for _, sk := range snowflakeKeys(cfg) {
		name, l, lname := sk.name, sk.l, sk.layoutName
		left := l.Remaining(now)
		sev := Info
		switch {
		case left < LayoutErrorWithin:
			sev = Error
		case left < LayoutWarnWithin:
			sev = Warning
		default:
			continue
		}
		end := l.End().UTC()
		fs = append(fs, Finding{Check: "layout.end", Severity: sev, Key: name,
			Promise: fmt.Sprintf("key %q issues IDs until its layout runs out on %s; after that it refuses (uid-generator's default layout ran out on 2024-11-20 and its IDs went negative)", name, end.Format(time.DateOnly)),
			Found:   fmt.Sprintf("layout %s of key %q ends %s, in %d days", lname, name, end.Format(time.RFC3339), int(left.Hours()/24)),
			Fix:     "move the key to a layout with more time bits or a later epoch (a new key, or options.floor above the last ID so the new IDs sort after the old), before the end date"})
	}
	return fs
}

// workerPool is the worker IDs a snowflake key's node may take: the
// worker field's range, narrowed by worker_limit and by a k8s
// coordinator's offset.
//
// With regions that split the worker IDs (regionWorkers) the coordinator
// leases 0..size-1 of the region's slice: this is that range, and
// stampedWorkers the worker field values the IDs carry.
func workerPool(cfg *server.Config, k server.KeyConfig, l snowflake.Layout) (lo, hi int64, ok bool) {
	wf, bits := workerField(l)
	if wf == "" {
		return 0, 0, false
	}
	hi = int64(1)<<bits - 1
	if v, err := strconv.ParseInt(k.Options["worker_limit"], 10, 64); err == nil && v > 0 && v-1 < hi {
		hi = v - 1
	}
	if _, size, split := regionWorkers(cfg, k, l); split {
		hi = size - 1
	}
	scheme, rest, _ := strings.Cut(cfg.Coordinator, "://")
	switch strings.ToLower(scheme) {
	case "static":
		id, err := strconv.ParseInt(strings.TrimSuffix(strings.SplitN(rest, "?", 2)[0], "/"), 10, 64)
		if err == nil {
			return id, id, true
		}
	case "k8s":
		_, query, _ := strings.Cut(rest, "?")
		if q, err := url.ParseQuery(query); err == nil {
			if off, err := strconv.ParseInt(q.Get("offset"), 10, 64); err == nil {
				lo = off
			}
		}
	}
	return lo, hi, true
}

// checkWorkerPool: workers.pool.
func checkWorkerPool(cfg *server.Config, o Options) []Finding {
	kind, cluster := cfg.ClusterCoordinator()
	if !cluster {
		return nil
	}
	var fs []Finding
	for _, sk := range snowflakeKeys(cfg) {
		name, k, l := sk.name, sk.k, sk.l
		lo, hi, ok := workerPool(cfg, k, l)
		if !ok {
			continue
		}
		size := hi - lo + 1
		sev, found := Info, ""
		switch {
		case o.Nodes > 0 && size < int64(o.Nodes):
			sev, found = Error, fmt.Sprintf("key %q has %d worker ID(s) (%d..%d) for %d nodes", name, size, lo, hi, o.Nodes)
		case o.Nodes > 0 && size < 2*int64(o.Nodes):
			sev, found = Warning, fmt.Sprintf("key %q has %d worker ID(s) (%d..%d) for %d nodes: no spare for each node to be replaced while its old lease lives", name, size, lo, hi, o.Nodes)
		case o.Nodes == 0 && size < SmallPool:
			sev, found = Warning, fmt.Sprintf("key %q has %d worker ID(s) (%d..%d) under a %s coordinator", name, size, lo, hi, kind)
		default:
			continue
		}
		fs = append(fs, Finding{Check: "workers.pool", Severity: sev, Key: name,
			Promise: fmt.Sprintf("every node serving key %q gets a worker ID: a node that finds none free does not serve the key (it never shares one)", name),
			Found:   found,
			Fix:     "raise options.worker_limit, or use a layout with more worker bits; a rolling update needs a free ID for each node replaced at once until the old lease expires"})
	}
	return fs
}

// etcdPlace is where an etcd:// coordinator keeps worker IDs (for the
// sites check); "" for other coordinators.
func etcdPlace(coord string) string {
	eps, prefix, name, err := worker.EtcdURL(coord)
	if err != nil {
		return ""
	}
	return strings.Join(sorted(eps), ",") + prefix + "/" + name
}

// checkUnfenced: workers.unfenced. A worker ID derived from where the node
// runs (a StatefulSet ordinal, an IP or MAC address) is held under no
// lease: nothing stops a second process that derives the same one.
func checkUnfenced(cfg *server.Config, o Options) []Finding {
	scheme, _, _ := strings.Cut(cfg.Coordinator, "://")
	var how string
	sev := Warning
	switch strings.ToLower(scheme) {
	case "k8s":
		// The shipped StatefulSet and the Helm chart's ordinal mode run
		// this way: the pod's volume (ReadWriteOnce) and the data
		// directory's lock stand in for a lease in all but the forced
		// case, so it is said, not warned about at every start.
		sev = Info
		how = "the pod's StatefulSet ordinal: two pods with one ordinal run at once after a forced delete (kubectl delete pod --force) or a node lost for good"
	case "ip":
		how = "the low 16 bits of the node's IPv4 address (truncated to the worker field): nodes in different subnets, or two processes on one host, share it"
	case "mac":
		how = "the node's MAC address (truncated to the worker field): cloned VMs and containers share one"
	default:
		return nil
	}
	var keys []string
	for _, name := range keyNames(cfg) {
		if cfg.Keys[name].Strategy == "snowflake" {
			keys = append(keys, name)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	return []Finding{{Check: "workers.unfenced", Severity: sev,
		Promise: fmt.Sprintf("IDs of snowflake key(s) %s never repeat only while no two processes derive the same worker ID: nothing leases it, so nothing stops the second", shownList(keys, 5)),
		Found:   fmt.Sprintf("the coordinator %s derives the worker ID from %s", sqldb.Redact(cfg.Coordinator), how),
		Fix:     "use a coordinator that leases worker IDs with a fencing generation (etcd://, zk://, or a SQL database): a second holder waits for the first's lease to end"}}
}
