package leaf

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/server/internal/reqtest"
	"github.com/idmint/idmint/server/internal/servertest"
	"github.com/idmint/idmint/snowflake"
)

// The answers below are Leaf 1.0.1's on Spring Boot 1.5 (see leaf.go): a
// Leaf client parses them, so the status, the Content-Type and the body's
// fields and their order must match.

func TestLeafWireFormat(t *testing.T) {
	f := newFixture(t, nil)
	const ts = "1767225600000" // the fixture's fake clock, in ms
	cases := []struct {
		name         string
		r            reqtest.Req
		status       int
		ctype, body  string
		bodyContains []string
	}{
		{"segment", reqtest.Req{Target: "/api/segment/get/order"}, 200, "text/plain;charset=UTF-8", "1", nil},
		{"POST", reqtest.Req{Method: "POST", Target: "/api/segment/get/order"}, 200, "text/plain;charset=UTF-8", "2", nil},
		{"trailing slash", reqtest.Req{Target: "/api/segment/get/order/"}, 200, "text/plain;charset=UTF-8", "3", nil},
		{"POST trailing slash", reqtest.Req{Method: "POST", Target: "/api/segment/get/order/"}, 200, "text/plain;charset=UTF-8", "4", nil},
		{"unknown tag", reqtest.Req{Target: "/api/segment/get/nosuch"}, 500, "application/json;charset=UTF-8",
			`{"timestamp":` + ts + `,"status":500,"error":"Internal Server Error","exception":"com.sankuai.inf.leaf.server.exception.LeafServerException","message":"Result{id=-2, status=EXCEPTION}","path":"/api/segment/get/nosuch"}` + "\n", nil},
		{"unknown tag, trailing slash", reqtest.Req{Method: "POST", Target: "/api/segment/get/nosuch/"}, 500, "application/json;charset=UTF-8",
			`{"timestamp":` + ts + `,"status":500,"error":"Internal Server Error","exception":"com.sankuai.inf.leaf.server.exception.LeafServerException","message":"Result{id=-2, status=EXCEPTION}","path":"/api/segment/get/nosuch/"}` + "\n", nil},
		{"unknown tag, browser", reqtest.Req{Target: "/api/segment/get/nosuch", Hdr: map[string]string{"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}}, 500, "text/html;charset=UTF-8", "",
			[]string{"<h1>Whitelabel Error Page</h1>", "(type=Internal Server Error, status=500)", "<div>Result{id=-2, status=EXCEPTION}</div>"}},
		{"html refused by q=0", reqtest.Req{Target: "/api/segment/get/nosuch", Hdr: map[string]string{"Accept": "text/html;q=0, application/json"}}, 500, "application/json;charset=UTF-8", "",
			[]string{`"message":"Result{id=-2, status=EXCEPTION}"`}},
		{"decode", reqtest.Req{Target: "/decodeSnowflakeId?snowflakeId=1541815603606036480"}, 200, "application/json;charset=UTF-8", "",
			[]string{`"workerId":"`, `"sequenceId":"`, `"timestamp":"`}},
		{"decode POST trailing slash", reqtest.Req{Method: "POST", Target: "/decodeSnowflakeId/?snowflakeId=1541815603606036480"}, 200, "application/json;charset=UTF-8", "",
			[]string{`"workerId":"`}},
		{"decode garbage", reqtest.Req{Target: "/decodeSnowflakeId?snowflakeId=x"}, 200, "application/json;charset=UTF-8", `{"errorMsg":"snowflake Id反解析发生异常!"}` + "\n", nil},
		{"decode without the parameter", reqtest.Req{Target: "/decodeSnowflakeId"}, 400, "application/json;charset=UTF-8",
			`{"timestamp":` + ts + `,"status":400,"error":"Bad Request","exception":"org.springframework.web.bind.MissingServletRequestParameterException","message":"Required String parameter 'snowflakeId' is not present","path":"/decodeSnowflakeId"}` + "\n", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := reqtest.Do(f.H, tc.r)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d; body %s", w.Code, tc.status, w.Body)
			}
			if ct := w.Header().Get("Content-Type"); ct != tc.ctype {
				t.Fatalf("Content-Type %q, want %q", ct, tc.ctype)
			}
			if tc.body != "" && w.Body.String() != tc.body {
				t.Fatalf("body\n%s\nwant\n%s", w.Body, tc.body)
			}
			for _, s := range tc.bodyContains {
				if !strings.Contains(w.Body.String(), s) {
					t.Fatalf("body %s lacks %s", w.Body, s)
				}
			}
		})
	}
}

// TestLeafSnowflakeIgnoresKey: Leaf's snowflake route serves its one
// generator whatever the key says; a configured segment key of that name
// must not answer there.
func TestLeafSnowflakeIgnoresKey(t *testing.T) {
	f := newFixture(t, nil)
	for range 5 {
		if w := reqtest.Do(f.H, reqtest.Req{Target: "/api/segment/get/order"}); w.Code != 200 {
			t.Fatalf("segment: %d %s", w.Code, w.Body)
		}
	}
	for i, target := range []string{"/api/snowflake/get/order", "/api/snowflake/get/anything", "/api/snowflake/get/note/", "/api/snowflake/get/snowflake"} {
		w := reqtest.Do(f.H, reqtest.Req{Method: []string{"GET", "POST"}[i%2], Target: target})
		if want := fmt.Sprint(i + 1); w.Code != 200 || w.Body.String() != want {
			t.Fatalf("%s: %d %q, want the snowflake key's ID %s", target, w.Code, w.Body, want)
		}
	}
	if got := f.Cs.Get("order").Next.Load(); got != 5 {
		t.Fatalf("the segment key order issued %d IDs, want 5: the snowflake route drew from it", got)
	}
	g := newFixture(t, func(c *server.Config) { delete(c.Keys, "snowflake") })
	if w := reqtest.Do(g.H, reqtest.Req{Target: "/api/snowflake/get/order"}); w.Code != 500 || !strings.Contains(w.Body.String(), `"message":"Result{id=-1, status=EXCEPTION}"`) {
		t.Fatalf("without a snowflake key: %d %s; want 500 Result{id=-1}", w.Code, w.Body)
	}
}

