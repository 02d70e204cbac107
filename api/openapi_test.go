package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/idmint/idmint/api"
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/server/admin"
	"github.com/idmint/idmint/server/dashboard"
	"github.com/idmint/idmint/server/grpcapi"
	"github.com/idmint/idmint/server/leaf"
	"github.com/idmint/idmint/server/strategies"
)

// The tokens of the test node.
const (
	adminToken = "openapi-admin-token-0123456789"
	keyToken   = "openapi-key-token-0123456789"
	// maxBody is the node's max_body_bytes: small, so a 413 is cheap.
	maxBody = 1024
)

// loadDoc loads and validates an OpenAPI document.
func loadDoc(t *testing.T, b []byte) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(b)
	if err != nil {
		t.Fatalf("load api/openapi.yaml: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("api/openapi.yaml is not a valid OpenAPI document: %v", err)
	}
	return doc
}

// TestOpenAPIDocumentIsValid: the embedded document loads, validates as
// OpenAPI 3.1, and names every operation once.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	doc := loadDoc(t, api.OpenAPI)
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi: %q, want 3.1", doc.OpenAPI)
	}
	ids := map[string]string{}
	for path, item := range doc.Paths.Map() {
		for m, op := range item.Operations() {
			if op.OperationID == "" {
				t.Errorf("%s %s has no operationId", m, path)
			} else if prev, dup := ids[op.OperationID]; dup {
				t.Errorf("operationId %q is on %s and on %s %s", op.OperationID, prev, m, path)
			}
			ids[op.OperationID] = m + " " + path
		}
	}
}

// node is a real node as cmd/idmint composes it (the strategies serve
// registers, every surface), behind the public and the admin listener.
type node struct {
	srv      *server.Server
	pub, adm *httptest.Server
}

func newNode(t *testing.T) *node {
	t.Helper()
	return newNodeWith(t, nil)
}

// newNodeWith is newNode with its config changed by edit before the node
// starts.
func newNodeWith(t *testing.T, edit func(*server.Config)) *node {
	t.Helper()
	reg := server.NewRegistry()
	if err := strategies.Register(reg); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := &server.Config{DataDir: dir, Coordinator: "static://7", AdminToken: adminToken,
		AdminListen: "127.0.0.1:0", MaxBodyBytes: maxBody,
		MaxKeys: 7, // the six below and one created through the API
		Stores:  map[string]string{"default": "sqlite://" + filepath.Join(dir, "seg.db")},
		Keys: map[string]server.KeyConfig{
			"order":     {Strategy: "segment", Step: 100},
			"snowflake": {Strategy: "snowflake", Layout: "leaf"},
			"uuid":      {Strategy: "uuid"},
			"mono":      {Strategy: "monotonic"}, // single node: the bound in the data directory
			"secret":    {Strategy: "segment", Tokens: []string{keyToken}},
			// One request, then none for 1,000 s.
			"slow": {Strategy: "segment", RateLimit: 0.001},
		}}
	if edit != nil {
		edit(cfg)
	}
	cfg.SetDefaults()
	srv, err := server.New(context.Background(), server.Options{Config: cfg, Registry: reg,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		KeyStore: &server.FileKeyStore{Path: filepath.Join(dir, "keys.json")},
		Surfaces: []server.NewSurface{leaf.New, admin.New, dashboard.New, grpcapi.New}})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{srv: srv, pub: httptest.NewServer(srv.Handler()), adm: httptest.NewServer(srv.AdminHandler())}
	t.Cleanup(func() {
		n.pub.Close()
		n.adm.Close()
		srv.Close(context.Background())
	})
	return n
}

// muxPatterns lists the patterns registered on mux. ServeMux has no
// listing: this walks its routing tree and index for net/http's pattern
// values and reads their text (pattern.str), so it needs no second list
// of the routes kept by hand. It fails the test when it finds none, as
// it would if a Go release renamed them.
func muxPatterns(t *testing.T, mux *http.ServeMux) []string {
	t.Helper()
	out := map[string]bool{}
	seen := map[uintptr]bool{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() || seen[v.Pointer()] {
				return
			}
			seen[v.Pointer()] = true
			walk(v.Elem())
		case reflect.Struct:
			typ := v.Type()
			if typ.PkgPath() == "net/http" && typ.Name() == "pattern" {
				out[v.FieldByName("str").String()] = true
				return
			}
			for i := range v.NumField() {
				if typ.Field(i).Name == "handler" {
					continue // the handlers, not the routing
				}
				walk(v.Field(i))
			}
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.Map:
			it := v.MapRange()
			for it.Next() {
				walk(it.Key())
				walk(it.Value())
			}
		}
	}
	walk(reflect.ValueOf(mux))
	if len(out) == 0 {
		t.Fatal("found no pattern in http.ServeMux: its internals changed; update muxPatterns")
	}
	return slices.Sorted(func(yield func(string) bool) {
		for p := range out {
			if !yield(p) {
				return
			}
		}
	})
}

