package doctor

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/idmint/idmint/region"
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/server/strategies"
	"github.com/idmint/idmint/snowflake"
	"github.com/idmint/idmint/sqldb"
	"github.com/idmint/idmint/witness"
)

// How the strategies map a key into its region's share (snowflake keys:
// strategies.SnowflakeRegion, the function the server builds them with):
// counter keys (segment, ticket, redis, monotonic with scope: region) issue
// region.Line(2^63-1) of their own store's counter; snowflake keys carry
// the region index in a node field or take a slice of the worker IDs;
// order numbers take a block of capacity/count of the permutation's input;
// a monotonic key with home_region is served by that region only.

// workerField is the node field a snowflake key's leased worker ID fills
// (strategies.WorkerField) and its width; "" when there is none.
func workerField(l snowflake.Layout) (string, int) {
	wf := strategies.WorkerField(l)
	for _, f := range l.NodeFields() {
		if f.Name == wf {
			return f.Name, f.Bits
		}
	}
	return "", 0
}

// regionField is the node field that carries the region index of a
// snowflake key (strategies.SnowflakeRegion: options.region_field, or the
// layout's datacenter field); "" without regions or without such a field.
func regionField(cfg *server.Config, k server.KeyConfig, l snowflake.Layout) string {
	f, _, _, _, _ := strategies.SnowflakeRegion(k, cfg, l)
	return f
}

// regionWorkers is the region's slice of a snowflake key's worker IDs when
// regions split them (strategies.SnowflakeRegion): region i of n takes
// [i*W/n, (i+1)*W/n) of the W the key may use.
func regionWorkers(cfg *server.Config, k server.KeyConfig, l snowflake.Layout) (base, size int64, split bool) {
	_, base, size, split, ok := strategies.SnowflakeRegion(k, cfg, l)
	if !ok || !split {
		return 0, 0, false // refused at start: config.invalid
	}
	return base, size, true
}

// stampedWorkers is the worker field values a snowflake key's IDs carry:
// workerPool's leased IDs, moved to the region's slice.
func stampedWorkers(cfg *server.Config, k server.KeyConfig, l snowflake.Layout) (lo, hi int64, ok bool) {
	lo, hi, ok = workerPool(cfg, k, l)
	if base, _, split := regionWorkers(cfg, k, l); ok && split {
		lo, hi = lo+base, hi+base
	}
	return lo, hi, ok
}

// nodeValue is the value a snowflake key's IDs carry in node field f
// (not the worker field): the region index when f carries the region,
// else the key's option; false when neither is set.
func nodeValue(cfg *server.Config, k server.KeyConfig, l snowflake.Layout, f string) (string, bool) {
	if f == regionField(cfg, k, l) {
		return strconv.Itoa(cfg.RegionSpec().Index), true
	}
	v, ok := k.Options[f]
	return v, ok
}

// issues reports whether a site's nodes issue a key's IDs at all: a
// monotonic key with home_region is served by that region only.
func issues(cfg *server.Config, k server.KeyConfig) bool {
	home, ok := k.Options["home_region"]
	return k.Strategy != "monotonic" || !ok || home == cfg.RegionSpec().Name
}

// counterShare is the part of the number line a counter key's IDs fall in
// at a site: its region's share for segment, ticket and redis keys and
// monotonic keys with scope: region, the whole line otherwise.
func counterShare(cfg *server.Config, k server.KeyConfig) region.Line {
	r := cfg.RegionSpec()
	switch k.Strategy {
	case "segment", "ticket", "redis":
	case "monotonic":
		if k.Options["scope"] != "region" {
			r = region.Region{}
		}
	default:
		r = region.Region{}
	}
	return r.Line(math.MaxInt64)
}

// regionsApart reports whether the regions of two sites keep a key's IDs
// apart on their own, whatever their stores: one of them does not issue
// the key (home_region), their counter shares do not meet, or their order
// numbers come from different blocks of one count.
func regionsApart(a *server.Config, ka server.KeyConfig, b *server.Config, kb server.KeyConfig) bool {
	if !issues(a, ka) || !issues(b, kb) {
		return true
	}
	ra, rb := a.RegionSpec(), b.RegionSpec()
	if ka.Strategy == "ordernum" || kb.Strategy == "ordernum" {
		return ka.Strategy == kb.Strategy && !ra.Single() && !rb.Single() && ra.Count == rb.Count && ra.Index != rb.Index
	}
	la, lb := counterShare(a, ka), counterShare(b, kb)
	return la.Base+la.Limit < lb.Base || lb.Base+lb.Limit < la.Base
}

