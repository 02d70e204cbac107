package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/server/internal/reqtest"
)

const adminTok = "admin-token-0123456789"
const keyTok = "order-token-0123456789"

type fixture struct {
	s   *Server
	h   http.Handler
	adm http.Handler
	cs  *counters
	clk *clock.Fake
}

func newFixture(t testing.TB, mutate func(*Config)) *fixture {
	t.Helper()
	reg, cs := testRegistry()
	cfg := &Config{DataDir: t.TempDir(), Keys: map[string]KeyConfig{
		"order":     {Strategy: "counter"},
		"snowflake": {Strategy: "snowflake"},
		"note":      {Strategy: "text"},
		"secret":    {Strategy: "counter", Tokens: []string{keyTok}},
		"slow":      {Strategy: "counter", RateLimit: 2},
	}}
	if mutate != nil {
		mutate(cfg)
	}
	cfg.SetDefaults()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := New(context.Background(), Options{Config: cfg, Registry: reg, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), KeyStore: &FileKeyStore{Path: filepath.Join(cfg.DataDir, "keys.json")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return &fixture{s: s, h: s.Handler(), adm: s.AdminHandler(), cs: cs, clk: clk}
}

type req struct {
	method, target, body string
	hdr                  map[string]string
	remote               string
}

func do(h http.Handler, r req) *httptest.ResponseRecorder {
	return reqtest.Do(h, reqtest.Req{Method: r.method, Target: r.target, Body: r.body, Hdr: r.hdr, Remote: r.remote})
}

type errBody struct {
	Error struct {
		Code, Message, Field string
	} `json:"error"`
}

// wantError checks status, the error body's code and field.
func wantError(t *testing.T, w *httptest.ResponseRecorder, status int, code, field string) errBody {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status = %d, want %d; body %s", w.Code, status, w.Body)
	}
	var e errBody
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("error body is not JSON: %v: %s", err, w.Body)
	}
	if e.Error.Code != code || e.Error.Field != field {
		t.Fatalf("error = %+v, want code %q field %q", e.Error, code, field)
	}
	if e.Error.Message == "" {
		t.Fatal("empty error message")
	}
	return e
}

func bearerHdr(tok string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + tok}
}

type idsBody struct {
	Key, Strategy string
	IDs           []string `json:"ids"`
}

func TestIDs(t *testing.T) {
	f := newFixture(t, nil)
	w := do(f.h, req{target: "/v1/keys/order/ids?count=3"})
	var b idsBody
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil || w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if b.Key != "order" || b.Strategy != "counter" || strings.Join(b.IDs, ",") != "1,2,3" {
		t.Fatalf("%+v", b)
	}
	// IDs are JSON strings.
	if !strings.Contains(w.Body.String(), `"ids":["1","2","3"]`) {
		t.Fatalf("ids not strings: %s", w.Body)
	}
	w = do(f.h, req{method: "POST", target: "/v1/keys/note/ids?count=2"})
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil || strings.Join(b.IDs, ",") != "T-1,T-2" {
		t.Fatalf("text: %d %s", w.Code, w.Body)
	}
	if w := do(f.h, req{target: "/v1/keys/order/ids"}); !strings.Contains(w.Body.String(), `"ids":["4"]`) {
		t.Fatalf("default count: %s", w.Body)
	}
	for _, q := range []string{"count=0", "count=-1", "count=abc", "count=10001", "count=1&count=2", "count=", "count=99999999999", "count=1e3", "count=%zz"} {
		wantError(t, do(f.h, req{target: "/v1/keys/order/ids?" + q}), 400, CodeBadCount, "count")
	}
	wantError(t, do(f.h, req{target: "/v1/keys/nosuch/ids"}), 404, CodeUnknownKey, "key")
	wantError(t, do(f.h, req{target: "/v1/keys/%FF%FE/ids"}), 400, CodeBadKey, "key")
	wantError(t, do(f.h, req{target: "/v1/keys/a%20b/ids"}), 400, CodeBadKey, "key")
	wantError(t, do(f.h, req{target: "/v1/keys/" + strings.Repeat("k", 200) + "/ids"}), 400, CodeBadKey, "key")
	wantError(t, do(f.h, req{method: "DELETE", target: "/v1/keys/order/ids"}), 405, CodeMethodNotAllowed, "method")
	wantError(t, do(f.h, req{target: "/v1/keys/secret/ids"}), 401, CodeUnauthorized, "Authorization")
	wantError(t, do(f.h, req{target: "/v1/keys/secret/ids", hdr: bearerHdr("nope-nope-nope-nope")}), 403, CodeForbidden, "Authorization")
	if w := do(f.h, req{target: "/v1/keys/secret/ids", hdr: map[string]string{"Authorization": "bearer " + keyTok}}); w.Code != 200 {
		t.Fatalf("lower-case scheme: %d %s", w.Code, w.Body)
	}
	f.cs.get("order").fail.Store(true)
	w = do(f.h, req{target: "/v1/keys/order/ids"})
	wantError(t, w, 503, CodeUnavailable, "")
	if w.Header().Get("Retry-After") != "3" {
		t.Fatalf("Retry-After = %q", w.Header().Get("Retry-After"))
	}
}

