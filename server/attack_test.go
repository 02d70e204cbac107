package server

import (
	"net/http"
	"strings"
	"testing"
)

// Security tests of the server core (idmint issue 11). Each reproduces a
// hole that was open and asserts it is closed; the order-number cases
// are in server/strategies/attack_test.go.

// /metrics moves to the admin listener by default when one is
// configured, and can be put on either explicitly.
func TestAttackMetricsListener(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		mutate        func(*Config)
		public, admin int
	}{
		{"no admin listener", nil, 200, 200},
		{"admin listener", func(c *Config) { c.AdminListen = "127.0.0.1:0" }, 404, 200},
		{"public on request", func(c *Config) { c.AdminListen = "127.0.0.1:0"; c.Metrics = "public" }, 200, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.mutate)
			if w := do(f.h, req{target: "/metrics"}); w.Code != tc.public {
				t.Errorf("public /metrics: %d, want %d", w.Code, tc.public)
			}
			if w := do(f.adm, req{target: "/metrics"}); w.Code != tc.admin || !strings.Contains(w.Body.String(), "idmint_keys") {
				t.Errorf("admin /metrics: %d, want %d", w.Code, tc.admin)
			}
		})
	}
	cfg := &Config{Metrics: "admin"}
	cfg.SetDefaults()
	reg, _ := testRegistry()
	if err := cfg.Validate(reg); err == nil || !strings.Contains(err.Error(), "metrics") {
		t.Errorf("metrics: admin without admin_listen validates: %v", err)
	}
	cfg.Metrics = "everywhere"
	if err := cfg.Validate(reg); err == nil || !strings.Contains(err.Error(), "metrics") {
		t.Errorf("metrics: everywhere validates: %v", err)
	}
	_ = http.StatusOK
}
