package leaf

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/server/internal/reqtest"
	"github.com/idmint/idmint/server/internal/servertest"
)

func TestLeafSegment(t *testing.T) {
	f := newFixture(t, nil)
	for i, want := range []string{"1", "2", "3"} {
		w := reqtest.Do(f.H, reqtest.Req{Target: "/api/segment/get/order"})
		if w.Code != 200 || w.Body.String() != want {
			t.Fatalf("call %d: %d %q, want 200 %q", i, w.Code, w.Body, want)
		}
		if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
			t.Fatalf("Content-Type %q", ct)
		}
	}
	// Leaf answers an unknown key with a 500 and Result{id=-2, ...}.
	w := reqtest.Do(f.H, reqtest.Req{Target: "/api/segment/get/nosuch"})
	if w.Code != 500 || !strings.Contains(w.Body.String(), `"message":"Result{id=-2, status=EXCEPTION}"`) {
		t.Fatalf("unknown key: %d %s", w.Code, w.Body)
	}
	f.Cs.Get("order").Fail.Store(true)
	w = reqtest.Do(f.H, reqtest.Req{Target: "/api/segment/get/order"})
	if w.Code != 500 || !strings.Contains(w.Body.String(), "Result{id=-3, status=EXCEPTION}") {
		t.Fatalf("refusal: %d %s", w.Code, w.Body)
	}
	reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Method: "PUT", Target: "/api/segment/get/order"}), 405, server.CodeMethodNotAllowed, "method")
	reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Target: "/api/segment/get/secret"}), 401, server.CodeUnauthorized, "Authorization")
	reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Target: "/api/segment/get/secret", Hdr: reqtest.Bearer("wrong-token-0123456789")}), 403, server.CodeForbidden, "Authorization")
	if w := reqtest.Do(f.H, reqtest.Req{Target: "/api/segment/get/secret", Hdr: reqtest.Bearer(servertest.KeyToken)}); w.Code != 200 || w.Body.String() != "1" {
		t.Fatalf("with token: %d %s", w.Code, w.Body)
	}
}

func TestLeafSnowflake(t *testing.T) {
	f := newFixture(t, nil)
	// Leaf's snowflake endpoint ignores the key: an unknown one is served
	// by leaf_snowflake_key.
	a := reqtest.Do(f.H, reqtest.Req{Target: "/api/snowflake/get/anything"})
	b := reqtest.Do(f.H, reqtest.Req{Target: "/api/snowflake/get/snowflake"})
	if a.Code != 200 || b.Code != 200 || a.Body.String() != "1" || b.Body.String() != "2" {
		t.Fatalf("%d %s / %d %s", a.Code, a.Body, b.Code, b.Body)
	}
	f.Cs.Get("snowflake").Fail.Store(true)
	w := reqtest.Do(f.H, reqtest.Req{Target: "/api/snowflake/get/x"})
	if w.Code != 500 || !strings.Contains(w.Body.String(), "Result{id=-1, status=EXCEPTION}") {
		t.Fatalf("refusal: %d %s", w.Code, w.Body)
	}
	g := newFixture(t, func(c *server.Config) { delete(c.Keys, "snowflake") })
	if w := reqtest.Do(g.H, reqtest.Req{Target: "/api/snowflake/get/x"}); w.Code != 500 {
		t.Fatalf("no snowflake key: %d %s", w.Code, w.Body)
	}
	// The only snowflake key serves Leaf's route whatever its name, as
	// Leaf's one generator answers for any tag.
	h := newFixture(t, func(c *server.Config) {
		delete(c.Keys, "snowflake")
		c.Keys["ids"] = server.KeyConfig{Strategy: "snowflake"}
	})
	if w := reqtest.Do(h.H, reqtest.Req{Target: "/api/snowflake/get/anything"}); w.Code != 200 || w.Body.String() != "1" {
		t.Fatalf("the only snowflake key, called ids: %d %s", w.Code, w.Body)
	}
	// Several, none called snowflake and none named: 404 saying so.
	two := func(c *server.Config) {
		delete(c.Keys, "snowflake")
		c.Keys["ids"] = server.KeyConfig{Strategy: "snowflake"}
		c.Keys["orders"] = server.KeyConfig{Strategy: "snowflake"}
	}
	w = reqtest.Do(newFixture(t, two).H, reqtest.Req{Target: "/api/snowflake/get/anything"})
	if w.Code != 404 || !strings.Contains(w.Body.String(), "several snowflake keys (ids, orders)") || !strings.Contains(w.Body.String(), "leaf_snowflake_key") {
		t.Fatalf("two snowflake keys: %d %s", w.Code, w.Body)
	}
	named := newFixture(t, func(c *server.Config) { two(c); c.LeafSnowflakeKey = "orders" })
	if w := reqtest.Do(named.H, reqtest.Req{Target: "/api/snowflake/get/x"}); w.Code != 200 {
		t.Fatalf("two snowflake keys, one named: %d %s", w.Code, w.Body)
	}
}

