package main

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/idmint/idmint/testkit/servenode"
	"github.com/idmint/idmint/testkit/testserver"
)

// TestVersionStampedWithoutVCS: a build with VCS stamping off still prints
// the version, commit, commit time and modified flag given with -ldflags -X (what
// scripts/release.sh and deploy/Dockerfile pass), and one without them
// says (devel) and "unknown" rather than nothing. The stamped node's
// /metrics shows the same values in idmint_build_info, so the server takes
// them from where `idmint version` does.
func TestVersionStampedWithoutVCS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds idmint; skipped with -short")
	}
	// Without a stamp and without VCS information (a test binary has
	// neither) the version reads (devel); checked in-process, so only the
	// stamped build costs a go build.
	code, out, _ := runCLI(t, "--version")
	want := "idmint (devel) " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\ncommit:      unknown\ncommit time: unknown\nmodified:    unknown\n"
	if code != 0 || out != want {
		t.Errorf("unstamped --version = %d %q, want %q", code, out, want)
	}
	dir := t.TempDir()
	const (
		ver  = "v9.8.7-test"
		rev  = "0123456789abcdef0123456789abcdef01234567"
		when = "2026-01-02T03:04:05Z"
	)
	bin := filepath.Join(dir, "stamped")
	args := []string{"build", "-buildvcs=false", "-o", bin, "-ldflags", "-X main.version=" + ver + " -X main.commit=" + rev + " -X main.commitTime=" + when + " -X main.modified=true", "."}
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, arg := range []string{"version", "--version"} {
		got, err := exec.Command(bin, arg).CombinedOutput()
		want := "idmint " + ver + " " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\ncommit:      " + rev + "\ncommit time: " + when + "\nmodified:    true\n"
		if err != nil || string(got) != want {
			t.Errorf("stamped build: idmint %s = %q, %v; want %q", arg, got, err, want)
		}
	}

	// The same build as a node: its /metrics names the stamped build.
	lf, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "idmint.yaml")
	if err := os.WriteFile(cfg, []byte("keys:\n  s:\n    strategy: snowflake\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := &servenode.Node{Name: "stamped", Bin: bin, Config: cfg, Data: filepath.Join(dir, "data"), Port: testserver.FreePort(t), Log: lf}
	t.Cleanup(func() { n.Cleanup(t) })
	n.Start(t)
	resp, err := http.Get(n.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d %v", resp.StatusCode, err)
	}
	line := `idmint_build_info{commit="` + rev + `",goversion="` + runtime.Version() + `",version="` + ver + `"} 1`
	if !strings.Contains(string(body), line+"\n") {
		t.Errorf("/metrics of the stamped node lacks %s; its build_info lines:\n%s", line, grepLines(string(body), "idmint_build_info"))
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