// docPattern is the mux pattern a document path stands for: its
// x-idmint-pattern, or the path itself.
func docPattern(path string, item *openapi3.PathItem) string {
	if p, ok := item.Extensions["x-idmint-pattern"].(string); ok {
		return p
	}
	return path
}

// adminOnly reports whether a document path is served on the admin
// listener only.
func adminOnly(item *openapi3.PathItem) bool {
	l, _ := item.Extensions["x-idmint-listener"].(string)
	return l == "admin"
}

// concrete fills a document path's parameters with a value.
func concrete(path string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(path, '{')
		if i < 0 {
			b.WriteString(path)
			return b.String()
		}
		j := strings.IndexByte(path[i:], '}')
		b.WriteString(path[:i] + "x")
		path = path[i+j+1:]
	}
}

// routeProblems compares the routes the node's muxes register with the
// document's paths: each pattern is a path of the document (the catch-all
// "/", which answers 404 to every other path, aside), each path is a
// pattern of the listener it names, and the mux sends the path to that
// pattern.
func routeProblems(t *testing.T, doc *openapi3.T, srv *server.Server) []string {
	var probs []string
	pubMux, admMux := srv.RouteMuxes()
	for _, l := range []struct {
		name  string
		mux   *http.ServeMux
		admin bool
	}{{"public", pubMux, false}, {"admin", admMux, true}} {
		want := map[string]string{} // pattern -> document path
		for path, item := range doc.Paths.Map() {
			if adminOnly(item) && !l.admin {
				continue
			}
			want[docPattern(path, item)] = path
			r := httptest.NewRequest(http.MethodGet, concrete(path), nil)
			if _, got := l.mux.Handler(r); got != docPattern(path, item) {
				probs = append(probs, fmt.Sprintf("%s listener: the document's %s (%s) is served by pattern %q, want %q", l.name, path, concrete(path), got, docPattern(path, item)))
			}
		}
		served := map[string]bool{}
		for _, p := range muxPatterns(t, l.mux) {
			served[p] = true
			if p == "/" {
				continue
			}
			if _, ok := want[p]; !ok {
				probs = append(probs, fmt.Sprintf("%s listener: route %q is served but not in api/openapi.yaml", l.name, p))
			}
		}
		for p, path := range want {
			if !served[p] {
				probs = append(probs, fmt.Sprintf("%s listener: api/openapi.yaml has %s (pattern %q), which is not served", l.name, path, p))
			}
		}
	}
	sort.Strings(probs)
	return probs
}

// TestOpenAPICoversTheRoutes: every route the public and the admin
// listener register is in the document, and every path in the document
// is served, on the listener it says.
func TestOpenAPICoversTheRoutes(t *testing.T) {
	doc := loadDoc(t, api.OpenAPI)
	n := newNode(t)
	for _, p := range routeProblems(t, doc, n.srv) {
		t.Error(p)
	}
}

// call is one request of the live check, and the status it must get.
type call struct {
	adm    bool // to the admin listener
	method string
	target string
	hdr    map[string]string
	body   string
	want   int
	// badReq: the request breaks the document (a count of 0, a missing
	// parameter), so request validation must refuse it as the node does.
	badReq bool
	// docPath names the document's path of a request to a method it does
	// not serve (405): its Allow must list the document's methods.
	docPath string
}