func TestLeafDecode(t *testing.T) {
	f := newFixture(t, func(c *server.Config) { c.Keys["snowflake"] = server.KeyConfig{Strategy: "text"} })
	// A Twitter-layout ID: time 1000 ms after the epoch, worker 5, seq 7.
	id := int64(1000)<<22 | 5<<12 | 7
	w := reqtest.Do(f.H, reqtest.Req{Target: "/decodeSnowflakeId?snowflakeId=" + itoa(id)})
	var m map[string]string
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil || w.Code != 200 {
		t.Fatalf("%d %s %v", w.Code, w.Body, err)
	}
	if m["workerId"] != "5" || m["sequenceId"] != "7" || !strings.HasPrefix(m["timestamp"], "1288834975657(") {
		t.Fatalf("decoded %v", m)
	}
	w = reqtest.Do(f.H, reqtest.Req{Target: "/decodeSnowflakeId?snowflakeId=abc"})
	if w.Code != 200 || !strings.Contains(w.Body.String(), "errorMsg") {
		t.Fatalf("bad id: %d %s", w.Code, w.Body)
	}
	if w := reqtest.Do(f.H, reqtest.Req{Target: "/decodeSnowflakeId"}); w.Code != 400 {
		t.Fatalf("missing: %d %s", w.Code, w.Body)
	}
	// With a decoding snowflake key, its decoder is used.
	g := newFixture(t, nil)
	w = reqtest.Do(g.H, reqtest.Req{Target: "/decodeSnowflakeId?snowflakeId=12"})
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil || m["workerId"] != "5" || m["sequenceId"] != "12" {
		t.Fatalf("key decoder: %s", w.Body)
	}
	// A key with tokens decodes only for them, as /v1/decode does: its
	// layout is its own.
	h := newFixture(t, func(c *server.Config) {
		c.Keys["snowflake"] = server.KeyConfig{Strategy: "snowflake", Tokens: []string{servertest.KeyToken}}
	})
	reqtest.WantError(t, reqtest.Do(h.H, reqtest.Req{Target: "/decodeSnowflakeId?snowflakeId=12"}), 401, server.CodeUnauthorized, "Authorization")
	reqtest.WantError(t, reqtest.Do(h.H, reqtest.Req{Target: "/decodeSnowflakeId?snowflakeId=12", Hdr: reqtest.Bearer("wrong-token-0123456789")}), 403, server.CodeForbidden, "Authorization")
	reqtest.WantError(t, reqtest.Do(h.H, reqtest.Req{Target: "/v1/decode/12"}), 401, server.CodeUnauthorized, "Authorization")
	w = reqtest.Do(h.H, reqtest.Req{Target: "/decodeSnowflakeId?snowflakeId=12", Hdr: reqtest.Bearer(servertest.KeyToken)})
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil || w.Code != 200 || m["sequenceId"] != "12" {
		t.Fatalf("with the token: %d %s", w.Code, w.Body)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestMonitorViews(t *testing.T) {
	f := newFixture(t, nil)
	reqtest.Do(f.H, reqtest.Req{Target: "/api/segment/get/order"})
	w := reqtest.Do(f.H, reqtest.Req{Target: "/cache"})
	var cache map[string]server.CacheView
	if err := json.Unmarshal(w.Body.Bytes(), &cache); err != nil || w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if c := cache["order"]; c.Value0 != 1 || !c.InitOk || c.Key != "order" {
		t.Fatalf("cache[order] = %+v", c)
	}
	if _, ok := cache["note"]; ok {
		t.Fatal("a text key has no cache view")
	}
	w = reqtest.Do(f.H, reqtest.Req{Target: "/db"})
	var rows []server.StoreRow
	if err := json.Unmarshal(w.Body.Bytes(), &rows); err != nil || w.Code != 200 || len(rows) != 4 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Target: "/cache", Remote: "192.0.2.7:5000"}), 403, server.CodeForbidden, "Authorization")
	f.Cs.Get("order").Fail.Store(true)
	reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Target: "/db"}), 503, server.CodeUnavailable, "")
	reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Method: "POST", Target: "/cache"}), 405, server.CodeMethodNotAllowed, "method")

	g := newFixture(t, func(c *server.Config) { c.AdminToken = servertest.AdminToken })
	reqtest.WantError(t, reqtest.Do(g.H, reqtest.Req{Target: "/cache"}), 401, server.CodeUnauthorized, "Authorization")
	reqtest.WantError(t, reqtest.Do(g.H, reqtest.Req{Target: "/db", Hdr: reqtest.Bearer("x-wrong-token-xxxxxxx")}), 403, server.CodeForbidden, "Authorization")
	if w := reqtest.Do(g.H, reqtest.Req{Target: "/db", Remote: "192.0.2.7:5000", Hdr: reqtest.Bearer(servertest.AdminToken)}); w.Code != 200 {
		t.Fatalf("admin token: %d %s", w.Code, w.Body)
	}
}

