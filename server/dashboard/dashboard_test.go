package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/server/internal/reqtest"
	"github.com/idmint/idmint/server/internal/servertest"
)

// fixture is a server with the dashboard over servertest's keys, and the
// dashboard's surface.
type fixture struct {
	*servertest.Fixture
	d *surface
}

func newFixture(t testing.TB, mutate func(*server.Config)) *fixture {
	t.Helper()
	var d *surface
	f := servertest.New(t, mutate, func(s *server.Server) server.Surface { d = New(s).(*surface); return d })
	return &fixture{f, d}
}

func getUIState(t *testing.T, h http.Handler, hdr map[string]string) UIState {
	t.Helper()
	w := reqtest.Do(h, reqtest.Req{Target: "/ui/api/state", Hdr: hdr})
	if w.Code != http.StatusOK {
		t.Fatalf("GET /ui/api/state = %d: %s", w.Code, w.Body)
	}
	var st UIState
	if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil {
		t.Fatalf("state is not JSON: %v: %s", err, w.Body)
	}
	return st
}

func uiKeyOf(t *testing.T, st UIState, name string) UIKey {
	t.Helper()
	for _, k := range st.Keys {
		if k.Name == name {
			return k
		}
	}
	t.Fatalf("key %q not in the state: %+v", name, st.Keys)
	return UIKey{}
}

// TestUIPageEmbedded: the page and its assets come from the binary, with a
// policy that lets nothing but the server's own files run or load; other
// paths and methods are refused.
func TestUIPageEmbedded(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct{ path, ctype, has string }{
		{"/ui", "text/html; charset=utf-8", `src="/ui/app.js"`},
		{"/ui/", "text/html; charset=utf-8", `href="/ui/app.css"`},
		{"/ui/app.js", "text/javascript; charset=utf-8", "/ui/api/state"},
		{"/ui/app.css", "text/css; charset=utf-8", "svg.spark"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			w := reqtest.Do(f.H, reqtest.Req{Target: tc.path})
			if w.Code != http.StatusOK {
				t.Fatalf("GET %s = %d: %s", tc.path, w.Code, w.Body)
			}
			if got := w.Header().Get("Content-Type"); got != tc.ctype {
				t.Fatalf("Content-Type = %q, want %q", got, tc.ctype)
			}
			if !strings.Contains(w.Body.String(), tc.has) {
				t.Fatalf("body lacks %q", tc.has)
			}
			csp := w.Header().Get("Content-Security-Policy")
			for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
				if !strings.Contains(csp, want) {
					t.Fatalf("Content-Security-Policy %q lacks %q", csp, want)
				}
			}
		})
	}
	// No asset reaches outside the server (works offline, no CDN), and
	// the whole page stays light enough for a phone.
	total := 0
	for _, name := range []string{"index.html", "app.js", "app.css"} {
		w := reqtest.Do(f.H, reqtest.Req{Target: "/ui/" + name})
		total += w.Body.Len()
		if strings.Contains(w.Body.String(), "http://") && !strings.Contains(w.Body.String(), "http://www.w3.org/2000/svg") || strings.Contains(w.Body.String(), "https://") {
			t.Errorf("/ui/%s names another site", name)
		}
	}
	if total > 32<<10 {
		t.Errorf("the page weighs %d bytes; keep it under 32 KiB", total)
	}
	reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Target: "/ui/nothing.js"}), http.StatusNotFound, server.CodeNotFound, "path")
	reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Target: "/ui/api/other"}), http.StatusNotFound, server.CodeNotFound, "path")
	reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Method: http.MethodPost, Target: "/ui"}), http.StatusMethodNotAllowed, server.CodeMethodNotAllowed, "method")
	reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Method: http.MethodPost, Target: "/ui/api/state"}), http.StatusMethodNotAllowed, server.CodeMethodNotAllowed, "method")
	if w := reqtest.Do(f.H, reqtest.Req{Method: http.MethodHead, Target: "/ui"}); w.Code != http.StatusOK || w.Body.Len() != 0 {
		t.Fatalf("HEAD /ui = %d with %d bytes", w.Code, w.Body.Len())
	}
}

