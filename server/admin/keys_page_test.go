package admin

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/server/internal/reqtest"
)

// GET /v1/keys pages through the keys in name order; bad paging is 400
// naming the field.
func TestKeysPaged(t *testing.T) {
	f := newFixture(t, nil)
	for i := 0; i < 25; i++ {
		if w := reqtest.Do(f.H, reqtest.Req{Method: "POST", Target: "/v1/keys", Body: fmt.Sprintf(`{"name":"p%02d","strategy":"counter"}`, i)}); w.Code != 201 {
			t.Fatalf("create: %d %s", w.Code, w.Body)
		}
	}
	type page struct {
		Keys  []struct{ Name string }
		Total int
		Next  string
	}
	get := func(q string) page {
		t.Helper()
		w := reqtest.Do(f.H, reqtest.Req{Target: "/v1/keys" + q})
		if w.Code != 200 {
			t.Fatalf("%s: %d %s", q, w.Code, w.Body)
		}
		var p page
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	all := get("")
	if all.Total != 30 || len(all.Keys) != 30 || all.Next != "" {
		t.Fatalf("one page of everything: total %d, %d keys, next %q", all.Total, len(all.Keys), all.Next)
	}
	var seen []string
	for q := "?limit=7"; ; {
		p := get(q)
		for _, k := range p.Keys {
			seen = append(seen, k.Name)
		}
		if p.Next == "" {
			break
		}
		if len(p.Keys) != 7 {
			t.Fatalf("a page before the last has %d keys, want 7", len(p.Keys))
		}
		q = "?limit=7&after=" + p.Next
	}
	if len(seen) != 30 {
		t.Fatalf("paging saw %d keys, want 30: %v", len(seen), seen)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] <= seen[i-1] {
			t.Fatalf("pages out of order or repeating at %d: %v", i, seen)
		}
	}
	if p := get("?after=p99"); len(p.Keys) != 3 || p.Keys[0].Name != "secret" {
		t.Fatalf("after a name that is no key: %+v", p.Keys)
	}
	for _, bad := range []struct{ q, field string }{{"?limit=0", "limit"}, {"?limit=x", "limit"}, {"?limit=10001", "limit"}, {"?limit=1&limit=2", "limit"}, {"?after=%zz", "after"}} {
		reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Target: "/v1/keys" + bad.q}), 400, server.CodeBadPage, bad.field)
	}
}