// Requests Hot serves get exactly what Leaf's mux routes give them
// (status, headers, body up to the numbers issued, and as many IDs of the
// same keys), and Hot leaves
// escaped and odd paths to the mux.
func TestHotRoutesMatchMux(t *testing.T) {
	f := newFixture(t, nil)
	sf := New(f.S)
	mux := http.NewServeMux()
	sf.Routes(mux)
	mux.Handle("/", f.H) // the core's routes and its 404
	viaMux := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Cache-Control"] = []string{"no-store"}
		mux.ServeHTTP(w, r)
	})
	hot := []string{
		"/api/segment/get/order", "/api/segment/get/order/", "/api/segment/get/nokey", "/api/segment/get/secret",
		"/api/snowflake/get/snowflake", "/api/snowflake/get/anything/", "/api/segment/get/note",
	}
	cold := []string{
		"/api/segment/get/%6Frder", "/api/segment/get/a%2Fb", "/api/segment/get/", "/api/segment/get/a/b",
		"/api/snowflake/get/", "/decodeSnowflakeId", "/cache", "/db",
	}
	for _, list := range []struct {
		paths []string
		hot   bool
	}{{hot, true}, {cold, false}} {
		for _, target := range list.paths {
			for _, m := range []string{"GET", "POST", "HEAD", "DELETE"} {
				r := httptest.NewRequest(m, target, nil)
				if got := r.URL.RawPath == "" && sf.Hot(httptest.NewRecorder(), r, r.URL.Path); got != list.hot {
					t.Errorf("%s %s: hot = %v, want %v", m, target, got, list.hot)
				}
				n0 := f.Cs.Issued()
				a := reqtest.Do(f.H, reqtest.Req{Method: m, Target: target})
				n1 := f.Cs.Issued()
				b := reqtest.Do(viaMux, reqtest.Req{Method: m, Target: target})
				if sa, sb := reqtest.Shape(a), reqtest.Shape(b); sa != sb {
					t.Errorf("%s %s:\nserved:\n%s\nthe mux:\n%s", m, target, sa, sb)
				}
				if da, db := reqtest.Drew(n0, n1), reqtest.Drew(n1, f.Cs.Issued()); !maps.Equal(da, db) {
					t.Errorf("%s %s: served drew %v, the mux %v", m, target, da, db)
				}
			}
		}
	}
}

// HEAD never consumes an ID on Leaf's routes and answers after the same
// checks as GET; every Leaf answer says Cache-Control: no-store.
func TestHeadAndNoStore(t *testing.T) {
	f := newFixture(t, nil)
	for _, target := range []string{"/api/segment/get/order", "/api/snowflake/get/snowflake"} {
		w := reqtest.Do(f.H, reqtest.Req{Method: "HEAD", Target: target})
		if w.Code != 200 || w.Body.Len() != 0 || w.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("HEAD %s: %d %q Cache-Control %q", target, w.Code, w.Body, w.Header().Get("Cache-Control"))
		}
	}
	if w := reqtest.Do(f.H, reqtest.Req{Method: "HEAD", Target: "/api/segment/get/nosuch"}); w.Code != 500 {
		t.Errorf("HEAD for an unknown tag: %d, want Leaf's 500", w.Code)
	}
	if w := reqtest.Do(f.H, reqtest.Req{Method: "HEAD", Target: "/api/segment/get/secret"}); w.Code != 401 {
		t.Errorf("HEAD without the key's token: %d", w.Code)
	}
	if w := reqtest.Do(f.H, reqtest.Req{Target: "/api/segment/get/order"}); w.Body.String() != "1" {
		t.Errorf("HEAD consumed IDs: the first GET answers %q, want 1", w.Body)
	}
	for _, target := range []string{"/api/segment/get/order", "/api/snowflake/get/snowflake", "/api/segment/get/nosuch", "/decodeSnowflakeId?snowflakeId=1", "/decodeSnowflakeId", "/cache", "/db"} {
		for _, m := range []string{"GET", "POST"} {
			if w := reqtest.Do(f.H, reqtest.Req{Method: m, Target: target}); w.Header().Get("Cache-Control") != "no-store" {
				t.Errorf("%s %s: %d, Cache-Control %q", m, target, w.Code, w.Header().Get("Cache-Control"))
			}
		}
	}
}

