package doctor_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/doctor"
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/server/strategies"
)

// load parses, defaults and validates a config written in the test, with
// its data directory in dir.
func load(t *testing.T, dir, yaml string) *server.Config {
	t.Helper()
	cfg, err := server.ParseConfig(strings.NewReader(strings.ReplaceAll(yaml, "DIR", dir)))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir == "" {
		cfg.DataDir = dir
	}
	cfg.SetDefaults()
	reg := server.NewRegistry()
	if err := strategies.Register(reg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(reg); err != nil && !strings.Contains(yaml, "# invalid") {
		t.Fatalf("config does not validate: %v", err)
	}
	return cfg
}

var now = time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)

// find returns the findings of check.
func find(fs []doctor.Finding, check string) []doctor.Finding {
	var out []doctor.Finding
	for _, f := range fs {
		if f.Check == check {
			out = append(out, f)
		}
	}
	return out
}

const token = "admin-token-0123456789"

// Every cheap check: a config that triggers it (with the severity and the
// key) and one that does not.
func TestChecks(t *testing.T) {
	for _, tc := range []struct {
		name, check string
		nodes       int
		yaml        string
		sev         doctor.Severity // of the finding; ignored when key is ""
		key         string          // "" : the config must not trigger the check
	}{
		{"shared store, cluster, witness none", "witness.missing", 0, `
coordinator: postgres://u@db1/ids
witness: none
stores: {default: "postgres://u@db1/ids"}
keys: {order: {strategy: segment}}`, doctor.Error, "order"},
		{"shared store, SQL coordinator, no witness set (the default is the data directory)", "witness.missing", 0, `
coordinator: mysql://u@db1:3306/ids
stores: {default: "postgres://u@db1/ids"}
keys: {order: {strategy: segment}}`, doctor.Error, "order"},
		{"shared store, one node, no witness", "witness.missing", 0, `
witness: none
stores: {default: "postgres://u@db1/ids"}
keys: {order: {strategy: segment}}`, doctor.Info, "order"},
		{"shared store, etcd coordinator is the witness", "witness.missing", 0, `
coordinator: etcd://e1:2379/idmint
stores: {default: "postgres://u@db1/ids"}
keys: {order: {strategy: segment}}`, 0, ""},
		{"ticket servers, SQL coordinator, witness elsewhere", "witness.missing", 0, `
coordinator: postgres://u@db1/ids
witness: etcd://e1:2379/idmint
stores: {t1: "mysql://u@db2:3306/t"}
keys: {tk: {strategy: ticket, store: t1}}`, 0, ""},
		{"zero config: SQLite and marks in the data directory", "witness.same_domain", 0, `
keys: {order: {strategy: segment}}`, doctor.Info, "order"},
		{"zero config monotonic: bound and marks in the data directory", "witness.same_domain", 0, `
keys: {seq: {strategy: monotonic}}`, doctor.Info, "seq"},
		{"SQLite and marks in the data directory beside other nodes", "witness.same_domain", 0, `
coordinator: postgres://u@db1/ids
keys: {order: {strategy: segment, node_local: true}}`, doctor.Warning, "order"},
		{"SQLite in the data directory with a witness elsewhere", "witness.same_domain", 0, `
witness: etcd://e1:2379/idmint
keys: {order: {strategy: segment}}`, 0, ""},
		{"witness on the store's database server", "witness.same_domain", 0, `
coordinator: etcd://e1:2379/idmint
witness: postgres://u@db1:5432/marks
stores: {default: "postgres://u@db1/ids"}
keys: {order: {strategy: segment}}`, doctor.Warning, "order"},
		{"monotonic bound and the default witness in the coordinator's etcd", "witness.same_domain", 0, `
coordinator: etcd://e1:2379/idmint
keys: {seq: {strategy: monotonic}}`, doctor.Warning, "seq"},
		{"monotonic bound in etcd, witness in another etcd", "witness.same_domain", 0, `
coordinator: etcd://e1:2379/idmint
witness: etcd://e9:2379/marks
keys: {seq: {strategy: monotonic}}`, 0, ""},
		{"witness on another database server", "witness.same_domain", 0, `
witness: postgres://u@db9:5432/marks
stores: {default: "postgres://u@db1/ids"}
keys: {order: {strategy: segment}}`, 0, ""},
		{"node_local key under etcd", "node_local.cluster", 0, `
coordinator: etcd://e1:2379/idmint
keys: {order: {strategy: segment, node_local: true}}`, doctor.Warning, "order"},
		{"node_local key on one node", "node_local.cluster", 0, `
keys: {order: {strategy: segment, node_local: true}}`, 0, ""},
		{"non-loopback listener, keys without tokens", "tokens.keys", 0, `
listen: 0.0.0.0:8080
admin_token: ` + token + `
keys: {sf: {strategy: snowflake}}`, doctor.Warning, "-"},
		{"non-loopback listener, keys with tokens", "tokens.keys", 0, `
listen: 10.0.0.7:8080
admin_token: ` + token + `
keys: {sf: {strategy: snowflake, tokens: ["client-token-0123456789"]}}`, 0, ""},
		{"listener on a host name, keys without tokens", "tokens.keys", 0, `
listen: ids.example.com:8080
admin_token: ` + token + `
keys: {sf: {strategy: snowflake}}`, doctor.Warning, "-"},
		{"loopback listener, keys without tokens", "tokens.keys", 0, `
keys: {sf: {strategy: snowflake}}`, 0, ""},
		{"non-loopback listener without admin_token", "tokens.admin", 0, `
listen: 0.0.0.0:8080   # invalid
keys: {sf: {strategy: snowflake}}`, doctor.Error, "-"},
		{"non-loopback admin listener with admin_token", "tokens.admin", 0, `
admin_listen: 0.0.0.0:9090
admin_token: ` + token + `
keys: {sf: {strategy: snowflake}}`, 0, ""},
		{"layout ending in 30 days", "layout.end", 0, `
layouts: {short: "time=40:1ms,worker=10,seq=13,epoch=1992-03-30"}
keys: {sf: {strategy: snowflake, layout: short}}`, doctor.Error, "sf"},
		{"layout ending in 200 days", "layout.end", 0, `
layouts: {soon: "time=40:1ms,worker=10,seq=13,epoch=1992-09-15"}
keys: {sf: {strategy: snowflake, layout: soon}}`, doctor.Warning, "sf"},
		{"leaf layout (ends 2080)", "layout.end", 0, `
keys: {sf: {strategy: snowflake}}`, 0, ""},
		{"four worker IDs under etcd", "workers.pool", 0, `
coordinator: etcd://e1:2379/idmint
keys: {sf: {strategy: snowflake, options: {worker_limit: "4"}}}`, doctor.Warning, "sf"},
		{"four worker IDs for five nodes", "workers.pool", 5, `
coordinator: etcd://e1:2379/idmint
keys: {sf: {strategy: snowflake, options: {worker_limit: "4"}}}`, doctor.Error, "sf"},
		{"1024 worker IDs under etcd", "workers.pool", 3, `
coordinator: etcd://e1:2379/idmint
keys: {sf: {strategy: snowflake}}`, 0, ""},
		{"four worker IDs on one node", "workers.pool", 0, `
keys: {sf: {strategy: snowflake, options: {worker_limit: "4"}}}`, 0, ""},
		{"eight worker IDs, the second of two regions' slices, for five nodes", "workers.pool", 5, `
coordinator: etcd://e1:2379/idmint
region: {name: west, index: 1, count: 2}
keys: {sf: {strategy: snowflake, options: {worker_limit: "16"}}}`, doctor.Warning, "sf"},
		{"a region without a registry", "region.no_registry", 0, `
coordinator: etcd://e1:2379/idmint
region: {name: west, index: 1, count: 2}
keys: {sf: {strategy: snowflake}}`, doctor.Info, "-"},
		{"a region with a registry", "region.no_registry", 0, `
coordinator: etcd://e1:2379/idmint
region: {name: west, index: 1, count: 2, registry: "etcd://registry:2379/regions"}
keys: {sf: {strategy: snowflake}}`, 0, ""},
		{"no region", "region.no_registry", 0, `
coordinator: etcd://e1:2379/idmint
keys: {sf: {strategy: snowflake}}`, 0, ""},
		{"StatefulSet ordinals", "workers.unfenced", 0, `
coordinator: k8s://idmint-2
keys: {sf: {strategy: snowflake}}`, doctor.Info, "-"},
		{"IP addresses", "workers.unfenced", 0, `
coordinator: ip://
keys: {sf: {strategy: snowflake}}`, doctor.Warning, "-"},
		{"etcd leases", "workers.unfenced", 0, `
coordinator: etcd://e1:2379/idmint
keys: {sf: {strategy: snowflake}}`, 0, ""},
		{"StatefulSet ordinals, no snowflake key", "workers.unfenced", 0, `
coordinator: k8s://idmint-2
keys: {u: {strategy: uuid}}`, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := load(t, t.TempDir(), tc.yaml)
			fs := find(doctor.Check(cfg, doctor.Options{Now: now, Nodes: tc.nodes}), tc.check)
			if tc.key == "" {
				if len(fs) > 0 {
					t.Fatalf("%s found %+v", tc.check, fs)
				}
				return
			}
			if len(fs) != 1 {
				t.Fatalf("want one %s finding, got %+v", tc.check, fs)
			}
			f := fs[0]
			if f.Severity != tc.sev || (tc.key != "-" && f.Key != tc.key) {
				t.Errorf("got %s key %q, want %s key %q: %+v", f.Severity, f.Key, tc.sev, tc.key, f)
			}
			if f.Promise == "" || f.Found == "" || f.Fix == "" {
				t.Errorf("finding lacks promise, found or fix: %+v", f)
			}
		})
	}
}

// The layout checks measure from Options.Now: the leaf layout's end
// (2080-09-06) is a warning inside its last year and an error inside its
// last 90 days.
func TestLayoutEndByDate(t *testing.T) {
	cfg := load(t, t.TempDir(), `keys: {sf: {strategy: snowflake}}`)
	for _, c := range []struct {
		at   time.Time
		want []doctor.Severity
	}{
		{time.Date(2079, 6, 1, 0, 0, 0, 0, time.UTC), nil},
		{time.Date(2080, 1, 1, 0, 0, 0, 0, time.UTC), []doctor.Severity{doctor.Warning}},
		{time.Date(2080, 8, 1, 0, 0, 0, 0, time.UTC), []doctor.Severity{doctor.Error}},
	} {
		fs := find(doctor.Check(cfg, doctor.Options{Now: c.at}), "layout.end")
		var got []doctor.Severity
		for _, f := range fs {
			got = append(got, f.Severity)
		}
		if len(got) != len(c.want) || (len(got) == 1 && got[0] != c.want[0]) {
			t.Errorf("at %s: got %v, want %v", c.at.Format(time.DateOnly), got, c.want)
		}
	}
}
