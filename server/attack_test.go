package server

import (
	"net/http"
	"net/http/httptest"
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

// Every 429 and 503 carries Retry-After, whatever produced it.
func TestAttackRetryAfterAlways(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	for _, st := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		w := httptest.NewRecorder()
		f.s.writeError(w, apiError{status: st, code: CodeUnavailable, msg: "x"})
		if w.Header().Get("Retry-After") == "" {
			t.Errorf("%d without Retry-After", st)
		}
	}
	for i := 0; i < 3; i++ {
		do(f.h, req{target: "/v1/keys/slow/ids"})
	}
	if w := do(f.h, req{target: "/v1/keys/slow/ids"}); w.Code != 429 || w.Header().Get("Retry-After") == "" {
		t.Errorf("rate limited: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	f.cs.get("order").unrdy.Store(true)
	if w := do(f.h, req{target: "/readyz"}); w.Code != 503 || w.Header().Get("Retry-After") == "" {
		t.Errorf("readyz: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
}

// HEAD never consumes an ID, on the native routes and Leaf's; every
// ID-issuing route answers Cache-Control: no-store.
func TestAttackHeadAndNoStore(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	for _, target := range []string{"/v1/keys/order/ids?count=50", "/v1/keys/order/range?count=50", "/api/segment/get/order", "/api/snowflake/get/snowflake", "/v1/snowflake/snowflake"} {
		w := do(f.h, req{method: "HEAD", target: target})
		if w.Code != 200 || w.Body.Len() != 0 || w.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("HEAD %s: %d %q Cache-Control %q", target, w.Code, w.Body, w.Header().Get("Cache-Control"))
		}
	}
	if w := do(f.h, req{target: "/v1/keys/order/ids"}); !strings.Contains(w.Body.String(), `"ids":["1"]`) {
		t.Errorf("HEAD consumed IDs: the first GET answers %s", w.Body)
	}
	if w := do(f.h, req{method: "HEAD", target: "/v1/keys/nosuch/ids"}); w.Code != 404 {
		t.Errorf("HEAD on an unknown key: %d", w.Code)
	}
	if w := do(f.h, req{method: "HEAD", target: "/v1/keys/secret/ids"}); w.Code != 401 {
		t.Errorf("HEAD without the key's token: %d", w.Code)
	}
	for _, target := range []string{"/v1/keys/order/ids", "/v1/keys/order/range", "/api/segment/get/order", "/api/snowflake/get/snowflake", "/v1/snowflake/snowflake", "/v1/keys/nosuch/ids"} {
		for _, m := range []string{"GET", "POST"} {
			if w := do(f.h, req{method: m, target: target}); w.Header().Get("Cache-Control") != "no-store" {
				t.Errorf("%s %s: %d, Cache-Control %q", m, target, w.Code, w.Header().Get("Cache-Control"))
			}
		}
	}
}

// The rule for keys without tokens once admin_token is set: they serve
// every client that reaches the listener (loopback or not); a key with
// tokens serves only its token's bearers; administration needs the admin
// token.
func TestAttackNonLoopbackClients(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) { c.AdminToken = adminTok; c.Listen = "0.0.0.0:0" })
	const remote = "203.0.113.7:5000"
	if w := do(f.h, req{target: "/v1/keys/order/ids", remote: remote}); w.Code != 200 {
		t.Errorf("tokenless key, non-loopback client: %d %s", w.Code, w.Body)
	}
	if w := do(f.h, req{target: "/v1/keys/secret/ids", remote: remote}); w.Code != 401 {
		t.Errorf("key with tokens, no token: %d", w.Code)
	}
	if w := do(f.h, req{target: "/v1/keys", remote: remote}); w.Code != 401 {
		t.Errorf("admin without the admin token: %d", w.Code)
	}
	if w := do(f.h, req{target: "/v1/keys", remote: "127.0.0.1:1"}); w.Code != 401 {
		t.Errorf("admin from loopback without the admin token (one is set): %d", w.Code)
	}
}
