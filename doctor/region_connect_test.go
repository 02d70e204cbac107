package doctor_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/doctor"
	"github.com/idmint/idmint/region"
	"github.com/idmint/idmint/server/strategies"
	"github.com/idmint/idmint/testkit/testserver"
	"github.com/idmint/idmint/witness"
)

// With --connect a region's registry is read as the nodes' start claims
// it: east and west claim indexes 0 and 1 of 2 through the server's own
// ClaimIndex (so the record names doctor reads are the ones the server
// writes) on the shared etcd under a fresh prefix; configs that agree find
// the claims listed, a third region on west's index, another count and a
// name moved to another index are errors, a region not yet claimed is
// said, and doctor claims nothing.
func TestConnectRegionClaims(t *testing.T) {
	reg := "etcd://" + testserver.Addr(t, testserver.Etcd) + "/" + testserver.Prefix(t)
	ctx := context.Background()
	w, err := witness.Open(ctx, reg, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rec := w.(witness.Recorder)
	for _, r := range []region.Region{{Name: "east", Index: 0, Count: 2}, {Name: "west", Index: 1, Count: 2}} {
		if err := strategies.ClaimIndex(ctx, rec, r); err != nil {
			t.Fatal(err)
		}
	}
	cfg := func(name string, index, count int, registry string) string {
		return `
region: {name: ` + name + `, index: ` + itoa(index) + `, count: ` + itoa(count) + `, registry: "` + registry + `"}
keys: {u: {strategy: uuid}}`
	}
	type want struct {
		check string
		sev   doctor.Severity
		says  []string
	}
	for _, tc := range []struct {
		name string
		yaml string
		want []want // every region.* and connect.unreachable finding, sorted as the report sorts them
	}{
		{"west as claimed", cfg("west", 1, 2, reg), []want{
			{"region.claims", doctor.Info, []string{"east (index 0), west (index 1)"}}}},
		{"north on west's index", cfg("north", 1, 2, reg), []want{
			{"region.index_taken", doctor.Error, []string{"north (index 1 of 2)", "held by region west", "idmint region release"}},
			{"region.claims", doctor.Info, []string{"east (index 0), west (index 1)"}},
			{"region.unclaimed", doctor.Info, []string{"north (index 1 of 2) has not claimed"}}}},
		{"east with another count", cfg("east", 0, 3, reg), []want{
			{"region.count_differs", doctor.Error, []string{"region.count 3", "records 2"}},
			{"region.claims", doctor.Info, []string{"east (index 0), west (index 1)"}}}},
		{"east moved to west's index", cfg("east", 1, 2, reg), []want{
			{"region.index_taken", doctor.Error, []string{"held by region west"}},
			{"region.name_taken", doctor.Error, []string{"records region east at index 0"}},
			{"region.claims", doctor.Info, nil}}},
		{"south in an empty registry", cfg("south", 0, 2, reg+"?name=other"), []want{
			{"region.claims", doctor.Info, []string{"holds the claims: none"}},
			{"region.unclaimed", doctor.Info, []string{"south (index 0 of 2)"}}}},
		{"registry out of reach", cfg("west", 1, 2, "etcd://127.0.0.1:1/regions"), []want{
			{"connect.unreachable", doctor.Error, []string{"region registry", "127.0.0.1:1"}}}},
		{"a region without a registry", cfg("west", 1, 2, ""), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []doctor.Finding
			for _, f := range connect(t, tc.yaml, doctor.ConnectOptions{Timeout: 2 * time.Second}) {
				if strings.HasPrefix(f.Check, "region.") || f.Check == "connect.unreachable" {
					got = append(got, f)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("want %d findings, got %+v", len(tc.want), got)
			}
			for i, w := range tc.want {
				f := got[i]
				if f.Check != w.check || f.Severity != w.sev {
					t.Errorf("finding %d: want %s %s, got %+v", i, w.sev, w.check, f)
				}
				for _, s := range w.says {
					if !strings.Contains(f.Found+" "+f.Fix, s) {
						t.Errorf("%s does not say %q: %+v", f.Check, s, f)
					}
				}
			}
		})
	}
	// Reading claimed nothing: north and south are still unknown.
	for _, n := range []string{"north", "south"} {
		if v, ok, err := rec.Lookup(ctx, "region-name/"+n); err != nil || ok {
			t.Errorf("doctor claimed region %s (%q, %v)", n, v, err)
		}
	}
}

// The info finding of a region without a registry says what checks
// index uniqueness then.
func TestRegionWithoutRegistryWords(t *testing.T) {
	cfg := load(t, t.TempDir(), `
region: {name: west, index: 1, count: 2}
keys: {u: {strategy: uuid}}`)
	fs := find(doctor.Check(cfg, doctor.Options{Now: now}), "region.no_registry")
	if len(fs) != 1 {
		t.Fatalf("want one region.no_registry, got %+v", fs)
	}
	text := fs[0].Found + ": " + fs[0].Fix
	if !strings.Contains(text, "region index uniqueness across regions is checked by nothing at start: set region.registry, or run idmint doctor with every region's config") {
		t.Errorf("finding says %q", text)
	}
}

// A PostgreSQL registry is read the same way: a region on the index east
// claimed there is an error naming east, and no finding shows the
// registry's password.
func TestConnectRegionClaimsPostgres(t *testing.T) {
	reg := testserver.Database(t, testserver.Postgres)
	ctx := context.Background()
	w, err := witness.Open(ctx, reg, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := strategies.ClaimIndex(ctx, w.(witness.Recorder), region.Region{Name: "east", Index: 0, Count: 2}); err != nil {
		t.Fatal(err)
	}
	fs := connect(t, `
region: {name: north, index: 0, count: 2, registry: "`+reg+`"}
keys: {u: {strategy: uuid}}`, doctor.ConnectOptions{Timeout: 5 * time.Second})
	taken := find(fs, "region.index_taken")
	if len(taken) != 1 || !strings.Contains(taken[0].Found, "held by region east") {
		t.Fatalf("want region.index_taken naming east, got %+v", fs)
	}
	if u, err := url.Parse(reg); err == nil {
		if pw, ok := u.User.Password(); ok && pw != "" && strings.Contains(fmt.Sprint(fs), pw) {
			t.Errorf("a finding shows the registry's password: %+v", fs)
		}
	}
	if c := find(fs, "region.claims"); len(c) != 1 || !strings.Contains(c[0].Found, "east (index 0)") {
		t.Fatalf("want the claims listed, got %+v", fs)
	}
}