var (
	withAdmin = map[string]string{"Authorization": "Bearer " + adminToken}
	withKey   = map[string]string{"Authorization": "Bearer " + keyToken}
	withWrong = map[string]string{"Authorization": "Bearer not-a-token-0123456789"}
	jsonBody  = map[string]string{"Content-Type": "application/json"}
	html      = map[string]string{"Accept": "text/html"}
)

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// calls are every route's answers, errors included, in order (the rate
// limited key's one request goes first, a key is created before it is
// read, patched and deleted).
func calls() []call {
	const sfID = "2128224929701691400"
	// A body over max_body_bytes that is still {"count": 1}.
	big := `{"count":` + strings.Repeat(" ", maxBody) + `1}`
	bigKey := `{"name":"big","strategy":"segment","options":{"pad":"` + strings.Repeat("x", maxBody) + `"}}`
	adminJSON := merge(withAdmin, jsonBody)
	return []call{
		// The native ID routes.
		{method: "GET", target: "/v1/keys/slow/ids", want: 200},
		{method: "GET", target: "/v1/keys/slow/ids", want: 429},
		{method: "GET", target: "/v1/keys/order/ids?count=3", want: 200},
		{method: "GET", target: "/v1/keys/uuid/ids?count=2", want: 200},
		{method: "POST", target: "/v1/keys/order/ids", hdr: jsonBody, body: `{"count":2}`, want: 200},
		{method: "POST", target: "/v1/keys/order/ids", want: 200},
		{method: "GET", target: "/v1/keys/order/ids?count=0", want: 400, badReq: true},
		{method: "GET", target: "/v1/keys/order/ids?count=ten", want: 400, badReq: true},
		{method: "GET", target: "/v1/keys/order/ids?count=10001", want: 400},
		{method: "GET", target: "/v1/keys/order/ids?cnt=3", want: 400},
		{method: "GET", target: "/v1/keys/bad%20name/ids", want: 400},
		{method: "GET", target: "/v1/keys/nope/ids", want: 404},
		{method: "GET", target: "/v1/keys/secret/ids", want: 401},
		{method: "GET", target: "/v1/keys/secret/ids", hdr: withWrong, want: 403},
		{method: "GET", target: "/v1/keys/secret/ids", hdr: withKey, want: 200},
		{method: "POST", target: "/v1/keys/order/ids?count=2", hdr: jsonBody, body: `{"count":2}`, want: 400},
		{method: "POST", target: "/v1/keys/order/ids", hdr: jsonBody, body: `{"cnt":2}`, want: 400, badReq: true},
		{method: "POST", target: "/v1/keys/order/ids", hdr: jsonBody, body: big, want: 413},
		{method: "DELETE", target: "/v1/keys/order/ids", want: 405, docPath: "/v1/keys/{key}/ids"},
		{method: "GET", target: "/v1/keys/order/range?count=5", want: 200},
		{method: "GET", target: "/v1/keys/mono/ids?count=3", want: 200},
		{method: "GET", target: "/v1/keys/mono/range?count=1000", want: 200},
		{method: "POST", target: "/v1/keys/order/range", hdr: jsonBody, body: `{"count":3}`, want: 200},
		{method: "GET", target: "/v1/keys/order/range?count=0", want: 400, badReq: true},
		{method: "GET", target: "/v1/keys/uuid/range", want: 400},
		{method: "GET", target: "/v1/keys/secret/range", want: 401},
		{method: "POST", target: "/v1/keys/order/range", hdr: jsonBody, body: big, want: 413},
		{method: "PUT", target: "/v1/keys/order/range", want: 405, docPath: "/v1/keys/{key}/range"},
		{method: "GET", target: "/v1/snowflake/snowflake?count=2", want: 200},
		{method: "POST", target: "/v1/snowflake/snowflake", hdr: jsonBody, body: `{"count":2}`, want: 200},
		{method: "GET", target: "/v1/snowflake/order", want: 400},
		{method: "GET", target: "/v1/snowflake/nope", want: 404},
		{method: "POST", target: "/v1/snowflake/snowflake?count=-1", want: 400, badReq: true},
		{method: "GET", target: "/v1/decode/" + sfID + "?layout=leaf", want: 200},
		{method: "GET", target: "/v1/decode/" + sfID + "?key=snowflake", want: 200},
		{method: "GET", target: "/v1/decode/" + sfID, want: 200},
		{method: "GET", target: "/v1/decode/abc?layout=leaf", want: 400},
		{method: "GET", target: "/v1/decode/1?layout=nope", want: 400},
		{method: "GET", target: "/v1/decode/1?key=nope", want: 404},
		{method: "GET", target: "/v1/decode/1?key=secret", want: 401},
		{method: "POST", target: "/v1/decode/1", want: 405, docPath: "/v1/decode/{id}"},

		// Administration.
		{method: "GET", target: "/v1/keys", hdr: withAdmin, want: 200},
		{method: "GET", target: "/v1/keys?limit=2&after=order", hdr: withAdmin, want: 200},
		{method: "GET", target: "/v1/keys?limit=0", hdr: withAdmin, want: 400, badReq: true},
		{method: "GET", target: "/v1/keys", want: 401},
		{method: "GET", target: "/v1/keys", hdr: withWrong, want: 403},
		{method: "PUT", target: "/v1/keys", hdr: withAdmin, want: 405, docPath: "/v1/keys"},
		{method: "POST", target: "/v1/keys", hdr: adminJSON, body: `{"name":"invoice","strategy":"segment","step":1000}`, want: 201},
		{method: "POST", target: "/v1/keys", hdr: adminJSON, body: `{"name":"invoice","strategy":"segment","step":1000}`, want: 409},
		{method: "POST", target: "/v1/keys", hdr: adminJSON, body: `{"name":"extra","strategy":"uuid"}`, want: 429},
		{method: "POST", target: "/v1/keys", hdr: adminJSON, body: `{"name":"x","strategy":"nope"}`, want: 400},
		{method: "POST", target: "/v1/keys", hdr: adminJSON, body: `{"name":"x","strategy":"segment","colour":"red"}`, want: 400, badReq: true},
		{method: "POST", target: "/v1/keys", hdr: adminJSON, body: `{"strategy":"segment"}`, want: 400, badReq: true},
		{method: "POST", target: "/v1/keys", hdr: adminJSON, body: bigKey, want: 413},
		{method: "POST", target: "/v1/keys", hdr: jsonBody, body: `{"name":"y","strategy":"segment"}`, want: 401},
		{method: "GET", target: "/v1/keys/invoice", hdr: withAdmin, want: 200},
		{method: "PATCH", target: "/v1/keys/invoice", hdr: adminJSON, body: `{"step":5000}`, want: 200},
		{method: "PATCH", target: "/v1/keys/invoice", hdr: adminJSON, body: `{"step":0}`, want: 400, badReq: true},
		{method: "PATCH", target: "/v1/keys/uuid", hdr: adminJSON, body: `{"step":10}`, want: 400},
		{method: "PATCH", target: "/v1/keys/nope", hdr: adminJSON, body: `{"step":10}`, want: 404},
		{method: "PATCH", target: "/v1/keys/invoice", hdr: adminJSON, body: `{"step":` + strings.Repeat(" ", maxBody) + `5}`, want: 413},
		{method: "DELETE", target: "/v1/keys/invoice", hdr: withAdmin, want: 204},
		{method: "GET", target: "/v1/keys/invoice", hdr: withAdmin, want: 404},
		{method: "DELETE", target: "/v1/keys/invoice", hdr: withAdmin, want: 404},
		{method: "DELETE", target: "/v1/keys/order", hdr: withAdmin, want: 409},
		{method: "GET", target: "/v1/keys/bad%20name", hdr: withAdmin, want: 400},
		{method: "GET", target: "/v1/keys/order", want: 401},
		{method: "DELETE", target: "/v1/keys/order", hdr: withWrong, want: 403},
		{method: "POST", target: "/v1/keys/order", hdr: withAdmin, want: 405, docPath: "/v1/keys/{key}"},

		// Leaf's routes.
		{method: "GET", target: "/api/segment/get/order", want: 200},
		{method: "POST", target: "/api/segment/get/order", want: 200},
		{method: "GET", target: "/api/segment/get/order/", want: 200},
		{method: "POST", target: "/api/segment/get/order/", want: 200},
		{method: "GET", target: "/api/segment/get/nope", want: 500},
		{method: "GET", target: "/api/segment/get/nope", hdr: html, want: 500},
		// A row of the default store that no key is configured for (the
		// deleted key's) is served as a Leaf tag.
		{method: "GET", target: "/api/segment/get/invoice", want: 200},
		{method: "GET", target: "/api/segment/get/secret", want: 401},
		{method: "GET", target: "/api/segment/get/secret", hdr: withWrong, want: 403},
		{method: "GET", target: "/api/segment/get/slow", want: 429},
		{method: "DELETE", target: "/api/segment/get/order", want: 405, docPath: "/api/segment/get/{key}"},
		{method: "GET", target: "/api/snowflake/get/any", want: 200},
		{method: "POST", target: "/api/snowflake/get/any", want: 200},
		{method: "GET", target: "/api/snowflake/get/any/", want: 200},
		{method: "POST", target: "/api/snowflake/get/any/", want: 200},
		{method: "PUT", target: "/api/snowflake/get/any/", want: 405, docPath: "/api/snowflake/get/{key}/"},
		{method: "GET", target: "/decodeSnowflakeId?snowflakeId=" + sfID, want: 200},
		{method: "POST", target: "/decodeSnowflakeId?snowflakeId=" + sfID, want: 200},
		{method: "GET", target: "/decodeSnowflakeId/?snowflakeId=" + sfID, want: 200},
		{method: "POST", target: "/decodeSnowflakeId/?snowflakeId=" + sfID, want: 200},
		{method: "GET", target: "/decodeSnowflakeId?snowflakeId=abc", want: 200},
		{method: "GET", target: "/decodeSnowflakeId", want: 400, badReq: true},
		{method: "GET", target: "/cache", hdr: withAdmin, want: 200},
		{method: "GET", target: "/cache/", hdr: merge(withAdmin, html), want: 200},
		{method: "GET", target: "/cache", want: 401},
		{method: "GET", target: "/cache", hdr: withWrong, want: 403},
		{method: "POST", target: "/cache", hdr: withAdmin, want: 405, docPath: "/cache"},
		{method: "GET", target: "/db", hdr: withAdmin, want: 200},
		{method: "GET", target: "/db/", hdr: merge(withAdmin, html), want: 200},
		{method: "GET", target: "/db", want: 401},
		{method: "GET", target: "/db/", hdr: withWrong, want: 403},

		// Operations.
		{method: "GET", target: "/healthz", want: 200},
		{method: "PUT", target: "/healthz", want: 405, docPath: "/healthz"},
		{method: "GET", target: "/readyz", want: 200},
		{method: "GET", target: "/metrics", want: 404}, // moved to the admin listener
		{adm: true, method: "GET", target: "/metrics", hdr: withAdmin, want: 200},
		{method: "GET", target: "/openapi.yaml", want: 200},
		{adm: true, method: "GET", target: "/openapi.yaml", hdr: withAdmin, want: 200},
		{method: "POST", target: "/openapi.yaml", want: 405, docPath: "/openapi.yaml"},

		// The dashboard.
		{method: "GET", target: "/ui", want: 200},
		{method: "GET", target: "/ui/app.js", want: 200},
		{method: "GET", target: "/ui/app.css", want: 200},
		{adm: true, method: "GET", target: "/ui/index.html", want: 200},
		{method: "GET", target: "/ui/nope.js", want: 404},
		{method: "GET", target: "/ui/api/state", hdr: withAdmin, want: 200},
		{method: "GET", target: "/ui/api/state?limit=1&filter=ord", hdr: withAdmin, want: 200},
		{method: "GET", target: "/ui/api/state?limit=0", hdr: withAdmin, want: 400, badReq: true},
		{method: "GET", target: "/ui/api/state", want: 401},
		{method: "GET", target: "/ui/api/state", hdr: withWrong, want: 403},
		{method: "POST", target: "/ui/api/state", hdr: withAdmin, want: 405, docPath: "/ui/api/state"},

		// The profiler, on the admin listener.
		{adm: true, method: "GET", target: "/debug/pprof/heap?debug=1", hdr: withAdmin, want: 200},
		{adm: true, method: "GET", target: "/debug/pprof/goroutine", hdr: withAdmin, want: 200},
		{adm: true, method: "GET", target: "/debug/pprof/nope", hdr: withAdmin, want: 404},
		{adm: true, method: "GET", target: "/debug/pprof/cmdline", hdr: withAdmin, want: 200},
		{adm: true, method: "GET", target: "/debug/pprof/symbol", hdr: withAdmin, want: 200},
		{adm: true, method: "GET", target: "/debug/pprof/profile?seconds=1", hdr: withAdmin, want: 200},
		{adm: true, method: "GET", target: "/debug/pprof/trace?seconds=1", hdr: withAdmin, want: 200},
		{adm: true, method: "GET", target: "/debug/pprof/cmdline", want: 401},
		{adm: true, method: "GET", target: "/debug/pprof/cmdline", hdr: withWrong, want: 403},

		// What no route serves.
		{method: "GET", target: "/nope", want: 404},
		{method: "GET", target: "/debug/pprof/cmdline", want: 404}, // not on the public listener
		{method: "GET", target: "//v1/keys/order/ids", want: 400},
	}
}