// regionMapped: the strategies whose IDs a region keeps apart (the others
// are random or carry per-process bits, unchanged by regions).
var regionMapped = map[string]bool{"segment": true, "ticket": true, "redis": true, "monotonic": true, "ordernum": true, "snowflake": true}

// registryPlace identifies a registry for comparisons: an etcd URL's
// endpoints, prefix and name as the witness reads them, else the URL.
func registryPlace(u string) string {
	if p := etcdPlace(u); p != "" {
		return "etcd:" + p
	}
	return u
}

func registryWords(u string) string {
	if u == "" {
		return "no registry"
	}
	return "registry " + sqldb.Redact(u)
}

// checkSiteRegions: sites.region_index, sites.region_name,
// sites.region_count, sites.region_missing and sites.region_registry. Two
// sites' region: sections compared as a registry would (and more: a
// registry sees only the regions that use it).
func checkSiteRegions(a, b Site) []Finding {
	ca, cb := a.Config, b.Config
	ra, rb := ca.RegionSpec(), cb.RegionSpec()
	pair := pairName(a, b)
	var fs []Finding
	if !ca.Region.Set() || !cb.Region.Set() {
		with, without := a, b
		if !ca.Region.Set() {
			with, without = b, a
		}
		r := with.Config.RegionSpec()
		if r.Name == "" || r.Single() {
			return nil
		}
		var keys []string
		for _, name := range commonKeys(a, b) {
			if regionMapped[ca.Keys[name].Strategy] || regionMapped[cb.Keys[name].Strategy] {
				keys = append(keys, name)
			}
		}
		if len(keys) == 0 {
			return nil
		}
		return []Finding{{Check: "sites.region_missing", Severity: Error, Site: pair, Key: keys[0],
			Promise: fmt.Sprintf("IDs of key(s) %s repeat between the sites: site %s has no region, so it issues from the whole ID space, region %s's share included", shownList(keys, 5), without.Name, r),
			Found:   fmt.Sprintf("site %s is region %s, site %s has no region: section, and both serve key(s) %s", with.Name, r, without.Name, shownList(keys, 5)),
			Fix:     fmt.Sprintf("give site %s a region: section with the same count (%d) and a free index, or give its keys other names", without.Name, r.Count)}}
	}
	if ra.Count != rb.Count {
		fs = append(fs, Finding{Check: "sites.region_count", Severity: Error, Site: pair,
			Promise: "each region issues from its own share of every key's ID space, and the shares follow from the index and the count: with two counts the shares overlap",
			Found:   fmt.Sprintf("site %s is region %s, site %s is region %s: region.count %d and %d", a.Name, ra, b.Name, rb, ra.Count, rb.Count),
			Fix:     "give every region the same region.count, the one the running regions were started with (it is fixed for the life of the keys)"})
	}
	if ra.Index == rb.Index && ra.Name != rb.Name {
		fs = append(fs, Finding{Check: "sites.region_index", Severity: Error, Site: pair,
			Promise: fmt.Sprintf("IDs repeat between the sites: regions %s and %s both take index %d, the same share of every key's ID space", ra.Name, rb.Name, ra.Index),
			Found:   fmt.Sprintf("site %s is region %s and site %s is region %s: both index %d", a.Name, ra, b.Name, rb, ra.Index),
			Fix:     fmt.Sprintf("give one of them a free index below %d (before its first start: a region keeps its index for the life of the keys), and set region.registry so a start with a taken index is refused", max(ra.Count, rb.Count))})
	}
	if ra.Name == rb.Name && ra.Index != rb.Index {
		fs = append(fs, Finding{Check: "sites.region_name", Severity: Error, Site: pair,
			Promise: fmt.Sprintf("a region keeps one index for the life of the keys: region %s is given two, so one site's nodes are refused by the registry or issue another share than the region's", ra.Name),
			Found:   fmt.Sprintf("site %s is region %s, site %s is region %s", a.Name, ra, b.Name, rb),
			Fix:     "give the sites the same index if they are one region, or different names if they are two"})
	}
	if registryPlace(ca.Region.Registry) != registryPlace(cb.Region.Registry) {
		fs = append(fs, Finding{Check: "sites.region_registry", Severity: Warning, Site: pair,
			Promise: "a registry refuses a region that takes another's index only when both claim in it: with separate registries neither sees the other's claims",
			Found:   fmt.Sprintf("site %s (region %s) has %s, site %s (region %s) %s", a.Name, ra.Name, registryWords(ca.Region.Registry), b.Name, rb.Name, registryWords(cb.Region.Registry)),
			Fix:     "set the same region.registry in every region (an etcd or a database every region reaches)"})
	}
	return fs
}

