package strategies

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/server/admin"
	"github.com/idmint/idmint/server/dashboard"
	"github.com/idmint/idmint/server/grpcapi"
	"github.com/idmint/idmint/server/leaf"
)

// surfaces are what cmd/idmint serves beside the native API: Leaf's,
// administration, the dashboard and the gRPC service.
var surfaces = []server.NewSurface{leaf.New, admin.New, dashboard.New, grpcapi.New}

func newServer(t testing.TB, keys map[string]server.KeyConfig) (*server.Server, http.Handler) {
	t.Helper()
	return newServerClock(t, keys, nil)
}

// newServerClock is newServer on the given clock (nil: the real one).
func newServerClock(t testing.TB, keys map[string]server.KeyConfig, clk clock.Clock) (*server.Server, http.Handler) {
	t.Helper()
	s, err := newServerErr(t, keys, clk)
	if err != nil {
		t.Fatal(err)
	}
	return s, s.Handler()
}

// newServerErr builds newServer's server and returns New's error.
func newServerErr(t testing.TB, keys map[string]server.KeyConfig, clk clock.Clock) (*server.Server, error) {
	t.Helper()
	reg := server.NewRegistry()
	if err := Register(reg); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := &server.Config{DataDir: dir, Coordinator: "static://7",
		Stores:  map[string]string{"default": "sqlite://" + filepath.Join(dir, "seg.db")},
		Layouts: map[string]string{"mine": "time=41:1ms,dc=3,worker=7,seq=12,epoch=2024-01-01"},
		Keys:    keys}
	cfg.SetDefaults()
	s, err := server.New(context.Background(), server.Options{Config: cfg, Registry: reg, Surfaces: surfaces, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s, nil
}

func get(t testing.TB, h http.Handler, method, target, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, target, rd)
	r.RemoteAddr = "127.0.0.1:1"
	// A client on loopback addressing the server by its loopback address,
	// with JSON bodies, as administration without a token requires.
	r.Host = "127.0.0.1:8080"
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

var allKeys = map[string]server.KeyConfig{
	"snowflake": {Strategy: "snowflake"},
	"custom":    {Strategy: "snowflake", Layout: "mine", Options: map[string]string{"dc": "5"}},
	"order":     {Strategy: "segment", Step: 100},
	"uuid":      {Strategy: "uuid"},
	"uuid4":     {Strategy: "uuid", Options: map[string]string{"version": "4"}},
	"oid":       {Strategy: "objectid"},
	"x":         {Strategy: "xid"},
	"u":         {Strategy: "ulid"},
	"k":         {Strategy: "ksuid"},
	"f128":      {Strategy: "flake128", Options: map[string]string{"worker": "281474976710655"}},
	"tr":        {Strategy: "timeid-random"},
	"orderno":   {Strategy: "ordernum", Step: 50, Options: map[string]string{"format": "length=16", "key": "000102030405060708090a0b0c0d0e0f"}},
}

func TestEveryStrategyServes(t *testing.T) {
	_, h := newServer(t, allKeys)
	for name := range allKeys {
		seen := map[string]bool{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for c := 0; c < 8; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 10; i++ {
					code, body := get(t, h, "GET", "/v1/keys/"+name+"/ids?count=97", "")
					var b struct{ IDs []string }
					if code != 200 || json.Unmarshal([]byte(body), &b) != nil || len(b.IDs) != 97 {
						t.Errorf("%s: %d %s", name, code, body)
						return
					}
					mu.Lock()
					for _, id := range b.IDs {
						if seen[id] {
							t.Errorf("%s: duplicate %s", name, id)
						}
						seen[id] = true
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		// Every key's IDs decode with the key's decoder.
		var one string
		for id := range seen {
			one = id
			break
		}
		code, body := get(t, h, "GET", "/v1/decode/"+one+"?key="+name, "")
		if name == "order" || name == "orderno" {
			if code != 400 {
				t.Errorf("segment IDs have no decoder: %d %s", code, body)
			}
			continue
		}
		if code != 200 {
			t.Errorf("decode %s of %s: %d %s", one, name, code, body)
		}
	}
}

func TestSnowflakeDecodeShowsLease(t *testing.T) {
	_, h := newServer(t, allKeys)
	_, id := get(t, h, "GET", "/api/snowflake/get/snowflake", "")
	code, body := get(t, h, "GET", "/v1/decode/"+id+"?layout=leaf", "")
	if code != 200 || !strings.Contains(body, `"node":7`) {
		t.Fatalf("%d %s", code, body)
	}
	code, body = get(t, h, "GET", "/decodeSnowflakeId?snowflakeId="+id, "")
	if code != 200 || !strings.Contains(body, `"workerId":"7"`) {
		t.Fatalf("leaf decode: %d %s", code, body)
	}
	_, body = get(t, h, "GET", "/v1/keys/custom/ids", "")
	var b struct{ IDs []string }
	json.Unmarshal([]byte(body), &b)
	code, body = get(t, h, "GET", "/v1/decode/"+b.IDs[0]+"?layout=mine", "")
	if code != 200 || !strings.Contains(body, `"node":7`) || !strings.Contains(body, `"dc":"5"`) {
		t.Fatalf("custom layout: %d %s", code, body)
	}
}

func TestSegmentViews(t *testing.T) {
	_, h := newServer(t, allKeys)
	get(t, h, "GET", "/api/segment/get/order", "")
	code, body := get(t, h, "GET", "/v1/keys/order/range?count=1000", "")
	if code != 200 || !strings.Contains(body, `"first":"2"`) {
		t.Fatalf("range: %d %s", code, body)
	}
	code, body = get(t, h, "GET", "/cache", "")
	if code != 200 || !strings.Contains(body, `"initOk":true`) {
		t.Fatalf("cache: %d %s", code, body)
	}
	code, body = get(t, h, "GET", "/db", "")
	if code != 200 || !strings.Contains(body, `"key":"order"`) || !strings.Contains(body, `"step":100`) {
		t.Fatalf("db: %d %s", code, body)
	}
	code, body = get(t, h, "PATCH", "/v1/keys/order", `{"step":500}`)
	if code != 200 || !strings.Contains(body, `"step":500`) {
		t.Fatalf("step: %d %s", code, body)
	}
	code, body = get(t, h, "PATCH", "/v1/keys/order", `{"step":9999999999}`)
	if code != 400 {
		t.Fatalf("step past Leaf's int column: %d %s", code, body)
	}
	// A key created through the API gets a store row; deleting and
	// re-creating it continues above the old IDs.
	code, body = get(t, h, "POST", "/v1/keys", `{"name":"inv","strategy":"segment","step":10}`)
	if code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	_, first := get(t, h, "GET", "/api/segment/get/inv", "")
	get(t, h, "DELETE", "/v1/keys/inv", "")
	get(t, h, "POST", "/v1/keys", `{"name":"inv","strategy":"segment","step":10}`)
	_, again := get(t, h, "GET", "/api/segment/get/inv", "")
	if again <= first && len(again) <= len(first) {
		t.Fatalf("after re-create: %s, before %s", again, first)
	}
}

func TestChecks(t *testing.T) {
	reg := server.NewRegistry()
	if err := Register(reg); err != nil {
		t.Fatal(err)
	}
	cfg := &server.Config{DataDir: t.TempDir(), Layouts: map[string]string{"broken": "time=70:1ms,seq=12"}, Keys: map[string]server.KeyConfig{
		"a": {Strategy: "snowflake", Layout: "twitter"}, // no datacenter
		"b": {Strategy: "snowflake", Options: map[string]string{"colour": "red"}},
		"c": {Strategy: "uuid", Options: map[string]string{"version": "9"}},
		"d": {Strategy: "segment", Step: -1},
		"e": {Strategy: "segment", Step: 1 << 40},
		"f": {Strategy: "snowflake", Layout: "simpleflake"}, // no node field
		"g": {Strategy: "ordernum", Options: map[string]string{"format": "length=99", "key": "short"}},
		"h": {Strategy: "segment", Options: map[string]string{"floor": "-5"}},
		"i": {Strategy: "segment", Options: map[string]string{"floor": "12abc"}},
	}}
	cfg.SetDefaults()
	err := cfg.Validate(reg)
	var ve *server.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"layouts.broken", "keys.a.options.datacenter", "keys.b.options.colour", "keys.c.options.version", "keys.d.step", "keys.e.step", "keys.f.layout", "keys.g.options.format", "keys.g.options.key", "keys.h.options.floor", "keys.i.options.floor"} {
		found := false
		for _, p := range ve.Problems {
			found = found || p.Field == want
		}
		if !found {
			t.Errorf("no problem for %s in %v", want, err)
		}
	}
}

// Benchmarks through the whole handler with the real strategies.
func benchReal(b *testing.B, target string) {
	_, h := newServer(b, allKeys)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := httptest.NewRequest("GET", target, nil)
		r.RemoteAddr = "127.0.0.1:1"
		// A writer that keeps nothing, so the figure is the handler's (a
		// ResponseRecorder allocated more than the handler did).
		w := &benchWriter{h: http.Header{}}
		for pb.Next() {
			clear(w.h)
			w.code = 0
			h.ServeHTTP(w, r)
			if w.code != 0 && w.code != 200 {
				b.Fatalf("status %d", w.code)
			}
		}
	})
}

type benchWriter struct {
	h    http.Header
	code int
}

func (d *benchWriter) Header() http.Header         { return d.h }
func (d *benchWriter) WriteHeader(c int)           { d.code = c }
func (d *benchWriter) Write(p []byte) (int, error) { return len(p), nil }

func BenchmarkLeafSegment(b *testing.B)        { benchReal(b, "/api/segment/get/order") }
func BenchmarkLeafSnowflake(b *testing.B)      { benchReal(b, "/api/snowflake/get/snowflake") }
func BenchmarkSegmentBatch1000(b *testing.B)   { benchReal(b, "/v1/keys/order/ids?count=1000") }
func BenchmarkSnowflakeBatch1000(b *testing.B) { benchReal(b, "/v1/keys/snowflake/ids?count=1000") }

func TestOrderNumbers(t *testing.T) {
	_, h := newServer(t, allKeys)
	code, body := get(t, h, "GET", "/v1/keys/orderno/ids?count=5", "")
	var b struct{ IDs []string }
	if code != 200 || json.Unmarshal([]byte(body), &b) != nil || len(b.IDs) != 5 {
		t.Fatalf("%d %s", code, body)
	}
	for _, id := range b.IDs {
		if len(id) != 16 || strings.Trim(id, "0123456789") != "" {
			t.Fatalf("order number %q is not 16 digits", id)
		}
	}
	t.Log(b.IDs)
}
