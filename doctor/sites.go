package doctor

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/sqldb"
)

// Site is one configuration of a deployment: a site (datacenter, region)
// whose nodes share that configuration. Name is what findings call it
// (the file name).
type Site struct {
	Name   string
	Config *server.Config
}

// SiteCheck compares two sites that serve the same keys and reports where
// their ID spaces overlap. Each check looks at one way two sites keep
// apart (worker IDs and node fields, number lines, ...): another way of
// keeping them apart is one more SiteCheck in SiteChecks.
type SiteCheck func(a, b Site) []Finding

// SiteChecks are the checks CheckSites runs on every pair of sites.
var SiteChecks = []SiteCheck{checkSiteWorkers, checkSiteNumbers, checkSiteRegions}

// CheckSites runs Check on every site and SiteChecks on every pair of them,
// and returns every finding, sorted. With one site it is Check with the
// site's name on each finding.
func CheckSites(sites []Site, o Options) []Finding {
	var fs []Finding
	for _, s := range sites {
		for _, f := range Check(s.Config, o) {
			if len(sites) > 1 {
				f.Site = s.Name
			}
			fs = append(fs, f)
		}
	}
	for i := range sites {
		for j := i + 1; j < len(sites); j++ {
			for _, c := range SiteChecks {
				fs = append(fs, c(sites[i], sites[j])...)
			}
		}
	}
	Sort(fs)
	return fs
}

// commonKeys returns the key names both sites serve, sorted.
func commonKeys(a, b Site) []string {
	var out []string
	for _, name := range keyNames(a.Config) {
		if _, ok := b.Config.Keys[name]; ok {
			out = append(out, name)
		}
	}
	return out
}

func pairName(a, b Site) string { return a.Name + " + " + b.Name }

// samePool reports whether two sites take worker IDs from one
// coordinator (one pool: they never hold the same ID at once).
func samePool(a, b *server.Config) bool {
	if p := etcdPlace(a.Coordinator); p != "" {
		return p == etcdPlace(b.Coordinator)
	}
	kind, cluster := a.ClusterCoordinator()
	return cluster && kind != "k8s" && a.Coordinator == b.Coordinator
}

// checkSiteWorkers: sites.worker_overlap. A snowflake key's IDs differ
// between sites only where some bit below the time differs: another
// layout, another value of a node field (datacenter), or worker IDs from
// disjoint ranges or one shared coordinator.
func checkSiteWorkers(a, b Site) []Finding {
	var fs []Finding
	for _, name := range commonKeys(a, b) {
		ka, kb := a.Config.Keys[name], b.Config.Keys[name]
		if ka.Strategy != "snowflake" || kb.Strategy != "snowflake" {
			continue
		}
		la, na, errA := layoutOf(a.Config, ka)
		lb, _, errB := layoutOf(b.Config, kb)
		if errA != nil || errB != nil || la.String() != lb.String() {
			continue // different layouts: their IDs are different shapes, not this check's
		}
		if samePool(a.Config, b.Config) {
			continue
		}
		// Regions stamp their index in a node field or take a slice of
		// the worker IDs: both are read as the IDs carry them.
		loA, hiA, okA := stampedWorkers(a.Config, ka, la)
		loB, hiB, okB := stampedWorkers(b.Config, kb, lb)
		if !okA || !okB || hiA < loB || hiB < loA {
			continue
		}
		wf, _ := workerField(la)
		var same []string
		differ := false
		for _, f := range la.NodeFields() {
			if f.Name == wf {
				continue
			}
			va, inA := nodeValue(a.Config, ka, la, f.Name)
			vb, inB := nodeValue(b.Config, kb, lb, f.Name)
			if !inA && !inB {
				continue
			}
			if va != vb {
				differ = true
				break
			}
			same = append(same, f.Name+"="+va)
		}
		if differ {
			continue
		}
		fields := "no node field besides the worker"
		if len(same) > 0 {
			fields = "the same " + strings.Join(same, ", ")
		}
		fs = append(fs, Finding{Check: "sites.worker_overlap", Severity: Error, Site: pairName(a, b), Key: name,
			Promise: fmt.Sprintf("IDs of key %q repeat between the sites: two nodes, one in each, can hold the same worker ID at the same time and stamp the same IDs", name),
			Found: fmt.Sprintf("both sites serve key %q with layout %s, %s, and worker IDs %d..%d and %d..%d from separate coordinators (%s; %s)",
				name, na, fields, loA, hiA, loB, hiB, redactCoord(a.Config.Coordinator), redactCoord(b.Config.Coordinator)),
			Fix: "give each site its own value of a node field (a layout with a datacenter field and options.datacenter: 0, 1, ...), or one coordinator both sites share, or disjoint worker ranges"})
	}
	return fs
}