// refuser is an issuer that always refuses with err.
type refuser struct{ err error }

func (r refuser) NextInt64s(context.Context, []int64) error { return r.err }
func (r refuser) Close(context.Context) error               { return nil }

// TestLeafRefusals: the Result id of each refusal is Leaf's for the same
// state: a segment key that cannot load is -3 (both buffers empty); a
// snowflake clock too far behind is -3 (SnowflakeIDGenImpl: offset > 5
// ms), any other snowflake refusal (fenced lease) -1.
func TestLeafRefusals(t *testing.T) {
	behind := &snowflake.ClockBehindError{}
	cases := []struct {
		route string
		err   error
		code  string
	}{
		{"/api/segment/get/k", errors.New("store down"), "-3"},
		{"/api/snowflake/get/k", fmt.Errorf("key: %w", behind), "-3"},
		{"/api/snowflake/get/k", snowflake.ErrFenced, "-1"},
	}
	for _, tc := range cases {
		reg, _ := servertest.Registry()
		servertest.Must(reg.Register(server.Strategy{Name: "refuser", New: func(context.Context, *server.Env, string, server.KeyConfig) (server.Issuer, error) {
			return refuser{tc.err}, nil
		}}))
		f := newFixtureReg(t, reg, func(c *server.Config) {
			c.Keys["k"] = server.KeyConfig{Strategy: "refuser"}
			c.LeafSnowflakeKey = "k"
		})
		w := reqtest.Do(f.H, reqtest.Req{Target: tc.route})
		want := `"message":"Result{id=` + tc.code + `, status=EXCEPTION}"`
		if w.Code != 500 || !strings.Contains(w.Body.String(), want) || w.Header().Get("Content-Type") != "application/json;charset=UTF-8" {
			t.Fatalf("%s refusing with %v: %d %s %s; want 500 with %s", tc.route, tc.err, w.Code, w.Header().Get("Content-Type"), w.Body, want)
		}
	}
}

func TestLeafMonitorPages(t *testing.T) {
	f := newFixture(t, nil)
	for range 3 {
		reqtest.Do(f.H, reqtest.Req{Target: "/api/segment/get/order"})
	}
	html := map[string]string{"Accept": "text/html"}
	w := reqtest.Do(f.H, reqtest.Req{Target: "/cache", Hdr: html})
	if w.Code != 200 || w.Header().Get("Content-Type") != "text/html;charset=UTF-8" {
		t.Fatalf("/cache as HTML: %d %q", w.Code, w.Header().Get("Content-Type"))
	}
	// The counter's view: value0 3, max0 1003, step0 1000.
	for _, s := range []string{`<table class="table table-hover">`, "<th>name</th><th>init</th><th>next</th><th>pos</th><th>value0</th><th>max0</th><th>step0</th><th>value1</th><th>max1</th><th>step1</th>",
		"<tr><td>order</td><td>true</td><td>false</td><td>0</td><td>3</td><td>1,003</td><td>1,000</td><td>0</td><td>0</td><td>0</td></tr>"} {
		if !strings.Contains(w.Body.String(), s) {
			t.Fatalf("/cache page lacks %s:\n%s", s, w.Body)
		}
	}
	w = reqtest.Do(f.H, reqtest.Req{Target: "/db/", Hdr: html})
	if w.Code != 200 || w.Header().Get("Content-Type") != "text/html;charset=UTF-8" ||
		!strings.Contains(w.Body.String(), "<th>tag</th><th>max</th><th>step</th><th>update</th>") ||
		!strings.Contains(w.Body.String(), "<tr><td>order</td><td>1,003</td><td>1,000</td>") {
		t.Fatalf("/db as HTML: %d %q\n%s", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	for _, p := range []string{"/cache", "/db", "/cache/"} {
		w := reqtest.Do(f.H, reqtest.Req{Target: p})
		if w.Code != 200 || w.Header().Get("Content-Type") != "application/json;charset=UTF-8" || !strings.Contains(w.Body.String(), `"key":"order"`) {
			t.Fatalf("%s as JSON: %d %q %s", p, w.Code, w.Header().Get("Content-Type"), w.Body)
		}
	}
	if w := reqtest.Do(f.H, reqtest.Req{Target: "/cache", Remote: "192.0.2.1:5000"}); w.Code != http.StatusForbidden {
		t.Fatalf("/cache from a remote client without the admin token: %d", w.Code)
	}
}

// newFixture is a server with Leaf's surface over servertest's keys.
func newFixture(t testing.TB, mutate func(*server.Config)) *servertest.Fixture {
	t.Helper()
	return servertest.New(t, mutate, New)
}

// newFixtureReg is a server with Leaf's surface on a registry the test
// extends, serving the counters "order" and "snowflake".
func newFixtureReg(t testing.TB, reg *server.Registry, mutate func(*server.Config)) *servertest.Fixture {
	t.Helper()
	return servertest.NewReg(t, reg, nil, func(c *server.Config) {
		c.Keys = map[string]server.KeyConfig{"order": {Strategy: "counter"}, "snowflake": {Strategy: "snowflake"}}
		if mutate != nil {
			mutate(c)
		}
	}, New)
}
