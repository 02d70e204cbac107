package server

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// An ID route reads only count, from the query or from a POST's JSON body;
// anything else is a 400 naming it, and a refused request consumes no ID.
// Without these checks ?cnt=3 and {"count":3} each quietly answered one ID.
func TestIDRoutesReadOnlyCount(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	last := func() int64 {
		t.Helper()
		w := do(f.h, req{target: "/v1/keys/order/ids"})
		var a struct{ IDs []string }
		if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &a) != nil || len(a.IDs) != 1 {
			t.Fatalf("one ID: %d %s", w.Code, w.Body)
		}
		n, _ := strconv.ParseInt(a.IDs[0], 10, 64)
		return n
	}
	before := last()
	for _, c := range []struct {
		r          req
		code, want string
	}{
		{req{target: "/v1/keys/order/ids?cnt=3"}, "bad_param", `"field":"cnt"`},
		{req{target: "/v1/keys/order/ids?count=3&layout=x"}, "bad_param", `unknown query parameter \"layout\"`},
		{req{target: "/v1/keys/order/range?count=3&stepp=1"}, "bad_param", `"field":"stepp"`},
		{req{method: "POST", target: "/v1/keys/order/ids", body: `{"cnt":3}`}, "bad_body", `unknown field \"cnt\"`},
		{req{method: "POST", target: "/v1/keys/order/ids", body: `count=3`}, "bad_body", `{\"count\": N}`},
		{req{method: "POST", target: "/v1/keys/order/ids", body: `{"count":3}{}`}, "bad_body", `"field":"body"`},
		{req{method: "POST", target: "/v1/keys/order/ids", body: `{"count":2.5}`}, "bad_count", `"field":"count"`},
		{req{method: "POST", target: "/v1/keys/order/ids?count=2", body: `{"count":3}`}, "bad_count", "give it once"},
	} {
		w := do(f.h, c.r)
		if w.Code != 400 || !strings.Contains(w.Body.String(), `"code":"`+c.code+`"`) || !strings.Contains(w.Body.String(), c.want) {
			t.Errorf("%s %s %s: %d %s, want 400 %s saying %s", c.r.method, c.r.target, c.r.body, w.Code, w.Body, c.code, c.want)
		}
	}
	if got := last(); got != before+1 {
		t.Errorf("after the refusals the next ID is %d, want %d: a refused request consumed IDs", got, before+1)
	}
	w := do(f.h, req{method: "POST", target: "/v1/keys/order/ids", body: `{"count":3}`})
	var a struct{ IDs []string }
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &a) != nil || len(a.IDs) != 3 {
		t.Fatalf(`POST {"count":3}: %d %s, want 3 IDs`, w.Code, w.Body)
	}
	w = do(f.h, req{method: "POST", target: "/v1/keys/order/range", body: `{"count":5}`})
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"count":5`) {
		t.Fatalf(`POST range {"count":5}: %d %s`, w.Code, w.Body)
	}
}