// checkSiteNumbers: sites.number_line. A store-backed key served by two
// sites from different stores counts on two number lines that start at
// the same place, unless (ticket keys) their residue classes are disjoint
// or their regions keep them apart (regionsApart).
func checkSiteNumbers(a, b Site) []Finding {
	var fs []Finding
	for _, name := range commonKeys(a, b) {
		ka, kb := a.Config.Keys[name], b.Config.Keys[name]
		sa, okA := keySource(a.Config, ka)
		sb, okB := keySource(b.Config, kb)
		if !okA || !okB {
			continue
		}
		if sa.shared && sb.shared && sa.id == sb.id {
			continue // one number line, shared
		}
		if ka.Strategy == "ticket" && kb.Strategy == "ticket" && disjointClasses(ka, kb) {
			continue
		}
		if regionsApart(a.Config, ka, b.Config, kb) {
			continue // disjoint region shares, or one site does not issue the key
		}
		fs = append(fs, Finding{Check: "sites.number_line", Severity: Error, Site: pairName(a, b), Key: name,
			Promise: fmt.Sprintf("IDs of key %q repeat between the sites: each site counts on its own number line from the same start", name),
			Found:   fmt.Sprintf("site %s draws key %q from %s, site %s from %s", a.Name, name, sa.shown, b.Name, sb.shown),
			Fix:     "serve the key from one store both sites reach, or give each site its own key name; or make the sites regions of one count with different indexes (region: section); ticket keys may instead use disjoint offsets with one step"})
	}
	return fs
}

// ticketClasses returns a ticket key's step and its servers' offsets as
// the ticket strategy defaults them (step: the number of servers; offsets
// 1..n).
func ticketClasses(k server.KeyConfig) (int64, []int64) {
	n := 1
	if v, ok := k.Options["servers"]; ok {
		n = len(strings.Split(v, ","))
	}
	step := int64(n)
	if v, err := strconv.ParseInt(k.Options["step"], 10, 64); err == nil && v > 0 {
		step = v
	}
	var offs []int64
	if v, ok := k.Options["offsets"]; ok {
		for _, o := range strings.Split(v, ",") {
			if x, err := strconv.ParseInt(strings.TrimSpace(o), 10, 64); err == nil {
				offs = append(offs, x)
			}
		}
	} else {
		for i := 1; i <= n; i++ {
			offs = append(offs, int64(i))
		}
	}
	return step, offs
}

// disjointClasses reports whether two ticket keys issue from disjoint
// residue classes of one step.
func disjointClasses(a, b server.KeyConfig) bool {
	sa, oa := ticketClasses(a)
	sb, ob := ticketClasses(b)
	if sa != sb {
		return false
	}
	used := map[int64]bool{}
	for _, o := range oa {
		used[((o%sa)+sa)%sa] = true
	}
	for _, o := range ob {
		if used[((o%sb)+sb)%sb] {
			return false
		}
	}
	return true
}

func redactCoord(c string) string {
	if c == "" {
		return "none"
	}
	return sqldb.Redact(c)
}
