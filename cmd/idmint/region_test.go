package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/region"
	"github.com/idmint/idmint/server/strategies"
	"github.com/idmint/idmint/testkit/testserver"
	"github.com/idmint/idmint/witness"
)

// `idmint region release` frees a region's index in the registry: another
// region can claim it afterwards; bad flags are usage errors naming them.
func TestRegionRelease(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"region", "missing action"},
		{"region release --registry http://x --name a", "flag --registry"},
		{"region release --registry etcd://127.0.0.1:1/r --name Bad_Name", "flag --name"},
	} {
		if code, _, stderr := runCLI(t, strings.Fields(tc.args)...); code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("idmint %s: exit %d, %q; want 2 naming %s", tc.args, code, stderr, tc.want)
		}
	}
	reg := "etcd://" + testserver.Addr(t, testserver.Etcd) + "/" + testserver.Prefix(t)
	ctx := context.Background()
	w, err := witness.Open(ctx, reg, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rec := w.(witness.Recorder)
	if err := strategies.ClaimIndex(ctx, rec, region.Region{Name: "us-east", Index: 0, Count: 2}); err != nil {
		t.Fatal(err)
	}
	if err := strategies.ClaimIndex(ctx, rec, region.Region{Name: "eu-west", Index: 0, Count: 2}); err == nil {
		t.Fatal("a taken index was claimed")
	}
	code, stdout, stderr := runCLI(t, "region", "release", "--registry", reg, "--name", "us-east")
	if code != 0 || !strings.Contains(stdout, "region us-east released index 0") {
		t.Fatalf("release: exit %d %q %q", code, stdout, stderr)
	}
	if err := strategies.ClaimIndex(ctx, rec, region.Region{Name: "eu-west", Index: 0, Count: 2}); err != nil {
		t.Fatalf("the released index: %v", err)
	}
	if code, _, stderr := runCLI(t, "region", "release", "--registry", reg, "--name", "us-east"); code != 1 || !strings.Contains(stderr, `no region called "us-east"`) {
		t.Fatalf("releasing it again: exit %d %q", code, stderr)
	}
}
