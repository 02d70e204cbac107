package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
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
		r            req
		status       int
		ctype, body  string
		bodyContains []string
	}{
		{"segment", req{target: "/api/segment/get/order"}, 200, "text/plain;charset=UTF-8", "1", nil},
		{"POST", req{method: "POST", target: "/api/segment/get/order"}, 200, "text/plain;charset=UTF-8", "2", nil},
		{"trailing slash", req{target: "/api/segment/get/order/"}, 200, "text/plain;charset=UTF-8", "3", nil},
		{"POST trailing slash", req{method: "POST", target: "/api/segment/get/order/"}, 200, "text/plain;charset=UTF-8", "4", nil},
		{"unknown tag", req{target: "/api/segment/get/nosuch"}, 500, "application/json;charset=UTF-8",
			`{"timestamp":` + ts + `,"status":500,"error":"Internal Server Error","exception":"com.sankuai.inf.leaf.server.exception.LeafServerException","message":"Result{id=-2, status=EXCEPTION}","path":"/api/segment/get/nosuch"}` + "\n", nil},
		{"unknown tag, trailing slash", req{method: "POST", target: "/api/segment/get/nosuch/"}, 500, "application/json;charset=UTF-8",
			`{"timestamp":` + ts + `,"status":500,"error":"Internal Server Error","exception":"com.sankuai.inf.leaf.server.exception.LeafServerException","message":"Result{id=-2, status=EXCEPTION}","path":"/api/segment/get/nosuch/"}` + "\n", nil},
		{"unknown tag, browser", req{target: "/api/segment/get/nosuch", hdr: map[string]string{"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}}, 500, "text/html;charset=UTF-8", "",
			[]string{"<h1>Whitelabel Error Page</h1>", "(type=Internal Server Error, status=500)", "<div>Result{id=-2, status=EXCEPTION}</div>"}},
		{"html refused by q=0", req{target: "/api/segment/get/nosuch", hdr: map[string]string{"Accept": "text/html;q=0, application/json"}}, 500, "application/json;charset=UTF-8", "",
			[]string{`"message":"Result{id=-2, status=EXCEPTION}"`}},
		{"decode", req{target: "/decodeSnowflakeId?snowflakeId=1541815603606036480"}, 200, "application/json;charset=UTF-8", "",
			[]string{`"workerId":"`, `"sequenceId":"`, `"timestamp":"`}},
		{"decode POST trailing slash", req{method: "POST", target: "/decodeSnowflakeId/?snowflakeId=1541815603606036480"}, 200, "application/json;charset=UTF-8", "",
			[]string{`"workerId":"`}},
		{"decode garbage", req{target: "/decodeSnowflakeId?snowflakeId=x"}, 200, "application/json;charset=UTF-8", `{"errorMsg":"snowflake Id反解析发生异常!"}` + "\n", nil},
		{"decode without the parameter", req{target: "/decodeSnowflakeId"}, 400, "application/json;charset=UTF-8",
			`{"timestamp":` + ts + `,"status":400,"error":"Bad Request","exception":"org.springframework.web.bind.MissingServletRequestParameterException","message":"Required String parameter 'snowflakeId' is not present","path":"/decodeSnowflakeId"}` + "\n", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := do(f.h, tc.r)
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
		if w := do(f.h, req{target: "/api/segment/get/order"}); w.Code != 200 {
			t.Fatalf("segment: %d %s", w.Code, w.Body)
		}
	}
	for i, target := range []string{"/api/snowflake/get/order", "/api/snowflake/get/anything", "/api/snowflake/get/note/", "/api/snowflake/get/snowflake"} {
		w := do(f.h, req{method: []string{"GET", "POST"}[i%2], target: target})
		if want := fmt.Sprint(i + 1); w.Code != 200 || w.Body.String() != want {
			t.Fatalf("%s: %d %q, want the snowflake key's ID %s", target, w.Code, w.Body, want)
		}
	}
	if got := f.cs.get("order").next.Load(); got != 5 {
		t.Fatalf("the segment key order issued %d IDs, want 5: the snowflake route drew from it", got)
	}
	g := newFixture(t, func(c *Config) { delete(c.Keys, "snowflake") })
	if w := do(g.h, req{target: "/api/snowflake/get/order"}); w.Code != 500 || !strings.Contains(w.Body.String(), `"message":"Result{id=-1, status=EXCEPTION}"`) {
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
		reg, _ := testRegistry()
		must(reg.Register(Strategy{Name: "refuser", New: func(context.Context, *Env, string, KeyConfig) (Issuer, error) {
			return refuser{tc.err}, nil
		}}))
		f := newFixtureReg(t, reg, func(c *Config) { c.Keys["k"] = KeyConfig{Strategy: "refuser"}; c.LeafSnowflakeKey = "k" })
		w := do(f.h, req{target: tc.route})
		want := `"message":"Result{id=` + tc.code + `, status=EXCEPTION}"`
		if w.Code != 500 || !strings.Contains(w.Body.String(), want) || w.Header().Get("Content-Type") != "application/json;charset=UTF-8" {
			t.Fatalf("%s refusing with %v: %d %s %s; want 500 with %s", tc.route, tc.err, w.Code, w.Header().Get("Content-Type"), w.Body, want)
		}
	}
}

func TestLeafMonitorPages(t *testing.T) {
	f := newFixture(t, nil)
	for range 3 {
		do(f.h, req{target: "/api/segment/get/order"})
	}
	html := map[string]string{"Accept": "text/html"}
	w := do(f.h, req{target: "/cache", hdr: html})
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
	w = do(f.h, req{target: "/db/", hdr: html})
	if w.Code != 200 || w.Header().Get("Content-Type") != "text/html;charset=UTF-8" ||
		!strings.Contains(w.Body.String(), "<th>tag</th><th>max</th><th>step</th><th>update</th>") ||
		!strings.Contains(w.Body.String(), "<tr><td>order</td><td>1,003</td><td>1,000</td>") {
		t.Fatalf("/db as HTML: %d %q\n%s", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	for _, p := range []string{"/cache", "/db", "/cache/"} {
		w := do(f.h, req{target: p})
		if w.Code != 200 || w.Header().Get("Content-Type") != "application/json;charset=UTF-8" || !strings.Contains(w.Body.String(), `"key":"order"`) {
			t.Fatalf("%s as JSON: %d %q %s", p, w.Code, w.Header().Get("Content-Type"), w.Body)
		}
	}
	if w := do(f.h, req{target: "/cache", remote: "192.0.2.1:5000"}); w.Code != http.StatusForbidden {
		t.Fatalf("/cache from a remote client without the admin token: %d", w.Code)
	}
}

// newFixtureReg is newFixture on a registry the test extends.
func newFixtureReg(t testing.TB, reg *Registry, mutate func(*Config)) *fixture {
	t.Helper()
	cfg := &Config{DataDir: t.TempDir(), Keys: map[string]KeyConfig{
		"order":     {Strategy: "counter"},
		"snowflake": {Strategy: "snowflake"},
	}}
	if mutate != nil {
		mutate(cfg)
	}
	cfg.SetDefaults()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := New(context.Background(), Options{Config: cfg, Registry: reg, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return &fixture{s: s, h: s.Handler(), adm: s.AdminHandler(), clk: clk}
}
