package doctor_test

import (
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
