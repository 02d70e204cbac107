package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeMetricsToken: serve --check takes the metrics token from a
// file named in the environment (a Kubernetes Secret mounted as a file),
// refuses one that is still an example placeholder, and refuses a file it
// cannot read, naming the field and the path.
func TestServeMetricsToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("metrics-token", "9b2d4f6a8c0e1a3b5d7f9e1c3a5b7d9f\n")
	placeholder := file("placeholder", "CHANGE-ME-to-a-long-random-token\n")
	for _, tc := range []struct {
		name string
		env  map[string]string
		ok   bool
		want []string // in stderr when refused
	}{
		{"file", map[string]string{"IDMINT_METRICS_TOKEN_FILE": good}, true, nil},
		{"placeholder", map[string]string{"IDMINT_METRICS_TOKEN_FILE": placeholder}, false, []string{"metrics_token", "placeholder"}},
		{"missing file", map[string]string{"IDMINT_METRICS_TOKEN_FILE": filepath.Join(dir, "missing")}, false, []string{"metrics_token_file", "missing"}},
		{"same as admin", map[string]string{"IDMINT_METRICS_TOKEN": "3f9c1e7a52b84d06a1e2c9d7b4f08a6e"}, false, []string{"metrics_token", "admin token"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"IDMINT_ADMIN_TOKEN": "3f9c1e7a52b84d06a1e2c9d7b4f08a6e"}
			for k, v := range tc.env {
				env[k] = v
			}
			code, out, stderr := runCLIEnv(t, env, "serve", "--check", "--data", t.TempDir())
			if tc.ok {
				if code != 0 || !strings.Contains(out, "configuration OK") {
					t.Errorf("serve --check: exit %d, %q %q; want OK", code, out, stderr)
				}
				return
			}
			if code == 0 {
				t.Fatalf("serve --check: exit 0, want a refusal naming %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("serve --check: stderr %q, want it to name %q", stderr, w)
				}
			}
		})
	}
}