// TestUIStateAdminOnly: the state is guarded exactly like /v1/keys, on
// both listeners; the page itself loads on the admin listener without the
// token (a browser cannot send it), which only the state needs.
func TestUIStateAdminOnly(t *testing.T) {
	t.Run("token", func(t *testing.T) {
		f := newFixture(t, func(c *server.Config) { c.AdminToken = servertest.AdminToken })
		for name, h := range map[string]http.Handler{"public": f.H, "admin": f.Adm} {
			reqtest.WantError(t, reqtest.Do(h, reqtest.Req{Target: "/ui/api/state"}), http.StatusUnauthorized, server.CodeUnauthorized, "Authorization")
			reqtest.WantError(t, reqtest.Do(h, reqtest.Req{Target: "/ui/api/state", Hdr: reqtest.Bearer(servertest.KeyToken)}), http.StatusForbidden, server.CodeForbidden, "Authorization")
			reqtest.WantError(t, reqtest.Do(h, reqtest.Req{Target: "/ui/api/state?token=" + servertest.AdminToken}), http.StatusUnauthorized, server.CodeUnauthorized, "Authorization")
			if st := getUIState(t, h, reqtest.Bearer(servertest.AdminToken)); len(st.Keys) != 5 {
				t.Fatalf("%s: %d keys, want 5", name, len(st.Keys))
			}
			if w := reqtest.Do(h, reqtest.Req{Target: "/ui", Remote: "192.0.2.7:5000"}); w.Code != http.StatusOK {
				t.Fatalf("%s: GET /ui from afar = %d, want 200 (the page holds no data)", name, w.Code)
			}
		}
		// The exemption covers the static files only.
		reqtest.WantError(t, reqtest.Do(f.Adm, reqtest.Req{Target: "/metrics"}), http.StatusUnauthorized, server.CodeUnauthorized, "Authorization")
		reqtest.WantError(t, reqtest.Do(f.Adm, reqtest.Req{Target: "/ui/api/state/"}), http.StatusUnauthorized, server.CodeUnauthorized, "Authorization")
	})
	t.Run("loopback", func(t *testing.T) {
		f := newFixture(t, nil)
		for _, h := range []http.Handler{f.H, f.Adm} {
			getUIState(t, h, nil)
			reqtest.WantError(t, reqtest.Do(h, reqtest.Req{Target: "/ui/api/state", Remote: "192.0.2.7:5000"}), http.StatusForbidden, server.CodeForbidden, "Authorization")
		}
		// A page the operator's browser loads may not read the state: a
		// DNS-rebinding name, another origin.
		wantHost := reqtest.Do(f.H, reqtest.Req{Target: "/ui/api/state", Hdr: map[string]string{"Host": "evil.example"}})
		reqtest.WantError(t, wantHost, http.StatusForbidden, server.CodeForbidden, "Host")
		reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Target: "/ui/api/state", Hdr: map[string]string{"Origin": "http://localhost:9999"}}), http.StatusForbidden, server.CodeForbidden, "Origin")
		getUIState(t, f.H, map[string]string{"Host": "[::1]:8080", "Origin": "http://[::1]:8080", "Sec-Fetch-Site": "same-origin"})
		// Without a token the admin listener answers loopback only, the page too.
		reqtest.WantError(t, reqtest.Do(f.Adm, reqtest.Req{Target: "/ui", Remote: "192.0.2.7:5000"}), http.StatusForbidden, server.CodeForbidden, "Authorization")
	})
}

