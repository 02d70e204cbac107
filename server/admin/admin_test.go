package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/server/internal/reqtest"
	"github.com/idmint/idmint/server/internal/servertest"
)

// newFixture is a server with the admin API over servertest's keys.
func newFixture(t testing.TB, mutate func(*server.Config)) *servertest.Fixture {
	t.Helper()
	return servertest.New(t, mutate, New)
}

func TestKeyAdmin(t *testing.T) {
	f := newFixture(t, nil)
	create := func(body string) *httptest.ResponseRecorder {
		return reqtest.Do(f.H, reqtest.Req{Method: "POST", Target: "/v1/keys", Body: body})
	}
	w := create(`{"name":"invoice","strategy":"counter","step":500,"tokens":["invoice-token-0123456"]}`)
	if w.Code != 201 || w.Header().Get("Location") != "/v1/keys/invoice" || strings.Contains(w.Body.String(), "invoice-token") {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	reqtest.WantError(t, create(`{"name":"invoice","strategy":"counter"}`), 409, server.CodeConflict, "name")
	reqtest.WantError(t, create(`{"name":"-x","strategy":"counter"}`), 400, server.CodeBadKey, "name")
	reqtest.WantError(t, create(`{"name":"y","strategy":"nope"}`), 400, "bad_strategy", "strategy")
	reqtest.WantError(t, create(`{"name":"y","strategy":"counter","options":{"bad":"1"}}`), 400, "bad_options", "options.bad")
	reqtest.WantError(t, create(`{"name":"y","strategy":"counter","store":"elsewhere"}`), 400, "bad_store", "store")
	reqtest.WantError(t, create(`{"name":"y","strategy":"counter","tokens":["short"]}`), 400, "bad_tokens", "tokens[0]")
	reqtest.WantError(t, create(`{"name":"y","strategy":"counter","options":{"broken":"yes"}}`), 503, server.CodeUnavailable, "")
	reqtest.WantError(t, create(`{"name":"y",`), 400, server.CodeBadBody, "body")
	reqtest.WantError(t, create(`{"name":"y","strategy":"counter"} {}`), 400, server.CodeBadBody, "body")
	reqtest.WantError(t, create(`{"name":"y","colour":"red"}`), 400, server.CodeBadBody, "colour")
	reqtest.WantError(t, create(`{"name":"y","step":"big"}`), 400, server.CodeBadBody, "step")
	reqtest.WantError(t, create(`{"name":"`+strings.Repeat("y", 70000)+`"}`), 413, server.CodeBodyTooLarge, "body")
	reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Method: "PUT", Target: "/v1/keys"}), 405, server.CodeMethodNotAllowed, "method")

	// The new key serves IDs, with its token.
	reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Target: "/v1/keys/invoice/ids"}), 401, server.CodeUnauthorized, "Authorization")
	if w := reqtest.Do(f.H, reqtest.Req{Target: "/v1/keys/invoice/ids", Hdr: reqtest.Bearer("invoice-token-0123456")}); w.Code != 200 {
		t.Fatalf("new key: %d %s", w.Code, w.Body)
	}

	w = reqtest.Do(f.H, reqtest.Req{Target: "/v1/keys"})
	var list struct{ Keys []server.KeyView }
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil || len(list.Keys) != 6 || list.Keys[0].Name != "invoice" || list.Keys[0].Source != "api" || !list.Keys[0].Auth {
		t.Fatalf("list: %d %s", w.Code, w.Body)
	}
	w = reqtest.Do(f.H, reqtest.Req{Target: "/v1/keys/order"})
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"source":"config"`) {
		t.Fatalf("get: %d %s", w.Code, w.Body)
	}
	reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Target: "/v1/keys/nosuch"}), 404, server.CodeUnknownKey, "key")
	reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Target: "/v1/keys/%FF"}), 400, server.CodeBadKey, "key")

	w = reqtest.Do(f.H, reqtest.Req{Method: "PATCH", Target: "/v1/keys/invoice", Body: `{"step":2000}`})
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"step":2000`) {
		t.Fatalf("patch: %d %s", w.Code, w.Body)
	}
	reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Method: "PATCH", Target: "/v1/keys/invoice", Body: `{"step":0}`}), 400, server.CodeBadStep, "step")
	reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Method: "PATCH", Target: "/v1/keys/invoice", Body: `{}`}), 400, server.CodeBadStep, "step")
	// A bad value is named as it was sent, in the API's words, never in
	// encoding/json's (Go types and struct fields).
	for _, tc := range []struct{ method, target, body, code, want string }{
		{"PATCH", "/v1/keys/invoice", `{"step":"abc"}`, server.CodeBadStep, `step: \"abc\": must be a whole number between 1 and 2^40`},
		{"PATCH", "/v1/keys/invoice", `{"step":1.5}`, server.CodeBadStep, `step: 1.5: must be a whole number`},
		{"POST", "/v1/keys", `{"name":"y","strategy":"counter","step":"big"}`, server.CodeBadBody, `step: got a JSON string, want a whole number`},
		{"POST", "/v1/keys", `{"name":"y","strategy":"counter","tokens":"one"}`, server.CodeBadBody, `tokens: got a JSON string, want an array`},
		{"POST", "/v1/keys", `{"name":"y","nonsense":1}`, server.CodeBadBody, `unknown field \"nonsense\"`},
	} {
		w := reqtest.Do(f.H, reqtest.Req{Method: tc.method, Target: tc.target, Body: tc.body, Hdr: map[string]string{"Content-Type": "application/json"}})
		if b := w.Body.String(); w.Code != 400 || !strings.Contains(b, `"code":"`+tc.code+`"`) || !strings.Contains(b, tc.want) || strings.Contains(b, "Go ") || strings.Contains(b, "unmarshal") {
			t.Errorf("%s %s: %d %s; want 400 %s saying %s", tc.method, tc.body, w.Code, b, tc.code, tc.want)
		}
	}
	reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Method: "PATCH", Target: "/v1/keys/invoice", Body: `{"step":13}`}), 400, server.CodeBadStep, "step")
	reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Method: "PATCH", Target: "/v1/keys/note", Body: `{"step":10}`}), 400, server.CodeUnsupported, "step")
	reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Method: "PATCH", Target: "/v1/keys/nosuch", Body: `{"step":10}`}), 404, server.CodeUnknownKey, "key")

	// Restart on the same data: the API-created key and its step survive.
	reg, _ := servertest.Registry()
	cfg := f.S.Env().Config
	s2, err := server.New(context.Background(), server.Options{Config: cfg, Registry: reg, Clock: f.Clk,
		KeyStore: &server.FileKeyStore{Path: filepath.Join(cfg.DataDir, "keys.json")},
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)), Surfaces: []server.NewSurface{New}})
	if err != nil {
		t.Fatal(err)
	}
	w = reqtest.Do(s2.Handler(), reqtest.Req{Target: "/v1/keys/invoice"})
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"step":2000`) {
		t.Fatalf("after restart: %d %s", w.Code, w.Body)
	}
	s2.Close(context.Background())

	reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Method: "DELETE", Target: "/v1/keys/order"}), 409, server.CodeConflict, "key")
	if w := reqtest.Do(f.H, reqtest.Req{Method: "DELETE", Target: "/v1/keys/invoice"}); w.Code != 204 {
		t.Fatalf("delete: %d %s", w.Code, w.Body)
	}
	reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Method: "DELETE", Target: "/v1/keys/invoice"}), 404, server.CodeUnknownKey, "key")
	reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Target: "/v1/keys/invoice/ids"}), 404, server.CodeUnknownKey, "key")

	// Admin needs loopback without an admin token, the token with one.
	reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Target: "/v1/keys", Remote: "192.0.2.1:9"}), 403, server.CodeForbidden, "Authorization")
	g := newFixture(t, func(c *server.Config) { c.AdminToken = servertest.AdminToken })
	reqtest.WantError(t, reqtest.Do(g.H, reqtest.Req{Target: "/v1/keys"}), 401, server.CodeUnauthorized, "Authorization")
	reqtest.WantError(t, reqtest.Do(g.H, reqtest.Req{Method: "DELETE", Target: "/v1/keys/x", Hdr: reqtest.Bearer("not-the-admin-token!")}), 403, server.CodeForbidden, "Authorization")
	if w := reqtest.Do(g.H, reqtest.Req{Target: "/v1/keys", Remote: "192.0.2.1:9", Hdr: reqtest.Bearer(servertest.AdminToken)}); w.Code != 200 {
		t.Fatalf("admin token: %d", w.Code)
	}
}

// Keys created through the admin API had no cap (4,949 in 100 s, a 754 KB
// dashboard state, 269 MB). Past max_keys a create is 429 naming it, and
// nothing is created.
func TestAttackKeyCap(t *testing.T) {
	f := newFixture(t, func(c *server.Config) { c.MaxKeys = 7 }) // the fixture's 5 config keys + 2
	for i := range 2 {
		if w := reqtest.Do(f.H, reqtest.Req{Method: "POST", Target: "/v1/keys", Body: fmt.Sprintf(`{"name":"k%d","strategy":"counter"}`, i)}); w.Code != 201 {
			t.Fatalf("create %d: %d %s", i, w.Code, w.Body)
		}
	}
	w := reqtest.Do(f.H, reqtest.Req{Method: "POST", Target: "/v1/keys", Body: `{"name":"one-too-many","strategy":"counter"}`})
	if w.Code != 429 || !strings.Contains(w.Body.String(), `"field":"max_keys"`) {
		t.Fatalf("create past max_keys: %d %s; want 429 naming max_keys", w.Code, w.Body)
	}
	if w := reqtest.Do(f.H, reqtest.Req{Target: "/v1/keys/one-too-many"}); w.Code != 404 {
		t.Fatalf("the refused key exists: %d", w.Code)
	}
	if w := reqtest.Do(f.H, reqtest.Req{Method: "DELETE", Target: "/v1/keys/k0"}); w.Code != 204 && w.Code != 200 {
		t.Fatalf("delete: %d %s", w.Code, w.Body)
	}
	if w := reqtest.Do(f.H, reqtest.Req{Method: "POST", Target: "/v1/keys", Body: `{"name":"one-too-many","strategy":"counter"}`}); w.Code != 201 {
		t.Fatalf("create after a delete: %d %s", w.Code, w.Body)
	}
}

// A zero-config server (no admin token, loopback) trusts loopback: what a
// web page can make the operator's browser send must not administer it.
// Each of these used to create a key or answer the state (Chromium, a
// page on another localhost port, fetch with mode no-cors; a DNS-rebinding
// name resolving to 127.0.0.1).
func TestAttackBrowserDrivesAdmin(t *testing.T) {
	f := newFixture(t, nil)
	create := `{"name":"csrf","strategy":"counter"}`
	for _, tc := range []struct {
		name   string
		method string
		target string
		body   string
		hdr    map[string]string
		status int
		field  string
	}{
		{"text/plain post (no-cors fetch)", "POST", "/v1/keys", create, map[string]string{"Content-Type": "text/plain;charset=UTF-8"}, 415, "Content-Type"},
		{"form post", "POST", "/v1/keys", create, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, "Content-Type"},
		{"cross-site fetch", "POST", "/v1/keys", create, map[string]string{"Sec-Fetch-Site": "same-site"}, 403, "Sec-Fetch-Site"},
		{"other origin", "POST", "/v1/keys", create, map[string]string{"Origin": "http://localhost:9999"}, 403, "Origin"},
		{"DNS rebinding, list", "GET", "/v1/keys", "", map[string]string{"Host": "evil.example:8080"}, 403, "Host"},
		{"DNS rebinding, key", "GET", "/v1/keys/order", "", map[string]string{"Host": "evil.example"}, 403, "Host"},
		{"DNS rebinding, create", "POST", "/v1/keys", create, map[string]string{"Host": "evil.example"}, 403, "Host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := reqtest.Do(f.H, reqtest.Req{Method: tc.method, Target: tc.target, Body: tc.body, Hdr: tc.hdr})
			if w.Code != tc.status || !strings.Contains(w.Body.String(), `"field":"`+tc.field+`"`) {
				t.Fatalf("%d %s; want %d naming %s", w.Code, w.Body, tc.status, tc.field)
			}
		})
	}
	if w := reqtest.Do(f.H, reqtest.Req{Target: "/v1/keys/csrf"}); w.Code != 404 {
		t.Fatalf("a refused request created the key: %d %s", w.Code, w.Body)
	}
	// What the operator's own tools send still works: curl by localhost
	// or the loopback address, the dashboard from its own origin.
	for _, hdr := range []map[string]string{
		{"Host": "localhost:8080"},
		{"Host": "127.0.0.1:8080", "Origin": "http://127.0.0.1:8080", "Sec-Fetch-Site": "same-origin"},
		{"Host": "[::1]:8080"},
	} {
		if w := reqtest.Do(f.H, reqtest.Req{Target: "/v1/keys", Hdr: hdr}); w.Code != 200 {
			t.Errorf("list with %v: %d %s", hdr, w.Code, w.Body)
		}
	}
	if w := reqtest.Do(f.H, reqtest.Req{Method: "POST", Target: "/v1/keys", Body: create, Hdr: map[string]string{"Host": "localhost"}}); w.Code != 201 {
		t.Fatalf("JSON create by localhost: %d %s", w.Code, w.Body)
	}
	// With an admin token the token is the proof, whatever the name.
	g := newFixture(t, func(c *server.Config) { c.AdminToken = servertest.AdminToken })
	if w := reqtest.Do(g.H, reqtest.Req{Target: "/v1/keys", Hdr: map[string]string{"Host": "idmint.internal", "Authorization": "Bearer " + servertest.AdminToken}}); w.Code != 200 {
		t.Fatalf("admin token under another name: %d %s", w.Code, w.Body)
	}
}

// The admin token guards every admin route, on both listeners, whatever
// the client's address; a key's token or one in the query string is not
// it.
func TestAuth(t *testing.T) {
	f := newFixture(t, func(c *server.Config) { c.AdminToken = servertest.AdminToken; c.Listen = "0.0.0.0:0" })
	for _, tc := range []struct {
		name, target string
		hdr          map[string]string
		remote       string
		want         int
	}{
		{"missing", "/v1/keys", nil, "", 401},
		{"missing, non-loopback client", "/v1/keys", nil, "203.0.113.7:5000", 401},
		{"with a key's token", "/v1/keys", reqtest.Bearer(servertest.KeyToken), "", 403},
		{"query string", "/v1/keys?admin_token=" + servertest.AdminToken, nil, "", 401},
		{"key, missing", "/v1/keys/order", nil, "", 401},
		{"right", "/v1/keys", reqtest.Bearer(servertest.AdminToken), "203.0.113.7:5000", 200},
		{"key, right", "/v1/keys/order", reqtest.Bearer(servertest.AdminToken), "", 200},
	} {
		for name, h := range map[string]http.Handler{"public": f.H, "admin": f.Adm} {
			w := reqtest.Do(h, reqtest.Req{Target: tc.target, Hdr: tc.hdr, Remote: tc.remote})
			if w.Code != tc.want {
				t.Errorf("%s listener, %s: %d %s, want %d", name, tc.name, w.Code, w.Body, tc.want)
			}
		}
	}
	if w := reqtest.Do(f.H, reqtest.Req{Method: "POST", Target: "/v1/keys", Body: `{"name":"x","strategy":"counter"}`, Hdr: reqtest.Bearer(servertest.KeyToken)}); w.Code != 403 || f.S.Lookup("x") != nil {
		t.Fatalf("create with a key's token: %d %s", w.Code, w.Body)
	}
}
