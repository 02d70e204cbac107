package doctor_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/idmint/idmint/doctor"
)

// Two sites compared key by key: each case a pair that overlaps (an error
// naming the key) and pairs kept apart.
func TestSiteChecks(t *testing.T) {
	for _, tc := range []struct {
		name, check, a, b, key string // key "": no finding
	}{
		{"same layout, same datacenter, separate etcd", "sites.worker_overlap", `
coordinator: etcd://e1:2379/idmint
layouts: {dc: "time=41:1ms,datacenter=5,worker=5,seq=12,epoch=2020-01-01"}
keys: {sf: {strategy: snowflake, layout: dc, options: {datacenter: "1"}}}`, `
coordinator: etcd://e9:2379/idmint
layouts: {dc: "time=41:1ms,datacenter=5,worker=5,seq=12,epoch=2020-01-01"}
keys: {sf: {strategy: snowflake, layout: dc, options: {datacenter: "1"}}}`, "sf"},
		{"same layout, different datacenter", "sites.worker_overlap", `
coordinator: etcd://e1:2379/idmint
layouts: {dc: "time=41:1ms,datacenter=5,worker=5,seq=12,epoch=2020-01-01"}
keys: {sf: {strategy: snowflake, layout: dc, options: {datacenter: "1"}}}`, `
coordinator: etcd://e9:2379/idmint
layouts: {dc: "time=41:1ms,datacenter=5,worker=5,seq=12,epoch=2020-01-01"}
keys: {sf: {strategy: snowflake, layout: dc, options: {datacenter: "2"}}}`, ""},
		{"one etcd both sites share", "sites.worker_overlap", `
coordinator: etcd://e1:2379/idmint
keys: {sf: {strategy: snowflake}}`, `
coordinator: etcd://e1:2379/idmint
keys: {sf: {strategy: snowflake}}`, ""},
		{"disjoint static worker IDs", "sites.worker_overlap", `
coordinator: static://1?horizon=memory
keys: {sf: {strategy: snowflake}}`, `
coordinator: static://2?horizon=memory
keys: {sf: {strategy: snowflake}}`, ""},
		{"the same static worker ID", "sites.worker_overlap", `
coordinator: static://1?horizon=memory
keys: {sf: {strategy: snowflake}}`, `
coordinator: static://1?horizon=memory
keys: {sf: {strategy: snowflake}}`, "sf"},
		{"segment key on two databases", "sites.number_line", `
witness: etcd://e1:2379/idmint
stores: {default: "postgres://u@db1/ids"}
keys: {order: {strategy: segment}}`, `
witness: etcd://e9:2379/idmint
stores: {default: "postgres://u@db9/ids"}
keys: {order: {strategy: segment}}`, "order"},
		{"segment key on each site's SQLite, at the same path on two machines", "sites.number_line", `
keys: {order: {strategy: segment}}`, `
keys: {order: {strategy: segment}}`, "order"},
		{"segment key on one shared database", "sites.number_line", `
witness: etcd://e1:2379/idmint
stores: {default: "postgres://u@db1/ids"}
keys: {order: {strategy: segment}}`, `
witness: etcd://e1:2379/idmint
stores: {default: "postgres://u@db1/ids"}
keys: {order: {strategy: segment}}`, ""},
		{"ticket servers with disjoint offsets", "sites.number_line", `
witness: etcd://e1:2379/idmint
stores: {t1: "mysql://u@db1:3306/t"}
keys: {tk: {strategy: ticket, store: t1, options: {step: "2", offsets: "1"}}}`, `
witness: etcd://e9:2379/idmint
stores: {t1: "mysql://u@db9:3306/t"}
keys: {tk: {strategy: ticket, store: t1, options: {step: "2", offsets: "2"}}}`, ""},
		{"ticket servers with the same offsets", "sites.number_line", `
witness: etcd://e1:2379/idmint
stores: {t1: "mysql://u@db1:3306/t"}
keys: {tk: {strategy: ticket, store: t1}}`, `
witness: etcd://e9:2379/idmint
stores: {t1: "mysql://u@db9:3306/t"}
keys: {tk: {strategy: ticket, store: t1}}`, "tk"},
		{"different key names", "sites.number_line", `
keys: {order-eu: {strategy: segment}}`, `
keys: {order-us: {strategy: segment}}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Both sites' data directories at one path, as on two
			// machines installed alike.
			dir := t.TempDir()
			a := doctor.Site{Name: "eu.yaml", Config: load(t, dir, tc.a)}
			b := doctor.Site{Name: "us.yaml", Config: load(t, dir, tc.b)}
			fs := find(doctor.CheckSites([]doctor.Site{a, b}, doctor.Options{Now: now}), tc.check)
			if tc.key == "" {
				if len(fs) > 0 {
					t.Fatalf("%s found %+v", tc.check, fs)
				}
				return
			}
			if len(fs) != 1 || fs[0].Key != tc.key || fs[0].Severity != doctor.Error || fs[0].Site != "eu.yaml + us.yaml" {
				t.Fatalf("want one error on key %s of eu.yaml + us.yaml, got %+v", tc.key, fs)
			}
		})
	}
}

// A site check is one entry of SiteChecks: a check added there (the region
// check to come) runs on every pair.
func TestSiteChecksExtend(t *testing.T) {
	saved := doctor.SiteChecks
	t.Cleanup(func() { doctor.SiteChecks = saved })
	pairs := 0
	doctor.SiteChecks = append(doctor.SiteChecks, func(a, b doctor.Site) []doctor.Finding {
		pairs++
		return []doctor.Finding{{Check: "sites.extra", Severity: doctor.Warning, Site: a.Name + " + " + b.Name}}
	})
	var sites []doctor.Site
	for _, n := range []string{"a", "b", "c"} {
		sites = append(sites, doctor.Site{Name: n, Config: load(t, t.TempDir(), `keys: {u: {strategy: uuid}}`)})
	}
	fs := find(doctor.CheckSites(sites, doctor.Options{Now: now}), "sites.extra")
	if pairs != 3 || len(fs) != 3 {
		t.Fatalf("3 sites: want the check on 3 pairs, ran %d, found %d", pairs, len(fs))
	}
}

// Counts sums findings per check and severity (the metric's series).
func TestCounts(t *testing.T) {
	got := doctor.Counts([]doctor.Finding{
		{Check: "a", Severity: doctor.Warning}, {Check: "a", Severity: doctor.Warning},
		{Check: "a", Severity: doctor.Error}, {Check: "b", Severity: doctor.Info},
	})
	if len(got) != 3 || got[0].Count != 2 || got[0].Severity != "warning" || got[1].Count != 1 || got[2].Check != "b" {
		t.Fatalf("got %+v", got)
	}
}

// Region sections of two sites (east and west, each with its own etcd and
// database). The strategies' mappings keep keys apart: the overlap checks
// must not report keys two regions keep apart, and must report those they
// do not.
func TestSiteChecksRegions(t *testing.T) {
	site := func(name string, index, count int, extra, keys string) string {
		return `
coordinator: etcd://etcd.` + name + `:2379/idmint
stores: {default: "postgres://u@pg.` + name + `/ids"}
region: {name: ` + name + `, index: ` + itoa(index) + `, count: ` + itoa(count) + extra + `}
keys: ` + keys
	}
	const leaf = `{sf: {strategy: snowflake}}`
	const twitter = `{sf: {strategy: snowflake, layout: twitter}}`
	const seg = `{order: {strategy: segment}}`
	const ord = `{on: {strategy: ordernum, options: {format: "length=12", key: "00112233445566778899aabbccddeeff"}}}`
	for _, tc := range []struct {
		name, check, a, b, key string // key "": no finding
	}{
		{"snowflake, worker split, two regions", "sites.worker_overlap",
			site("east", 0, 2, "", leaf), site("west", 1, 2, "", leaf), ""},
		{"snowflake, worker split, two regions with a worker_limit", "sites.worker_overlap",
			site("east", 0, 2, "", `{sf: {strategy: snowflake, options: {worker_limit: "100"}}}`),
			site("west", 1, 2, "", `{sf: {strategy: snowflake, options: {worker_limit: "100"}}}`), ""},
		{"snowflake, worker split, region beside a site without one", "sites.worker_overlap",
			site("west", 1, 2, "", leaf), `
coordinator: etcd://etcd.old:2379/idmint
keys: ` + leaf, "sf"},
		{"snowflake, region in the datacenter field, two regions", "sites.worker_overlap",
			site("east", 0, 2, "", twitter), site("west", 1, 2, "", twitter), ""},
		{"snowflake, region in a field options.region_field names", "sites.worker_overlap",
			site("east", 0, 2, "", `{sf: {strategy: snowflake, layout: dz, options: {region_field: zone}}}`) + "\nlayouts: {dz: \"time=41:1ms,zone=5,worker=5,seq=12,epoch=2020-01-01\"}",
			site("west", 1, 2, "", `{sf: {strategy: snowflake, layout: dz, options: {region_field: zone}}}`) + "\nlayouts: {dz: \"time=41:1ms,zone=5,worker=5,seq=12,epoch=2020-01-01\"}", ""},
		{"snowflake, options.region_field's field, region 1 beside a site without one stamping zone 1", "sites.worker_overlap",
			site("west", 1, 2, "", `{sf: {strategy: snowflake, layout: dz, options: {region_field: zone}}}`) + "\nlayouts: {dz: \"time=41:1ms,zone=5,worker=5,seq=12,epoch=2020-01-01\"}", `
coordinator: etcd://etcd.old:2379/idmint
layouts: {dz: "time=41:1ms,zone=5,worker=5,seq=12,epoch=2020-01-01"}
keys: {sf: {strategy: snowflake, layout: dz, options: {zone: "1"}}}`, "sf"},
		{"snowflake, datacenter field, region 1 beside a site without one stamping datacenter 1", "sites.worker_overlap",
			site("west", 1, 2, "", twitter), `
coordinator: etcd://etcd.old:2379/idmint
keys: {sf: {strategy: snowflake, layout: twitter, options: {datacenter: "1"}}}`, "sf"},
		{"snowflake, two regions on one index", "sites.worker_overlap",
			site("east", 1, 2, "", leaf), site("west", 1, 2, "", leaf), "sf"},
		{"segment, two regions on separate databases", "sites.number_line",
			site("east", 0, 2, "", seg), site("west", 1, 2, "", seg), ""},
		{"segment, two regions of count 2 and 4 whose shares do not meet", "sites.number_line",
			site("east", 1, 2, "", seg), site("west", 1, 4, "", seg), ""},
		{"segment, two regions on one index", "sites.number_line",
			site("east", 0, 2, "", seg), site("west", 0, 2, "", seg), "order"},
		{"segment, region 1 beside a site without one", "sites.number_line",
			site("west", 1, 2, "", seg), `
coordinator: etcd://etcd.old:2379/idmint
stores: {default: "postgres://u@pg.old/ids"}
keys: ` + seg, "order"},
		{"monotonic scope: region, two regions", "sites.number_line",
			site("east", 0, 2, "", `{m: {strategy: monotonic, options: {scope: region}}}`),
			site("west", 1, 2, "", `{m: {strategy: monotonic, options: {scope: region}}}`), ""},
		{"monotonic home_region east in both regions: west does not issue it", "sites.number_line",
			site("east", 0, 2, "", `{m: {strategy: monotonic, options: {home_region: east}}}`),
			site("west", 1, 2, "", `{m: {strategy: monotonic, options: {home_region: east}}}`), ""},
		{"monotonic, each region its own home", "sites.number_line",
			site("east", 0, 2, "", `{m: {strategy: monotonic, options: {home_region: east}}}`),
			site("west", 1, 2, "", `{m: {strategy: monotonic, options: {home_region: west}}}`), "m"},
		{"ordernum, two regions on separate databases", "sites.number_line",
			site("east", 0, 2, "", ord), site("west", 1, 2, "", ord), ""},
		{"ordernum, two regions on one index", "sites.number_line",
			site("east", 0, 2, "", ord), site("west", 0, 2, "", ord), "on"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			a := doctor.Site{Name: "eu.yaml", Config: load(t, dir, tc.a)}
			b := doctor.Site{Name: "us.yaml", Config: load(t, dir, tc.b)}
			fs := find(doctor.CheckSites([]doctor.Site{a, b}, doctor.Options{Now: now}), tc.check)
			if tc.key == "" {
				if len(fs) > 0 {
					t.Fatalf("%s found %+v", tc.check, fs)
				}
				return
			}
			if len(fs) != 1 || fs[0].Key != tc.key || fs[0].Severity != doctor.Error || fs[0].Site != "eu.yaml + us.yaml" {
				t.Fatalf("want one error on key %s of eu.yaml + us.yaml, got %+v", tc.key, fs)
			}
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// The region: sections of two sites compared: each check with a pair that
// triggers it (its severity, and words the finding must say) and one
// that does not.
func TestSiteRegionChecks(t *testing.T) {
	site := func(name string, index, count int, registry, keys string) string {
		return `
coordinator: etcd://etcd.` + name + `:2379/idmint
region: {name: ` + name + `, index: ` + itoa(index) + `, count: ` + itoa(count) + `, registry: "` + registry + `"}
keys: ` + keys
	}
	const reg = "etcd://registry:2379/regions"
	const keys = `{sf: {strategy: snowflake}, u: {strategy: uuid}}`
	const none = `
coordinator: etcd://etcd.old:2379/idmint
keys: ` + keys
	for _, tc := range []struct {
		name, check, a, b string
		sev               doctor.Severity
		says              []string // nil: no finding
	}{
		{"two regions on one index", "sites.region_index",
			site("east", 1, 2, reg, keys), site("west", 1, 2, reg, keys), doctor.Error, []string{"eu.yaml", "us.yaml", "east", "west", "both index 1"}},
		{"two regions on their own indexes", "sites.region_index",
			site("east", 0, 2, reg, keys), site("west", 1, 2, reg, keys), 0, nil},
		{"one region in two files", "sites.region_index",
			site("east", 0, 2, reg, keys), site("east", 0, 2, reg, keys), 0, nil},
		{"one name on two indexes", "sites.region_name",
			site("east", 0, 2, reg, keys), site("east", 1, 2, reg, keys), doctor.Error, []string{"east (index 0 of 2)", "east (index 1 of 2)"}},
		{"one name on one index", "sites.region_name",
			site("east", 0, 2, reg, keys), site("east", 0, 2, reg, keys), 0, nil},
		{"two counts", "sites.region_count",
			site("east", 0, 2, reg, keys), site("west", 1, 4, reg, keys), doctor.Error, []string{"region.count 2 and 4"}},
		{"one count", "sites.region_count",
			site("east", 0, 4, reg, keys), site("west", 1, 4, reg, keys), 0, nil},
		{"a region beside a site without one, one key name", "sites.region_missing",
			site("east", 0, 2, reg, keys), none, doctor.Error, []string{"us.yaml has no region", "sf"}},
		{"a single region (count 1) beside a site without one: the same whole number line, the overlap checks' business", "sites.region_missing",
			site("east", 0, 1, reg, keys), none, 0, nil},
		{"a region beside a site without one, only uuid keys in common", "sites.region_missing",
			site("east", 0, 2, reg, `{u: {strategy: uuid}}`), none, 0, nil},
		{"a region beside a site without one, no key in common", "sites.region_missing",
			site("east", 0, 2, reg, `{other: {strategy: snowflake}}`), none, 0, nil},
		{"two registries", "sites.region_registry",
			site("east", 0, 2, reg, keys), site("west", 1, 2, "etcd://registry2:2379/regions", keys), doctor.Warning, []string{"registry2:2379"}},
		{"a registry and none", "sites.region_registry",
			site("east", 0, 2, reg, keys), site("west", 1, 2, "", keys), doctor.Warning, []string{"no registry"}},
		{"one registry, written two ways", "sites.region_registry",
			site("east", 0, 2, reg, keys), site("west", 1, 2, reg+"?name=default", keys), 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			a := doctor.Site{Name: "eu.yaml", Config: load(t, dir, tc.a)}
			b := doctor.Site{Name: "us.yaml", Config: load(t, dir, tc.b)}
			fs := find(doctor.CheckSites([]doctor.Site{a, b}, doctor.Options{Now: now}), tc.check)
			if tc.says == nil {
				if len(fs) > 0 {
					t.Fatalf("%s found %+v", tc.check, fs)
				}
				return
			}
			if len(fs) != 1 || fs[0].Severity != tc.sev || fs[0].Site != "eu.yaml + us.yaml" {
				t.Fatalf("want one %v of eu.yaml + us.yaml, got %+v", tc.sev, fs)
			}
			text := fs[0].Promise + " " + fs[0].Found + " " + fs[0].Fix + " " + fs[0].Key
			for _, w := range tc.says {
				if !strings.Contains(text, w) {
					t.Errorf("finding does not say %q: %+v", w, fs[0])
				}
			}
		})
	}
}