func TestRateLimit(t *testing.T) {
	f := newFixture(t, nil)
	for i := 0; i < 2; i++ {
		if w := do(f.h, req{target: "/v1/keys/slow/ids"}); w.Code != 200 {
			t.Fatalf("call %d: %d", i, w.Code)
		}
	}
	w := do(f.h, req{target: "/v1/keys/slow/ids"})
	wantError(t, w, 429, CodeRateLimited, "key")
	if w.Header().Get("Retry-After") != "1" {
		t.Fatalf("Retry-After %q", w.Header().Get("Retry-After"))
	}
	f.clk.Advance(time.Second)
	if w := do(f.h, req{target: "/v1/keys/slow/ids"}); w.Code != 200 {
		t.Fatalf("after a second: %d", w.Code)
	}
}

func TestRange(t *testing.T) {
	f := newFixture(t, nil)
	do(f.h, req{target: "/v1/keys/order/ids?count=5"})
	w := do(f.h, req{target: "/v1/keys/order/range?count=10"})
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"first":"6","last":"15","count":10`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	// Cut short where the segment ends.
	w = do(f.h, req{target: "/v1/keys/order/range?count=100"})
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"first":"16","last":"79","count":64`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	wantError(t, do(f.h, req{target: "/v1/keys/note/range?count=2"}), 400, CodeUnsupported, "key")
	wantError(t, do(f.h, req{target: "/v1/keys/order/range?count=x"}), 400, CodeBadCount, "count")
	wantError(t, do(f.h, req{target: "/v1/keys/nosuch/range"}), 404, CodeUnknownKey, "key")
	wantError(t, do(f.h, req{method: "PUT", target: "/v1/keys/order/range"}), 405, CodeMethodNotAllowed, "method")
	f.cs.get("order").fail.Store(true)
	wantError(t, do(f.h, req{target: "/v1/keys/order/range"}), 503, CodeUnavailable, "")
}

