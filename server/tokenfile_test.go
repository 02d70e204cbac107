package server

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTokenFiles: admin_token_file and metrics_token_file are read into
// the tokens (first line, its line break dropped); the environment's
// IDMINT_*_TOKEN and IDMINT_*_TOKEN_FILE replace both of the config's
// forms; a token given twice, or an unreadable, empty or oversized file,
// is an error naming the field and the path.
func TestTokenFiles(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	admin := file("admin", "admin-token-from-file-0123\n")
	metrics := file("metrics", "metrics-token-from-file-0123") // a Kubernetes Secret's file has no line break
	crlf := file("crlf", "metrics-token-crlf-0123456\r\nsecond line\n")
	empty := file("empty", "\nsecond line\n")
	big := file("big", strings.Repeat("x", maxTokenFile+1))
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for _, tc := range []struct {
		name                string
		cfg                 Config
		env                 func(string) string
		wantAdmin, wantMetr string
		wantErr             []string // all in the error
	}{
		{name: "files", cfg: Config{AdminTokenFile: admin, MetricsTokenFile: metrics}, env: env(),
			wantAdmin: "admin-token-from-file-0123", wantMetr: "metrics-token-from-file-0123"},
		{name: "crlf", cfg: Config{MetricsTokenFile: crlf}, env: env(), wantMetr: "metrics-token-crlf-0123456"},
		{name: "env file over config value", cfg: Config{MetricsToken: "config-metrics-token-0123"},
			env: env("IDMINT_METRICS_TOKEN_FILE", metrics), wantMetr: "metrics-token-from-file-0123"},
		{name: "env value over config file", cfg: Config{AdminTokenFile: filepath.Join(dir, "missing")},
			env: env("IDMINT_ADMIN_TOKEN", "env-admin-token-0123456"), wantAdmin: "env-admin-token-0123456"},
		{name: "env value", cfg: Config{}, env: env("IDMINT_METRICS_TOKEN", "env-metrics-token-01234"), wantMetr: "env-metrics-token-01234"},
		{name: "both in config", cfg: Config{MetricsToken: "config-metrics-token-0123", MetricsTokenFile: metrics}, env: env(),
			wantErr: []string{"metrics_token and metrics_token_file are both given"}},
		{name: "both in env", cfg: Config{}, env: env("IDMINT_ADMIN_TOKEN", "x", "IDMINT_ADMIN_TOKEN_FILE", admin),
			wantErr: []string{"IDMINT_ADMIN_TOKEN and IDMINT_ADMIN_TOKEN_FILE"}},
		{name: "missing", cfg: Config{AdminTokenFile: filepath.Join(dir, "missing")}, env: env(),
			wantErr: []string{"admin_token_file", "missing"}},
		{name: "empty", cfg: Config{MetricsTokenFile: empty}, env: env(), wantErr: []string{"metrics_token_file", empty, "holds no token"}},
		{name: "big", cfg: Config{MetricsTokenFile: big}, env: env(), wantErr: []string{"metrics_token_file", big, "larger than"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cfg
			err := c.Override(tc.env)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("Override: nil error, want one with %q", tc.wantErr)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("Override: %v, want it to say %q", err, w)
					}
				}
				if strings.Contains(err.Error(), "second line") || strings.Contains(err.Error(), "xxxx") {
					t.Errorf("Override: %v shows the file's content", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.AdminToken != tc.wantAdmin || c.MetricsToken != tc.wantMetr {
				t.Errorf("tokens %q, %q; want %q, %q", c.AdminToken, c.MetricsToken, tc.wantAdmin, tc.wantMetr)
			}
			// A second Override (as a caller may do) finds the token it
			// read, not a token given twice.
			if err := c.Override(tc.env); err != nil {
				t.Errorf("second Override: %v", err)
			}
		})
	}
}

// TestMetricsTokenValidation: the metrics token is at least 16
// characters and is not the admin token (whoever scrapes would then
// administer); a token file that Override did not read is named.
func TestMetricsTokenValidation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		field string // "" = valid
	}{
		{"ok", Config{AdminToken: "admin-token-0123456789", MetricsToken: "metrics-token-0123456789"}, ""},
		{"short", Config{AdminToken: "admin-token-0123456789", MetricsToken: "short"}, "metrics_token"},
		{"same as admin", Config{AdminToken: "admin-token-0123456789", MetricsToken: "admin-token-0123456789"}, "metrics_token"},
		{"file not read", Config{MetricsTokenFile: "/run/secrets/metrics"}, "metrics_token_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cfg
			c.SetDefaults()
			err := c.Validate(NewRegistry())
			var ve *ValidationError
			if !errors.As(err, &ve) {
				if tc.field != "" {
					t.Fatalf("Validate: %v, want a problem on %s", err, tc.field)
				}
				return
			}
			found := false
			for _, p := range ve.Problems {
				if p.Field == tc.field {
					found = true
				}
				if strings.Contains(p.Value, "token-0123") {
					t.Errorf("problem %v shows a token", p)
				}
			}
			if !found {
				t.Errorf("Validate: %v, want a problem on %q", err, tc.field)
			}
		})
	}
}