// TestUIStateFigures: every key with its strategy and issued count; the
// count and the segment buffer move when IDs are issued; tokens and
// secret options never appear.
func TestUIStateFigures(t *testing.T) {
	f := newFixture(t, func(c *server.Config) {
		c.Keys["order"] = server.KeyConfig{Strategy: "counter", Step: 2000, Options: map[string]string{"secret": "s3cr3t-value"}}
	})
	st := getUIState(t, f.H, nil)
	if st.SampleEvery != UISampleEvery.Milliseconds() || st.SamplesKept != UISamplesKept || !st.Now.Equal(f.Clk.Now()) {
		t.Fatalf("sample_every_ms %d, now %v", st.SampleEvery, st.Now)
	}
	if strings.Join(st.Strategies, ",") != "counter,snowflake,text" {
		t.Fatalf("strategies = %v", st.Strategies)
	}
	var names []string
	for _, k := range st.Keys {
		names = append(names, k.Name+":"+k.Strategy)
	}
	if got := strings.Join(names, " "); got != "note:text order:counter secret:counter slow:counter snowflake:snowflake" {
		t.Fatalf("keys = %s", got)
	}
	o := uiKeyOf(t, st, "order")
	if o.Issued != 0 || !o.Ready || o.Step != 2000 || o.Segment == nil || o.Stats["segment_step"] != 2000 {
		t.Fatalf("order before issuing: %+v", o)
	}
	if w := reqtest.Do(f.H, reqtest.Req{Target: "/v1/keys/order/ids?count=250"}); w.Code != http.StatusOK {
		t.Fatalf("ids: %d %s", w.Code, w.Body)
	}
	reqtest.Do(f.H, reqtest.Req{Target: "/v1/keys/order/ids"})
	st = getUIState(t, f.H, nil)
	o2 := uiKeyOf(t, st, "order")
	if o2.Issued != 251 {
		t.Fatalf("issued = %d after 251 IDs", o2.Issued)
	}
	if sl := o2.Segment.Slots[0]; sl.Value != 251 || sl.Max != 2251 || sl.Step != 2000 || sl.Fill != 1 {
		t.Fatalf("slot 0 = %+v", sl)
	}
	body := reqtest.Do(f.H, reqtest.Req{Target: "/ui/api/state"}).Body.String()
	for _, secret := range []string{servertest.KeyToken, "s3cr3t-value"} {
		if strings.Contains(body, secret) {
			t.Fatalf("state shows %q", secret)
		}
	}
}