// closedCalls are the answers of a node that is shutting down.
var closedCalls = []call{
	{method: "GET", target: "/v1/keys/order/ids", want: 503},
	{method: "GET", target: "/v1/keys/order/range", want: 503},
	{method: "GET", target: "/readyz", want: 503},
}

// liveProblems sends every call to a new node and validates each request
// and answer against doc; it returns what does not agree, and which of
// doc's operations no call reached.
func liveProblems(t *testing.T, docBytes []byte) []string {
	t.Helper()
	doc := loadDoc(t, docBytes)
	n := newNode(t)
	probs := routeProblems(t, doc, n.srv)
	// The document names the public and admin listeners; the test's
	// listeners are elsewhere.
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	errSchema := doc.Components.Schemas["Error"].Value
	opts := &openapi3filter.Options{IncludeResponseStatus: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}
	reached := map[string]bool{}
	client := &http.Client{Timeout: time.Minute}
	do := func(c call) {
		base := n.pub.URL
		if c.adm {
			base = n.adm.URL
		}
		name := fmt.Sprintf("%s %s", c.method, c.target)
		if c.adm {
			name += " (admin listener)"
		}
		req, err := http.NewRequest(c.method, base+c.target, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range c.hdr {
			req.Header.Set(k, v)
		}
		// The request as the document sees it (its own copy of the body).
		vreq := req.Clone(context.Background())
		vreq.Body = io.NopCloser(strings.NewReader(c.body))
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatalf("%s: reading the answer: %v", name, err)
		}
		if res.StatusCode != c.want {
			probs = append(probs, fmt.Sprintf("%s: status %d, want %d: %.300s", name, res.StatusCode, c.want, body))
		}
		route, params, ferr := router.FindRoute(vreq)
		switch {
		case notInDoc(ferr):
			// No operation of the document: a refusal in the error body.
			if res.StatusCode < 400 {
				probs = append(probs, fmt.Sprintf("%s: not in the document, yet answered %d", name, res.StatusCode))
				return
			}
			var v any
			if err := decodeJSON(body, &v); err != nil {
				probs = append(probs, fmt.Sprintf("%s: %d answer is not JSON: %v: %.200s", name, res.StatusCode, err, body))
			} else if err := errSchema.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
				probs = append(probs, fmt.Sprintf("%s: %d answer is not the Error schema: %v", name, res.StatusCode, err))
			}
			if c.docPath != "" {
				probs = append(probs, allowProblems(name, doc, c.docPath, res.Header.Get("Allow"))...)
			}
			return
		case ferr != nil:
			t.Fatalf("%s: finding the route: %v", name, ferr)
		}
		if c.docPath != "" {
			probs = append(probs, fmt.Sprintf("%s: the document has this operation (%s), the node answered 405", name, route.Operation.OperationID))
		}
		in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route, Options: opts}
		rerr := openapi3filter.ValidateRequest(context.Background(), in)
		switch {
		case c.badReq && rerr == nil:
			probs = append(probs, fmt.Sprintf("%s: the node refuses it (%d) but the document allows it", name, res.StatusCode))
		case !c.badReq && rerr != nil:
			probs = append(probs, fmt.Sprintf("%s: request does not agree with the document: %v", name, rerr))
		}
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: res.StatusCode, Header: res.Header, Options: opts}
		out.SetBodyBytes(body)
		if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
			probs = append(probs, fmt.Sprintf("%s: answer %d does not agree with the document: %v", name, res.StatusCode, err))
		}
		reached[route.Operation.OperationID] = true
	}
	for _, c := range calls() {
		do(c)
	}
	if err := n.srv.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range closedCalls {
		do(c)
	}
	for path, item := range doc.Paths.Map() {
		for m, op := range item.Operations() {
			if !reached[op.OperationID] {
				probs = append(probs, fmt.Sprintf("%s %s (%s): no call reached it", m, path, op.OperationID))
			}
		}
	}
	sort.Strings(probs)
	return probs
}

