package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/idmint/idmint/server"
)

// metricsToken is the test node's scrape-only credential; otherToken is a
// token the node does not know, to compare it with.
const (
	metricsToken = "openapi-metrics-token-0123456789"
	otherToken   = "openapi-other-token-01234567890"
)

// scrapeMethods are the methods each route is tried with.
var scrapeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// TestMetricsTokenScrapesOnly: the metrics token reads /metrics on every
// listener that serves it, and on every other route of both listeners
// (the routes enumerated from the node's own muxes, so a route added
// later is covered too: key administration, pprof, the dashboard's data)
// it gets exactly what a token the node does not know gets, a 401 or 403
// with the JSON error body where that is refused. The admin token still
// reads /metrics; no token does not.
func TestMetricsTokenScrapesOnly(t *testing.T) {
	for _, metrics := range []string{"admin", "public"} {
		t.Run("metrics="+metrics, func(t *testing.T) {
			n := newNodeWith(t, func(c *server.Config) { c.MetricsToken = metricsToken; c.Metrics = metrics })
			pubMux, admMux := n.srv.RouteMuxes()
			do := func(base, method, target, token string) (int, http.Header, []byte) {
				t.Helper()
				req, err := http.NewRequest(method, base+target, nil)
				if err != nil {
					t.Fatal(err)
				}
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("%s %s: %v", method, target, err)
				}
				defer res.Body.Close()
				b, _ := io.ReadAll(res.Body)
				return res.StatusCode, res.Header, b
			}
			refusedAdmin := map[string]bool{} // admin-listener patterns the metrics token was refused on
			for _, l := range []struct {
				name   string
				base   string
				mux    *http.ServeMux
				serves bool // serves /metrics
			}{{"public", n.pub.URL, pubMux, metrics == "public"}, {"admin", n.adm.URL, admMux, true}} {
				for _, pattern := range muxPatterns(t, l.mux) {
					path := pattern
					if _, p, ok := strings.Cut(pattern, " "); ok { // "METHOD /path"
						path = p
					}
					// seconds=1 bounds pprof's profile and trace (30 s by
					// default) should a broken guard let the request in.
					target := concrete(path) + "?seconds=1"
					if path == "/" {
						target = "/no-such-route"
					}
					for _, m := range scrapeMethods {
						got, hdr, body := do(l.base, m, target, metricsToken)
						if path == "/metrics" && l.serves && (m == http.MethodGet || m == http.MethodHead) {
							if got != http.StatusOK {
								t.Errorf("%s listener: %s /metrics with the metrics token: %d, want 200\n%s", l.name, m, got, body)
							}
							if m == http.MethodGet && !strings.Contains(string(body), "idmint_") {
								t.Errorf("%s listener: /metrics with the metrics token holds no idmint_ series", l.name)
							}
							if st, _, _ := do(l.base, m, target, adminToken); st != http.StatusOK {
								t.Errorf("%s listener: %s /metrics with the admin token: %d, want 200", l.name, m, st)
							}
							for _, tok := range []string{"", otherToken} {
								if st, _, b := do(l.base, m, target, tok); st != http.StatusUnauthorized && st != http.StatusForbidden {
									t.Errorf("%s listener: %s /metrics with token %q: %d, want 401 or 403\n%s", l.name, m, tok, st, b)
								}
							}
							continue
						}
						want, _, _ := do(l.base, m, target, otherToken)
						if got != want {
							t.Errorf("%s listener: %s %s (pattern %q) with the metrics token: %d, with an unknown token %d: the metrics token grants more than /metrics\n%s", l.name, m, target, pattern, got, want, body)
							continue
						}
						if got == http.StatusUnauthorized || got == http.StatusForbidden {
							var e struct {
								Error struct{ Code, Message string }
							}
							if ct := hdr.Get("Content-Type"); m != http.MethodHead && (ct != "application/json" || json.Unmarshal(body, &e) != nil || e.Error.Code == "") {
								t.Errorf("%s listener: %s %s refused %d with %s %q, want the JSON error body", l.name, m, target, got, ct, body)
							}
							if l.name == "admin" {
								refusedAdmin[path] = true
							}
						}
					}
				}
			}
			// The enumeration reached what a scraper must never have.
			for _, p := range []string{"/v1/keys", "/v1/keys/{key}", "/debug/pprof/", "/debug/pprof/profile", "/ui/api/state"} {
				if !refusedAdmin[p] {
					t.Errorf("admin listener: %s was not among the routes the metrics token was refused on %v", p, refusedAdmin)
				}
			}
		})
	}
}

// TestMetricsTokenWithoutAdminToken: on a loopback node without an admin
// token whose public listener serves /metrics, a configured metrics token
// still guards /metrics (no token: 401) and still only reads it (a POST
// with it: 403).
func TestMetricsTokenWithoutAdminToken(t *testing.T) {
	n := newNodeWith(t, func(c *server.Config) {
		c.AdminToken, c.AdminListen, c.MetricsToken = "", "", metricsToken
	})
	for _, tc := range []struct {
		method, token string
		want          int
	}{
		{http.MethodGet, metricsToken, http.StatusOK},
		{http.MethodHead, metricsToken, http.StatusOK},
		{http.MethodGet, "", http.StatusUnauthorized},
		{http.MethodGet, otherToken, http.StatusForbidden},
		{http.MethodPost, metricsToken, http.StatusForbidden},
		{http.MethodPost, "", http.StatusUnauthorized},
	} {
		req, err := http.NewRequest(tc.method, n.pub.URL+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tc.want {
			t.Errorf("%s /metrics with token %q: %d, want %d", tc.method, tc.token, res.StatusCode, tc.want)
		}
	}
}