func TestSnowflakeRoute(t *testing.T) {
	f := newFixture(t, nil)
	if w := do(f.h, req{target: "/v1/snowflake/snowflake?count=2"}); w.Code != 200 || !strings.Contains(w.Body.String(), `["1","2"]`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	wantError(t, do(f.h, req{target: "/v1/snowflake/order"}), 400, CodeUnsupported, "key")
	wantError(t, do(f.h, req{target: "/v1/snowflake/nosuch"}), 404, CodeUnknownKey, "key")
}

func TestDecode(t *testing.T) {
	f := newFixture(t, nil)
	w := do(f.h, req{target: "/v1/decode/42?layout=plain"})
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"sequence":42`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	w = do(f.h, req{target: "/v1/decode/10?key=order"})
	var d decodedJSON
	if err := json.Unmarshal(w.Body.Bytes(), &d); err != nil || d.Node != 3 || d.UnixMs != "1700000000010" || d.Layout != "counter" {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if w := do(f.h, req{target: "/v1/decode/10"}); w.Code != 200 {
		t.Fatalf("default key: %d %s", w.Code, w.Body)
	}
	wantError(t, do(f.h, req{target: "/v1/decode/42?layout=nope"}), 400, CodeBadLayout, "layout")
	wantError(t, do(f.h, req{target: "/v1/decode/42?layout=plain&key=order"}), 400, CodeBadLayout, "layout")
	wantError(t, do(f.h, req{target: "/v1/decode/x?layout=plain"}), 400, CodeBadID, "id")
	wantError(t, do(f.h, req{target: "/v1/decode/-5?key=order"}), 400, CodeBadID, "id")
	wantError(t, do(f.h, req{target: "/v1/decode/5?key=note"}), 400, CodeUnsupported, "key")
	wantError(t, do(f.h, req{target: "/v1/decode/5?key=nosuch"}), 404, CodeUnknownKey, "key")
	wantError(t, do(f.h, req{method: "POST", target: "/v1/decode/5"}), 405, CodeMethodNotAllowed, "method")
}

func TestOps(t *testing.T) {
	f := newFixture(t, nil)
	if w := do(f.h, req{target: "/healthz"}); w.Code != 200 {
		t.Fatal(w.Code)
	}
	if w := do(f.h, req{target: "/readyz"}); w.Code != 200 {
		t.Fatal(w.Code, w.Body)
	}
	f.cs.get("order").unrdy.Store(true)
	w := do(f.h, req{target: "/readyz"})
	wantError(t, w, 503, CodeUnavailable, "")
	if w.Header().Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	do(f.h, req{target: "/v1/keys/order/ids?count=3"})
	do(f.h, req{target: "/v1/keys/order/ids"})
	w = do(f.h, req{target: "/metrics"})
	for _, want := range []string{
		`idmint_ids_issued_total{key="order",strategy="counter"} 4`,
		`idmint_segment_step{key="order",strategy="counter"} 1000`,
		`idmint_http_request_duration_seconds_count{route="ids"} 2`,
		`idmint_http_requests_total{code="2xx",route="ids"} 2`,
		`idmint_ready 0`,
		`idmint_keys 5`,
	} {
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	wantError(t, do(f.h, req{target: "/nosuch/path"}), 404, CodeNotFound, "path")
	wantError(t, do(f.h, req{target: "/debug/pprof/"}), 404, CodeNotFound, "path")
	if w := do(f.adm, req{target: "/debug/pprof/"}); w.Code != 200 {
		t.Fatalf("pprof on admin: %d", w.Code)
	}
	wantError(t, do(f.adm, req{target: "/debug/pprof/", remote: "192.0.2.1:1"}), 403, CodeForbidden, "Authorization")
	wantError(t, do(f.h, req{method: "POST", target: "/healthz"}), 405, CodeMethodNotAllowed, "method")
}

func TestNewFailsOnBrokenKey(t *testing.T) {
	reg, cs := testRegistry()
	cfg := &Config{DataDir: t.TempDir(), Keys: map[string]KeyConfig{
		"a": {Strategy: "counter"},
		"b": {Strategy: "counter", Options: map[string]string{"broken": "yes"}},
	}}
	cfg.SetDefaults()
	_, err := New(context.Background(), Options{Config: cfg, Registry: reg})
	if err == nil || !strings.Contains(err.Error(), `key "b"`) {
		t.Fatalf("err = %v", err)
	}
	if !cs.get("a").closed.Load() {
		t.Fatal("the key built before the failure was not closed")
	}
	if _, err := New(context.Background(), Options{Config: cfg}); err == nil {
		t.Fatal("New without a registry succeeded")
	}
}

func TestCloseClosesIssuers(t *testing.T) {
	f := newFixture(t, nil)
	if err := f.s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !f.cs.get("order").closed.Load() {
		t.Fatal("issuer not closed")
	}
	if err := f.s.Close(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if w := do(f.h, req{target: "/readyz"}); w.Code != 503 {
		t.Fatalf("readyz after close: %d", w.Code)
	}
}

// A gRPC listener with no surface serving gRPC is refused before anything
// is served, naming what to add.
func TestServeGRPCWithoutService(t *testing.T) {
	f := newFixture(t, nil)
	var ls [2]net.Listener
	for i := range ls {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ls[i] = l
	}
	err := f.s.Serve(context.Background(), Listeners{HTTP: ls[0], GRPC: ls[1]})
	if err == nil || !strings.Contains(err.Error(), "grpcapi.New") {
		t.Fatalf("Serve = %v, want a refusal naming grpcapi.New", err)
	}
}

// TestCloseFoldsKeyJournal: a clean Close folds the key journal into
// keys.json, so a build that reads only keys.json (a rollback to an older
// release) finds every key created through the API.
func TestCloseFoldsKeyJournal(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	for _, name := range []string{"made", "gone"} {
		if _, err := f.s.CreateKey(ctx, name, KeyConfig{Strategy: "counter", Tokens: []string{"made-token-0123456789"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.s.DeleteKey(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if err := f.s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(f.s.cfg.DataDir, "keys.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("keys.json after a clean Close: %v; want the journal folded into it", err)
	}
	var kf struct {
		Keys map[string]struct {
			Strategy string
			Tokens   []string
		}
	}
	if err := json.Unmarshal(b, &kf); err != nil {
		t.Fatal(err)
	}
	if k, ok := kf.Keys["made"]; !ok || len(kf.Keys) != 1 || k.Strategy != "counter" || len(k.Tokens) != 1 {
		t.Fatalf("keys.json after Close = %s; want key made alone, with its token", b)
	}
	if j, err := os.ReadFile(path + ".log"); err != nil || len(j) != 0 {
		t.Errorf("journal after Close: %d bytes, %v; want it emptied", len(j), err)
	}
}

// blockingJournal is a key journal whose Put waits for release, so a test
// can close the server while a create is being recorded.
type blockingJournal struct {
	FileKeyStore
	entered, release chan struct{}
}

func (j *blockingJournal) Put(ctx context.Context, name string, k KeyConfig) error {
	err := j.FileKeyStore.Put(ctx, name, k)
	j.entered <- struct{}{}
	<-j.release
	return err
}

// TestCreateKeyRacingClose: a create recorded in the key store just as
// the server closes is answered ErrClosed, and so is not in the store
// after the restart either.
func TestCreateKeyRacingClose(t *testing.T) {
	reg, _ := testRegistry()
	cfg := &Config{DataDir: t.TempDir(), Keys: map[string]KeyConfig{"order": {Strategy: "counter"}}}
	cfg.SetDefaults()
	path := filepath.Join(cfg.DataDir, "keys.json")
	j := &blockingJournal{FileKeyStore: FileKeyStore{Path: path}, entered: make(chan struct{}), release: make(chan struct{})}
	ctx := context.Background()
	s, err := New(ctx, Options{Config: cfg, Registry: reg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), KeyStore: j})
	if err != nil {
		t.Fatal(err)
	}
	created := make(chan error, 1)
	go func() {
		_, err := s.CreateKey(ctx, "late", KeyConfig{Strategy: "counter"})
		created <- err
	}()
	select {
	case <-j.entered:
	case <-time.After(time.Minute):
		t.Fatal("the create never reached the key store")
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close(ctx) }()
	for deadline := time.Now().Add(time.Minute); !s.Closed(); {
		if time.Now().After(deadline) {
			t.Fatal("Close did not start within a minute")
		}
		runtime.Gosched()
	}
	close(j.release)
	if err := <-created; !errors.Is(err, ErrClosed) {
		t.Fatalf("create racing Close = %v; want ErrClosed", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	got, err := (&FileKeyStore{Path: path}).Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["late"]; ok {
		t.Fatalf("key late, whose create was answered ErrClosed, is in the key store after the restart: %v", got)
	}
}
