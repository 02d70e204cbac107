package server

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"path"
	"testing"

	"github.com/idmint/idmint/server/internal/reqtest"
	"github.com/idmint/idmint/server/internal/wire"
)

// canonicalPath agrees with its definition, path.Clean(p) == p or that
// plus a trailing slash, on every path of up to 7 characters from "a./";
// except "//", which the definition lets through (Clean gives "/") and
// which is no more canonical than "/a//".
func TestCanonicalPathIsCleanForm(t *testing.T) {
	want := func(p string) bool {
		return p != "" && p[0] == '/' && p != "//" && (path.Clean(p) == p || path.Clean(p)+"/" == p)
	}
	var walk func(p string)
	n := 0
	walk = func(p string) {
		n++
		if got := canonicalPath(p); got != want(p) {
			t.Errorf("canonicalPath(%q) = %v, want %v", p, got, want(p))
		}
		if len(p) < 7 {
			for _, c := range "a./" {
				walk(p + string(c))
			}
		}
	}
	walk("")
	if n < 3000 {
		t.Fatalf("only %d paths tried", n)
	}
}

// Requests hot serves get exactly what the mux gives them (status,
// headers, body up to the numbers issued, and as many IDs of the same
// keys), and hot leaves escaped and odd paths to the mux.
func TestHotRoutesMatchMux(t *testing.T) {
	f := newFixture(t, nil)
	mux := http.NewServeMux()
	f.s.routes(mux)
	viaMux := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Cache-Control"] = wire.NoStore
		mux.ServeHTTP(w, r)
	})
	// Leaf's fast path is compared with its routes in server/leaf.
	hot := []string{
		"/v1/keys/order/ids", "/v1/keys/order/ids?count=3", "/v1/keys/order/ids?count=abc", "/v1/keys/nokey/ids",
		"/v1/keys/secret/ids", "/v1/keys/note/ids?count=2",
		"/v1/keys/order/range?count=5", "/v1/keys/snowflake/range", "/v1/keys/nokey/range",
		"/v1/snowflake/snowflake?count=4", "/v1/snowflake/order", "/v1/snowflake/nokey",
	}
	cold := []string{
		"/v1/keys/order/ids/", "/v1/keys/ids", "/v1/keys/a%2Fb/ids", "/v1/keys/order",
		"/v1/snowflake/", "/v1/snowflake/snowflake/", "/v1/snowflake/a%2Fb",
	}
	for _, list := range []struct {
		paths []string
		hot   bool
	}{{hot, true}, {cold, false}} {
		for _, target := range list.paths {
			for _, m := range []string{"GET", "POST", "HEAD", "DELETE"} {
				r := httptest.NewRequest(m, target, nil)
				if got := f.s.hot(httptest.NewRecorder(), r, r.URL.Path); got != list.hot {
					t.Errorf("%s %s: hot = %v, want %v", m, target, got, list.hot)
				}
				n0 := f.cs.issued()
				a := do(f.h, req{method: m, target: target})
				n1 := f.cs.issued()
				b := do(viaMux, req{method: m, target: target})
				if sa, sb := reqtest.Shape(a), reqtest.Shape(b); sa != sb {
					t.Errorf("%s %s:\nserved:\n%s\nthe mux:\n%s", m, target, sa, sb)
				}
				if da, db := reqtest.Drew(n0, n1), reqtest.Drew(n1, f.cs.issued()); !maps.Equal(da, db) {
					t.Errorf("%s %s: served drew %v, the mux %v", m, target, da, db)
				}
			}
		}
	}
}
