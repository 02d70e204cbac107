package client

import (
	"os/exec"
	"strings"
	"testing"
)

// heavy are the module paths an HTTP-only program that imports client
// must not link: they belong to the opt-in packages client/grpctransport
// and client/clientmetrics.
var heavy = []string{"google.golang.org/grpc", "github.com/prometheus/"}

// deps lists the packages pkg links, as `go list -deps` prints them.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
	}
	return strings.Fields(string(out))
}

func heavyIn(pkgs []string) []string {
	var found []string
	for _, p := range pkgs {
		for _, h := range heavy {
			if strings.HasPrefix(p, h) {
				found = append(found, p)
			}
		}
	}
	return found
}

// TestCoreDeps: the client core speaks HTTP with the standard library
// alone; gRPC and Prometheus come only with the subpackages that need
// them.
func TestCoreDeps(t *testing.T) {
	if found := heavyIn(deps(t, ".")); len(found) > 0 {
		t.Errorf("package client links %d packages of gRPC or Prometheus, e.g. %v; they belong in client/grpctransport and client/clientmetrics", len(found), found[:min(len(found), 5)])
	}
	// The check itself sees them where they belong.
	for _, sub := range []string{"./grpctransport", "./clientmetrics"} {
		if len(heavyIn(deps(t, sub))) == 0 {
			t.Errorf("go list -deps %s shows neither gRPC nor Prometheus: the check above would not see them either", sub)
		}
	}
}