// notInDoc reports whether err is the router's "the document has no such
// operation" (it returns new RouteErrors with the reasons of its
// sentinels, so errors.Is does not find them).
func notInDoc(err error) bool {
	var re *routers.RouteError
	return errors.As(err, &re) && (re.Reason == routers.ErrPathNotFound.Error() || re.Reason == routers.ErrMethodNotAllowed.Error())
}

func decodeJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

// allowProblems checks a 405's Allow against the methods the document
// has for path (HEAD goes with GET).
func allowProblems(name string, doc *openapi3.T, path, allow string) []string {
	item := doc.Paths.Value(path)
	if item == nil {
		return []string{fmt.Sprintf("%s: no path %s in the document", name, path)}
	}
	var want []string
	for m := range item.Operations() {
		want = append(want, m)
	}
	var got []string
	for _, m := range strings.Split(allow, ",") {
		got = append(got, strings.TrimSpace(m))
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(want, got) {
		return []string{fmt.Sprintf("%s: Allow %q, the document has %v", name, allow, want)}
	}
	return nil
}

// TestOpenAPIAgreesWithTheNode: every call's request and answer, errors
// included, agree with the document, every operation of the document is
// reached, and the routes are the document's paths.
func TestOpenAPIAgreesWithTheNode(t *testing.T) {
	for _, p := range liveProblems(t, api.OpenAPI) {
		t.Error(p)
	}
}

// TestOpenAPIMutantsAreCaught: a document that is wrong about the node
// (a route left out or added, a field's type, a limit, an error answer)
// fails the checks above.
func TestOpenAPIMutantsAreCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node per mutant")
	}
	doc := string(api.OpenAPI)
	for _, m := range []struct{ name, old, new string }{
		{"a route left out", "  /v1/snowflake/{key}:\n", "  /v1/snowflake-gone/{key}:\n"},
		{"a route that is not served", "  /healthz:\n", "  /v1/stats:\n    get:\n      operationId: stats\n      responses:\n        \"200\": {description: none}\n  /healthz:\n"},
		{"range count as a string", "        count: {type: integer, minimum: 1}\n      examples:\n        - {key: order, first:", "        count: {type: string}\n      examples:\n        - {key: order, first:"},
		{"IDs as numbers", "          items:\n            type: string\n            description: Decimal for", "          items:\n            type: integer\n            description: Decimal for"},
		{"no field in the error body", "            field:\n              type: string\n              description: The parameter", "            fieldName:\n              type: string\n              description: The parameter"},
		{"no 429 for the ids route", "        \"429\": {$ref: \"#/components/responses/TooManyRequests\"}\n        \"499\": {$ref: \"#/components/responses/ClientClosed\"}\n        \"503\": {$ref: \"#/components/responses/Unavailable\"}\n    post:\n      tags: [ids]\n      operationId: postIDs", "        \"499\": {$ref: \"#/components/responses/ClientClosed\"}\n        \"503\": {$ref: \"#/components/responses/Unavailable\"}\n    post:\n      tags: [ids]\n      operationId: postIDs"},
		{"count without its minimum", "      schema: {type: integer, minimum: 1, maximum: 1000000, default: 1}", "      schema: {type: integer, maximum: 1000000, default: 1}"},
		{"Leaf's ID as JSON", "          description: The ID\n          content:\n            text/plain:", "          description: The ID\n          content:\n            application/json:"},
		{"a header promised on every key", "    Idmint-Leader:\n      description:", "    Idmint-Leader:\n      required: true\n      description:"},
		{"unknown fields allowed in a new key", "    CreateKey:\n      unevaluatedProperties: false\n", "    CreateKey:\n"},
		{"PATCH left out of /v1/keys/{key}", "    patch:\n      tags: [admin]\n      operationId: setStep", "    x-patch:\n      tags: [admin]\n      operationId: setStep"},
	} {
		t.Run(m.name, func(t *testing.T) {
			if strings.Count(doc, m.old) != 1 {
				t.Fatalf("the mutant's text is not in api/openapi.yaml once: %q", m.old)
			}
			probs := liveProblems(t, []byte(strings.Replace(doc, m.old, m.new, 1)))
			if len(probs) == 0 {
				t.Fatal("the checks pass with the mutated document")
			}
			t.Logf("caught: %.200s (and %d more)", probs[0], len(probs)-1)
		})
	}
}