// A key's tokens and the admin token guard Leaf's routes as they guard
// the native ones, on the public and the admin listener.
func TestAuth(t *testing.T) {
	const otherTok = "other-token-0123456789"
	f := newFixture(t, func(c *server.Config) {
		c.AdminToken = servertest.AdminToken
		c.Keys["other"] = server.KeyConfig{Strategy: "counter", Tokens: []string{otherTok}}
	})
	for _, tc := range []struct {
		name, target string
		hdr          map[string]string
		want         int
	}{
		{"missing", "/api/segment/get/secret", nil, 401},
		{"other key's token", "/api/segment/get/secret", reqtest.Bearer(otherTok), 403},
		{"admin token on a key", "/api/segment/get/secret", reqtest.Bearer(servertest.AdminToken), 403},
		{"right", "/api/segment/get/secret", reqtest.Bearer(servertest.KeyToken), 200},
		{"cache without a token", "/cache", nil, 401},
		{"db with a key's token", "/db", reqtest.Bearer(servertest.KeyToken), 403},
		{"db with the admin token", "/db", reqtest.Bearer(servertest.AdminToken), 200},
	} {
		w := reqtest.Do(f.H, reqtest.Req{Target: tc.target, Hdr: tc.hdr, Remote: "203.0.113.9:1"})
		if w.Code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, w.Code, w.Body, tc.want)
		}
	}
	for _, target := range []string{"/db", "/cache"} {
		if w := reqtest.Do(f.Adm, reqtest.Req{Target: target, Remote: "203.0.113.9:1"}); w.Code != 401 {
			t.Errorf("admin listener %s without a token: %d", target, w.Code)
		}
		if w := reqtest.Do(f.Adm, reqtest.Req{Target: target, Hdr: reqtest.Bearer(servertest.KeyToken)}); w.Code != 403 {
			t.Errorf("admin listener %s with a key's token: %d", target, w.Code)
		}
	}
}

// A key's rate limit holds on Leaf's route, answered as Spring answers
// an error, with Retry-After.
func TestRateLimit(t *testing.T) {
	f := newFixture(t, nil)
	for i := range 2 {
		if w := reqtest.Do(f.H, reqtest.Req{Target: "/api/segment/get/slow"}); w.Code != 200 {
			t.Fatalf("call %d: %d %s", i, w.Code, w.Body)
		}
	}
	w := reqtest.Do(f.H, reqtest.Req{Target: "/api/segment/get/slow"})
	if w.Code != 429 || w.Header().Get("Retry-After") != "1" || !strings.Contains(w.Body.String(), `"message":"key \"slow\" is rate limited"`) {
		t.Fatalf("over the limit: %d Retry-After %q %s", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	f.Clk.Advance(time.Second)
	if w := reqtest.Do(f.H, reqtest.Req{Target: "/api/segment/get/slow"}); w.Code != 200 {
		t.Fatalf("after a second: %d", w.Code)
	}
}

// Leaf's requests count in the server's metrics under their own routes,
// and its refusals reach the server's list of recent refusals (which the
// dashboard shows).
func TestMetricsAndRefusals(t *testing.T) {
	f := newFixture(t, nil)
	reqtest.Do(f.H, reqtest.Req{Target: "/api/segment/get/order"})
	reqtest.Do(f.H, reqtest.Req{Target: "/api/segment/get/nosuch"})
	f.Cs.Get("snowflake").Fail.Store(true)
	reqtest.Do(f.H, reqtest.Req{Target: "/api/snowflake/get/x"})
	w := reqtest.Do(f.H, reqtest.Req{Target: "/metrics"})
	for _, want := range []string{
		`idmint_ids_issued_total{key="order",strategy="counter"} 1`,
		`idmint_http_requests_total{code="2xx",route="leaf_segment"} 1`,
		`idmint_http_requests_total{code="5xx",route="leaf_segment"} 1`,
		`idmint_http_requests_total{code="5xx",route="leaf_snowflake"} 1`,
		`idmint_http_request_duration_seconds_count{route="leaf_decode"} 0`,
		`idmint_http_request_duration_seconds_count{route="cache"} 0`,
	} {
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if rs := f.S.Refusals(); len(rs) != 1 || rs[0].Key != "snowflake" || rs[0].Code != server.CodeUnavailable {
		t.Fatalf("recent refusals = %+v, want the snowflake key's", rs)
	}
}