// NewWith's SampleEvery sets the sampling interval (the state reports it)
// and a negative one is refused.
func TestUISampleEveryOption(t *testing.T) {
	if _, err := NewWith(Options{SampleEvery: -time.Second}); err == nil || !strings.Contains(err.Error(), "SampleEvery -1s") {
		t.Fatalf("NewWith with a negative SampleEvery: %v, want an error naming it", err)
	}
	ns, err := NewWith(Options{SampleEvery: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	f := servertest.New(t, nil, ns)
	st := getUIState(t, f.H, nil)
	if st.SampleEvery != 200 {
		t.Fatalf("sample_every_ms = %d, want 200", st.SampleEvery)
	}
	f.Clk.Advance(199 * time.Millisecond)
	if h := uiKeyOf(t, getUIState(t, f.H, nil), "order").History; len(h) != 1 {
		t.Fatalf("sampled again before 200 ms: %v", h)
	}
	f.Clk.Advance(time.Millisecond)
	if h := uiKeyOf(t, getUIState(t, f.H, nil), "order").History; len(h) != 2 {
		t.Fatalf("history 200 ms after the first sample = %v, want 2 samples", h)
	}
}

// TestUIHistory: a key's issued count is sampled at most every
// UISampleEvery, at most UISamplesKept samples are kept, and a deleted
// key's samples go with it.
func TestUIHistory(t *testing.T) {
	f := newFixture(t, nil)
	if _, err := f.S.CreateKey(context.Background(), "tmp", server.KeyConfig{Strategy: "counter"}); err != nil {
		t.Fatalf("create: %v", err)
	}
	st := getUIState(t, f.H, nil)
	if h := uiKeyOf(t, st, "order").History; len(h) != 1 || h[0] != [2]int64{f.Clk.Now().UnixMilli(), 0} {
		t.Fatalf("first history = %v", h)
	}
	reqtest.Do(f.H, reqtest.Req{Target: "/v1/keys/order/ids?count=10"})
	f.Clk.Advance(UISampleEvery - time.Millisecond)
	if h := uiKeyOf(t, getUIState(t, f.H, nil), "order").History; len(h) != 1 {
		t.Fatalf("sampled again before UISampleEvery: %v", h)
	}
	f.Clk.Advance(time.Millisecond)
	if h := uiKeyOf(t, getUIState(t, f.H, nil), "order").History; len(h) != 2 || h[1] != [2]int64{f.Clk.Now().UnixMilli(), 10} {
		t.Fatalf("history after UISampleEvery = %v", h)
	}
	for range UISamplesKept + 5 {
		reqtest.Do(f.H, reqtest.Req{Target: "/v1/keys/order/ids?count=1"})
		f.Clk.Advance(UISampleEvery)
		getUIState(t, f.H, nil)
	}
	h := uiKeyOf(t, getUIState(t, f.H, nil), "order").History
	if len(h) != UISamplesKept {
		t.Fatalf("%d samples kept, want %d", len(h), UISamplesKept)
	}
	for i := 1; i < len(h); i++ {
		if h[i][0]-h[i-1][0] != UISampleEvery.Milliseconds() || h[i][1] < h[i-1][1] {
			t.Fatalf("samples out of order at %d: %v", i, h[i-1:i+1])
		}
	}
	if last := h[len(h)-1]; last[0] != f.Clk.Now().UnixMilli() || last[1] != 10+UISamplesKept+5 {
		t.Fatalf("newest sample = %v", last)
	}
	if err := f.S.DeleteKey(context.Background(), "tmp"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	getUIState(t, f.H, nil)
	f.d.ui.mu.Lock()
	_, kept := f.d.ui.samples["tmp"]
	f.d.ui.mu.Unlock()
	if kept {
		t.Fatal("samples of a deleted key kept")
	}
}

// TestUIRecentErrors: refusals from every route enter the list newest
// first, one entry per key per second standing for the refusals in
// between, and the list keeps the last server.RefusalsKept.
func TestUIRecentErrors(t *testing.T) {
	f := newFixture(t, nil)
	if st := getUIState(t, f.H, nil); len(st.Errors) != 0 {
		t.Fatalf("errors before any refusal: %v", st.Errors)
	}
	f.Cs.Get("order").Fail.Store(true)
	for range 5 {
		reqtest.Do(f.H, reqtest.Req{Target: "/v1/keys/order/ids"})
	}
	reqtest.Do(f.H, reqtest.Req{Target: "/v1/keys/order/range"}) // every route refuses (Leaf's: server/leaf)
	st := getUIState(t, f.H, nil)
	if len(st.Errors) != 1 {
		t.Fatalf("errors = %+v, want 1 entry in the first second", st.Errors)
	}
	e := st.Errors[0]
	if e.Key != "order" || e.Strategy != "counter" || e.Code != server.CodeUnavailable || e.Error != "counter: store unavailable" || e.Count != 1 || !e.Time.Equal(f.Clk.Now()) {
		t.Fatalf("entry = %+v", e)
	}
	f.Clk.Advance(time.Second)
	reqtest.Do(f.H, reqtest.Req{Target: "/v1/keys/order/ids"})
	st = getUIState(t, f.H, nil)
	if len(st.Errors) != 2 || st.Errors[0].Count != 6 || !st.Errors[0].Time.After(st.Errors[1].Time) {
		t.Fatalf("errors = %+v, want the newest first standing for 6 refusals", st.Errors)
	}
	for range server.RefusalsKept + 3 {
		f.Clk.Advance(time.Second)
		reqtest.Do(f.H, reqtest.Req{Target: "/v1/keys/order/ids"})
	}
	st = getUIState(t, f.H, nil)
	if len(st.Errors) != server.RefusalsKept {
		t.Fatalf("%d errors kept, want %d", len(st.Errors), server.RefusalsKept)
	}
	if !st.Errors[0].Time.Equal(f.Clk.Now()) {
		t.Fatalf("newest entry at %v, want %v", st.Errors[0].Time, f.Clk.Now())
	}
	for i := 1; i < len(st.Errors); i++ {
		if !st.Errors[i].Time.Before(st.Errors[i-1].Time) {
			t.Fatalf("entries not newest first at %d", i)
		}
	}
}

// The dashboard's state holds at most UIMaxKeys keys (or ?limit=N), by
// name, filtered by ?filter=, and says how many there are.
func TestUIStateBounded(t *testing.T) {
	f := newFixture(t, func(c *server.Config) {
		for i := 0; i < UIMaxKeys+50; i++ {
			c.Keys[fmt.Sprintf("bulk%03d", i)] = server.KeyConfig{Strategy: "counter"}
		}
	})
	state := func(q string) UIState {
		t.Helper()
		w := reqtest.Do(f.H, reqtest.Req{Target: "/ui/api/state" + q})
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", q, w.Code, w.Body)
		}
		var st UIState
		if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	total := UIMaxKeys + 55 // and the fixture's five
	st := state("")
	if len(st.Keys) != UIMaxKeys || st.KeysTotal != total || st.KeysMatched != total || st.Keys[0].Name != "bulk000" {
		t.Fatalf("default: %d keys shown, total %d, matched %d, first %q", len(st.Keys), st.KeysTotal, st.KeysMatched, st.Keys[0].Name)
	}
	if st := state("?filter=ULK24"); st.KeysMatched != 10 || len(st.Keys) != 10 || st.Keys[0].Name != "bulk240" {
		t.Fatalf("filter ULK24 (any case): matched %d, shown %d", st.KeysMatched, len(st.Keys))
	}
	if st := state("?filter=secret"); len(st.Keys) != 1 || st.Keys[0].Name != "secret" {
		t.Fatalf("filter secret: %+v", st.Keys)
	}
	if st := state("?limit=1000"); len(st.Keys) != total {
		t.Fatalf("limit 1000: %d keys, want %d", len(st.Keys), total)
	}
	for _, bad := range []struct{ q, field string }{{"?limit=0", "limit"}, {"?limit=99999", "limit"}, {"?filter=" + strings.Repeat("x", 129), "filter"}} {
		reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Target: "/ui/api/state" + bad.q}), 400, server.CodeBadPage, bad.field)
	}
}

