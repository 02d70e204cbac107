package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idmint/idmint/server/internal/reqtest"
)

// Security tests of the server core (idmint issue 11). Each reproduces a
// hole that was open and asserts it is closed; the order-number cases
// are in server/strategies/attack_test.go.

// /metrics moves to the admin listener by default when one is
// configured, and can be put on either explicitly.
func TestAttackMetricsListener(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		mutate        func(*Config)
		public, admin int
	}{
		{"no admin listener", nil, 200, 200},
		{"admin listener", func(c *Config) { c.AdminListen = "127.0.0.1:0" }, 404, 200},
		{"public on request", func(c *Config) { c.AdminListen = "127.0.0.1:0"; c.Metrics = "public" }, 200, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.mutate)
			if w := do(f.h, req{target: "/metrics"}); w.Code != tc.public {
				t.Errorf("public /metrics: %d, want %d", w.Code, tc.public)
			}
			if w := do(f.adm, req{target: "/metrics"}); w.Code != tc.admin || !strings.Contains(w.Body.String(), "idmint_keys") {
				t.Errorf("admin /metrics: %d, want %d", w.Code, tc.admin)
			}
		})
	}
	cfg := &Config{Metrics: "admin"}
	cfg.SetDefaults()
	reg, _ := testRegistry()
	if err := cfg.Validate(reg); err == nil || !strings.Contains(err.Error(), "metrics") {
		t.Errorf("metrics: admin without admin_listen validates: %v", err)
	}
	cfg.Metrics = "everywhere"
	if err := cfg.Validate(reg); err == nil || !strings.Contains(err.Error(), "metrics") {
		t.Errorf("metrics: everywhere validates: %v", err)
	}
	_ = http.StatusOK
}

// Every 429 and 503 carries Retry-After, whatever produced it.
func TestAttackRetryAfterAlways(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	for _, st := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		w := httptest.NewRecorder()
		f.s.WriteError(w, ErrorAnswer{Status: st, Code: CodeUnavailable, Message: "x"})
		if w.Header().Get("Retry-After") == "" {
			t.Errorf("%d without Retry-After", st)
		}
	}
	for i := 0; i < 3; i++ {
		do(f.h, req{target: "/v1/keys/slow/ids"})
	}
	if w := do(f.h, req{target: "/v1/keys/slow/ids"}); w.Code != 429 || w.Header().Get("Retry-After") == "" {
		t.Errorf("rate limited: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	f.cs.get("order").unrdy.Store(true)
	if w := do(f.h, req{target: "/readyz"}); w.Code != 503 || w.Header().Get("Retry-After") == "" {
		t.Errorf("readyz: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
}

// HEAD never consumes an ID on the native routes (Leaf's: server/leaf); every
// ID-issuing route answers Cache-Control: no-store.
func TestAttackHeadAndNoStore(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	for _, target := range []string{"/v1/keys/order/ids?count=50", "/v1/keys/order/range?count=50", "/v1/snowflake/snowflake"} {
		w := do(f.h, req{method: "HEAD", target: target})
		if w.Code != 200 || w.Body.Len() != 0 || w.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("HEAD %s: %d %q Cache-Control %q", target, w.Code, w.Body, w.Header().Get("Cache-Control"))
		}
	}
	if w := do(f.h, req{target: "/v1/keys/order/ids"}); !strings.Contains(w.Body.String(), `"ids":["1"]`) {
		t.Errorf("HEAD consumed IDs: the first GET answers %s", w.Body)
	}
	if w := do(f.h, req{method: "HEAD", target: "/v1/keys/nosuch/ids"}); w.Code != 404 {
		t.Errorf("HEAD on an unknown key: %d", w.Code)
	}
	if w := do(f.h, req{method: "HEAD", target: "/v1/keys/secret/ids"}); w.Code != 401 {
		t.Errorf("HEAD without the key's token: %d", w.Code)
	}
	for _, target := range []string{"/v1/keys/order/ids", "/v1/keys/order/range", "/v1/snowflake/snowflake", "/v1/keys/nosuch/ids"} {
		for _, m := range []string{"GET", "POST"} {
			if w := do(f.h, req{method: m, target: target}); w.Header().Get("Cache-Control") != "no-store" {
				t.Errorf("%s %s: %d, Cache-Control %q", m, target, w.Code, w.Header().Get("Cache-Control"))
			}
		}
	}
}

// The rule for keys without tokens once admin_token is set: they serve
// every client that reaches the listener (loopback or not); a key with
// tokens serves only its token's bearers; administration needs the admin
// token.
func TestAttackNonLoopbackClients(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) { c.AdminToken = adminTok; c.Listen = "0.0.0.0:0" })
	const remote = "203.0.113.7:5000"
	if w := do(f.h, req{target: "/v1/keys/order/ids", remote: remote}); w.Code != 200 {
		t.Errorf("tokenless key, non-loopback client: %d %s", w.Code, w.Body)
	}
	if w := do(f.h, req{target: "/v1/keys/secret/ids", remote: remote}); w.Code != 401 {
		t.Errorf("key with tokens, no token: %d", w.Code)
	}
}