// checkRegionRegistry: region.no_registry. Without a registry the start-up
// check sees this region's own coordinator only.
func checkRegionRegistry(cfg *server.Config, o Options) []Finding {
	r := cfg.RegionSpec()
	if r.Name == "" || cfg.Region.Registry != "" {
		return nil
	}
	return []Finding{{Check: "region.no_registry", Severity: Info,
		Promise: "two regions never take the same index: each issues from its own share of every key's ID space",
		Found:   fmt.Sprintf("region %s has no region.registry: region index uniqueness across regions is checked by nothing at start", r),
		Fix:     "set region.registry, or run idmint doctor with every region's config (idmint doctor --config east.yaml --config west.yaml)"}}
}

// checkRegionClaims: region.index_taken, region.name_taken,
// region.count_differs, region.unclaimed and region.claims. Reads the registry's claims (as
// a node's start would, opening it the same way; nothing is claimed) and
// compares this config's region with them.
func checkRegionClaims(ctx context.Context, cfg *server.Config, o ConnectOptions) []Finding {
	r := cfg.RegionSpec()
	reg := cfg.Region.Registry
	if r.Name == "" || reg == "" {
		return nil
	}
	return withWitness(ctx, o, "region registry", reg, func(cctx context.Context, w witness.Witness) []Finding {
		rec, ok := w.(witness.Recorder)
		if !ok {
			return []Finding{unreachable("region registry", reg, fmt.Errorf("it keeps no records"))}
		}
		shown := sqldb.Redact(reg)
		var fs []Finding
		n := r.Count
		countV, hasCount, err := rec.Lookup(cctx, region.CountRecord)
		if err != nil {
			return []Finding{unreachable("region registry", reg, err)}
		}
		if hasCount {
			if c, err := strconv.Atoi(countV); err == nil && c != r.Count {
				fs = append(fs, Finding{Check: "region.count_differs", Severity: Error,
					Promise: "each region issues from its own share, which follows from its index and the count: every region must give the same count",
					Found:   fmt.Sprintf("region %s says region.count %d, but the registry %s records %s (a node of this config is refused at start)", r, r.Count, shown, countV),
					Fix:     fmt.Sprintf("set region.count: %s, the count the running regions claimed", countV)})
				if c > n && c <= region.MaxCount {
					n = c
				}
			}
		}
		var claimed []string
		for i := 0; i < n; i++ {
			holder, ok, err := rec.Lookup(cctx, region.IndexRecord(i))
			if err != nil {
				return append(fs, unreachable("region registry", reg, err))
			}
			if !ok {
				continue
			}
			claimed = append(claimed, fmt.Sprintf("%s (index %d)", holder, i))
			if i == r.Index && holder != r.Name {
				fs = append(fs, Finding{Check: "region.index_taken", Severity: Error,
					Promise: fmt.Sprintf("IDs repeat between regions %s and %s if both issue from index %d: a node of this config is refused at start", r.Name, holder, i),
					Found:   fmt.Sprintf("region %s is configured with index %d, but the registry %s records index %d as held by region %s", r, i, shown, i, holder),
					Fix:     fmt.Sprintf("give %s a free index, or retire %s first (idmint region release --registry URL --name %s) once none of its nodes runs", r.Name, holder, holder)})
			}
		}
		own, hasOwn, err := rec.Lookup(cctx, region.NameRecord(r.Name))
		if err != nil {
			return append(fs, unreachable("region registry", reg, err))
		}
		if hasOwn && own != strconv.Itoa(r.Index) {
			fs = append(fs, Finding{Check: "region.name_taken", Severity: Error,
				Promise: "a region keeps its index for the life of the keys: a node of this config is refused at start",
				Found:   fmt.Sprintf("region %s is configured with index %d, but the registry %s records region %s at index %s", r, r.Index, shown, r.Name, own),
				Fix:     fmt.Sprintf("set region.index: %s, or give this region another name if it is another region", own)})
		}
		list := "none"
		if len(claimed) > 0 {
			list = strings.Join(claimed, ", ")
		}
		if !hasOwn {
			fs = append(fs, Finding{Check: "region.unclaimed", Severity: Info,
				Promise: "a region's first start claims its index in the registry, and needs the registry to start then (later starts serve on the claim cached in the data directory)",
				Found:   fmt.Sprintf("region %s has not claimed its index in the registry %s yet", r, shown),
				Fix:     "nothing to do if this region has not started yet; else its nodes run without a claim: check that they name this registry"})
		}
		fs = append(fs, Finding{Check: "region.claims", Severity: Info,
			Promise: "every region claims its index in the registry once; a start that claims a taken index is refused",
			Found:   fmt.Sprintf("the registry %s holds the claims: %s", shown, list),
			Fix:     "nothing to do; idmint region release --registry URL --name NAME frees a retired region's index"})
		return fs
	})
}