// TestUISampledFromStart: Serve samples every key's issued count in the
// background, so a dashboard opened minutes after start-up already shows
// the rates of those minutes (sampling only while a dashboard polled left
// the first view without rates for ~10 s).
func TestUISampledFromStart(t *testing.T) {
	f := newFixture(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	// Counted before the sampler starts: counted after, a sampler already
	// asleep was in the count, and the wait for one more never ended.
	sleepers := f.Clk.Sleepers()
	go func() { f.d.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	wait, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	samples := func() [][2]int64 {
		f.d.ui.mu.Lock()
		defer f.d.ui.mu.Unlock()
		if r := f.d.ui.samples["order"]; r != nil {
			return r.list()
		}
		return nil
	}
	for i := 1; i <= 3; i++ {
		if err := f.Clk.WaitForSleepers(wait, sleepers+1); err != nil {
			t.Fatalf("the sampler did not wait for its sample %d: %v", i, err)
		}
		if n := len(samples()); n != i {
			t.Fatalf("the sampler is waiting with %d samples taken, want %d", n, i)
		}
		reqtest.Do(f.H, reqtest.Req{Target: "/v1/keys/order/ids?count=5"})
		f.Clk.Advance(UISampleEvery)
	}
	if err := f.Clk.WaitForSleepers(wait, sleepers+1); err != nil {
		t.Fatalf("the sampler did not take its last sample: %v", err)
	}
	h := samples()
	if len(h) != 4 || h[0][1] != 0 || h[3][1] != 15 {
		t.Fatalf("samples before any poll = %v, want 4 samples from 0 to 15 IDs", h)
	}
}
