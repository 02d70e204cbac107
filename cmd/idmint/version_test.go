package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionStampedWithoutVCS: a build with VCS stamping off still prints
// the version given with -ldflags -X (what deploy/Dockerfile passes), and
// one without it says (devel) rather than nothing.
func TestVersionStampedWithoutVCS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds idmint; skipped with -short")
	}
	// Without a stamp and without VCS information (a test binary has
	// neither) the version reads (devel); checked in-process, so only the
	// stamped build costs a go build.
	if code, out, _ := runCLI(t, "--version"); code != 0 || !strings.HasPrefix(out, "idmint (devel) ") {
		t.Errorf("unstamped --version = %d %q, want prefix %q", code, out, "idmint (devel) ")
	}
	dir := t.TempDir()
	for _, c := range []struct {
		name, ldflags, want string
	}{
		{"stamped", "-X main.version=v9.8.7-test", "idmint v9.8.7-test "},
	} {
		bin := filepath.Join(dir, c.name)
		args := []string{"build", "-buildvcs=false", "-o", bin}
		if c.ldflags != "" {
			args = append(args, "-ldflags", c.ldflags)
		}
		if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		out, err := exec.Command(bin, "--version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), c.want) {
			t.Errorf("%s build: idmint --version = %q, %v; want prefix %q", c.name, out, err, c.want)
		}
	}
}