// A client that pipelines requests and never reads the answers used to
// freeze DELETE, list and create of keys until the write timeout (27 s
// measured): the answer was written under the key's lock, which DELETE
// waits for while holding the admin lock.
func TestAttackPipelinedNonReaderHoldsNoLock(t *testing.T) {
	t.Parallel()
	addr, f := liveServer(t)
	hc := &http.Client{Timeout: 10 * time.Second}
	call := func(method, path, body string) int {
		t.Helper()
		rq, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
		rq.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(rq)
		if err != nil {
			t.Errorf("%s %s: %v", method, path, err)
			return 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	ctx := context.Background()
	if _, err := f.s.CreateKey(ctx, "victim", KeyConfig{Strategy: "counter"}); err != nil {
		t.Fatalf("create victim: %v", err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(4096)
	go func() {
		one := "GET /v1/keys/victim/ids?count=10000 HTTP/1.1\r\nHost: x\r\n\r\n"
		io.WriteString(c, strings.Repeat(one, 400)) // ~32 MB of answers, never read
	}()
	// Wait until the server is stuck writing: the victim stops issuing.
	victim := f.cs.get("victim")
	deadline := time.Now().Add(20 * time.Second)
	last, stable := int64(-1), 0
	for stable < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("the server never blocked on the non-reading client (issued %d)", victim.next.Load())
		}
		time.Sleep(50 * time.Millisecond)
		if n := victim.next.Load(); n == last && n > 0 {
			stable++
		} else {
			last, stable = n, 0
		}
	}
	if last >= 400*10000 {
		t.Skip("the socket buffers took every answer; nothing blocked")
	}
	reqtest.Within(t, 5*time.Second, "deleting the key the stuck client reads", func() {
		if err := f.s.DeleteKey(ctx, "victim"); err != nil {
			t.Errorf("delete: %v", err)
		}
	})
	reqtest.Within(t, 5*time.Second, "another key's IDs", func() {
		if st := call("GET", "/v1/keys/order/ids", ""); st != 200 {
			t.Errorf("ids: %d", st)
		}
	})
	reqtest.Within(t, 5*time.Second, "creating a key", func() {
		if _, err := f.s.CreateKey(ctx, "other", KeyConfig{Strategy: "counter"}); err != nil {
			t.Errorf("create: %v", err)
		}
	})
}

// blocker is an issuer whose calls wait until released, and whose Ready
// waits until its context ends: a hung store.
type blocker struct {
	inside  chan struct{}
	release chan struct{}
	closed  atomic.Bool
}

func (b *blocker) NextInt64s(ctx context.Context, dst []int64) error {
	b.inside <- struct{}{}
	<-b.release
	return errors.New("blocker: released")
}
func (b *blocker) Ready(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
func (b *blocker) Close(ctx context.Context) error { b.closed.Store(true); return nil }

func blockerServer(t *testing.T) (*Server, *blocker) {
	t.Helper()
	reg, _ := testRegistry()
	b := &blocker{inside: make(chan struct{}, 1), release: make(chan struct{})}
	t.Cleanup(func() { close(b.release) })
	must(reg.Register(Strategy{Name: "block", New: func(ctx context.Context, env *Env, name string, k KeyConfig) (Issuer, error) {
		return b, nil
	}}))
	cfg := &Config{DataDir: t.TempDir(), Keys: map[string]KeyConfig{"hung": {Strategy: "block"}}}
	cfg.SetDefaults()
	s, err := New(context.Background(), Options{Config: cfg, Registry: reg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return s, b
}

// Close(ctx) honours its context: a request stuck in an issuer no longer
// keeps the shutdown deadline from reaching the issuers' Close (lease
// release).
func TestAttackCloseHonoursContext(t *testing.T) {
	t.Parallel()
	s, b := blockerServer(t)
	go do(s.Handler(), req{target: "/v1/keys/hung/ids"})
	select {
	case <-b.inside:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the issuer")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	reqtest.Within(t, 5*time.Second, "Close with a 200 ms deadline", func() { s.Close(ctx) })
	if !b.closed.Load() {
		t.Error("the issuer was not closed")
	}
}

// /metrics runs its store queries (readiness) under a deadline: a hung
// store does not hang the scrape.
func TestAttackMetricsDeadline(t *testing.T) {
	t.Parallel()
	s, _ := blockerServer(t)
	t.Cleanup(func() { s.Close(context.Background()) })
	reqtest.Within(t, 10*time.Second, "a /metrics scrape with a hung store", func() {
		if w := do(s.Handler(), req{target: "/metrics"}); w.Code != 200 || !strings.Contains(w.Body.String(), "idmint_ready 0") {
			t.Errorf("/metrics: %d, want 200 with idmint_ready 0", w.Code)
		}
	})
}

// Auth: missing, wrong and another key's token, a token in the query
// string, and header case — on HTTP and on the admin routes.
func TestAttackAuth(t *testing.T) {
	t.Parallel()
	const otherTok = "other-token-0123456789"
	f := newFixture(t, func(c *Config) {
		c.AdminToken = adminTok
		c.Keys["other"] = KeyConfig{Strategy: "counter", Tokens: []string{otherTok}}
	})
	for _, tc := range []struct {
		name, target string
		hdr          map[string]string
		want         int
	}{
		{"missing", "/v1/keys/secret/ids", nil, 401},
		{"wrong", "/v1/keys/secret/ids", bearerHdr("wrong-token-0123456789"), 403},
		{"other key's token", "/v1/keys/secret/ids", bearerHdr(otherTok), 403},
		{"admin token on a key", "/v1/keys/secret/ids", bearerHdr(adminTok), 403},
		{"query string", "/v1/keys/secret/ids?access_token=" + keyTok, nil, 401},
		{"query string token", "/v1/keys/secret/ids?token=" + keyTok, nil, 401},
		{"basic scheme", "/v1/keys/secret/ids", map[string]string{"Authorization": "Basic " + keyTok}, 401},
		{"bare token", "/v1/keys/secret/ids", map[string]string{"Authorization": keyTok}, 401},
		{"token prefix", "/v1/keys/secret/ids", bearerHdr(keyTok[:len(keyTok)-1]), 403},
		{"token suffix", "/v1/keys/secret/ids", bearerHdr(keyTok + "x"), 403},
		{"scheme case", "/v1/keys/secret/ids", map[string]string{"Authorization": "BEARER " + keyTok}, 200},
		{"header name case", "/v1/keys/secret/ids", map[string]string{"authorization": "Bearer " + keyTok}, 200},
		{"right", "/v1/keys/secret/ids", bearerHdr(keyTok), 200},
	} {
		w := do(f.h, req{target: tc.target, hdr: tc.hdr})
		if w.Code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, w.Code, w.Body, tc.want)
		}
		if tc.want != 200 && strings.Contains(w.Body.String(), `"ids"`) {
			t.Errorf("%s: IDs without a valid token: %s", tc.name, w.Body)
		}
	}
	// The admin listener: everything behind the admin token.
	for _, target := range []string{"/debug/pprof/", "/metrics", "/v1/keys/order/ids"} {
		if w := do(f.adm, req{target: target, remote: "203.0.113.9:1"}); w.Code != 401 {
			t.Errorf("admin listener %s without a token: %d", target, w.Code)
		}
		if w := do(f.adm, req{target: target, hdr: bearerHdr(keyTok)}); w.Code != 403 {
			t.Errorf("admin listener %s with a key's token: %d", target, w.Code)
		}
	}
}

// Fuzzed paths, methods and bodies: never a 500 (other than Leaf's own
// error answers), never a panic, never an ID of a key with tokens
// without its token.
func FuzzAttackRequests(f *testing.F) {
	for _, s := range [][3]string{
		{"GET", "/v1/keys/secret/ids?count=3", ""},
		{"POST", "/v1/keys", `{"name":"x","strategy":"counter","options":{"bad":"1"}}`},
		{"POST", "/v1/keys", `{"name":"\u0000","strategy":"counter"}`},
		{"PATCH", "/v1/keys/order", `{"step":-1}`},
		{"GET", "/v1/keys/..%2fsecret/ids", ""},
		{"GET", "/api/segment/get/secret%00", ""},
		{"HEAD", "/v1/keys/secret/range?count=99999999999", ""},
		{"DELETE", "/v1/keys/order", ""},
		{"GET", "/v1/decode/123?layout=plain&key=order", ""},
	} {
		f.Add(s[0], s[1], s[2])
	}
	fx := newFixture(f, nil)
	f.Fuzz(func(t *testing.T, method, target, body string) {
		if !strings.HasPrefix(target, "/") || strings.ContainsAny(target, " \r\n\t#") || strings.ContainsAny(method, " \r\n\t/()<>@,;:\\\"[]?={}") || method == "" || method == "CONNECT" {
			return
		}
		hr, err := http.NewRequest(method, "http://x"+target, strings.NewReader(body))
		if err != nil {
			return
		}
		hr.RemoteAddr = "127.0.0.1:1"
		w := httptest.NewRecorder()
		fx.h.ServeHTTP(w, hr)
		leaf := strings.HasPrefix(hr.URL.Path, "/api/") || strings.HasPrefix(hr.URL.Path, "/decodeSnowflakeId")
		if w.Code >= 500 && w.Code != 503 && !leaf {
			t.Fatalf("%s %s: %d %s", method, target, w.Code, w.Body)
		}
		if strings.Contains(hr.URL.Path, "secret") && w.Code == 200 && strings.Contains(w.Body.String(), `"ids"`) {
			t.Fatalf("%s %s: IDs of a key with tokens without its token: %s", method, target, w.Body)
		}
	})
}

// A request framed both by Content-Length and by Transfer-Encoding: a
// proxy that frames by Content-Length forwards the chunked terminator and
// a second request as one body; Go's net/http framed it as chunked and
// served the second request on the same connection. It is refused with
// 400 and the connection closed (RFC 9112 section 6.1), so the smuggled
// request is never served.
func TestAttackRequestSmuggling(t *testing.T) {
	f := newFixture(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := f.s.HTTPServer(f.s.Handler())
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	smuggled := "GET /v1/keys/note/ids HTTP/1.1\r\nHost: x\r\n\r\n"
	body := "0\r\n\r\n" + smuggled
	for _, tc := range []struct{ name, head string }{
		{"both framings", "POST /v1/keys/order/ids HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\nTransfer-Encoding: chunked\r\n\r\n"},
		{"both framings, reversed", "POST /v1/keys/order/ids HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"},
		{"chunked alone", "GET /v1/keys/order/ids HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, tc.head+body); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 400 || !strings.Contains(string(b), `"field":"Transfer-Encoding"`) {
				t.Fatalf("first answer: %d %s, want 400 naming Transfer-Encoding", resp.StatusCode, b)
			}
			// Nothing more: the connection closes, the smuggled request
			// unanswered (it would have asked the text key "note").
			rest, err := io.ReadAll(br)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the connection stayed open after the refusal")
			}
			if len(rest) > 0 {
				t.Fatalf("a second answer on the connection: %q", rest)
			}
			if n := f.cs.get("order").next.Load(); n != 0 {
				t.Fatalf("%d IDs issued", n)
			}
			if !resp.Close {
				t.Error("the refusal does not say Connection: close")
			}
		})
	}
}
