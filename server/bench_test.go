package server

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// benchHandler measures the handler alone (routing, parsing, auth, metrics,
// encoding) over the in-memory counter strategy.
func benchHandler(b *testing.B, target string) {
	f := newFixture(b, nil)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := httptest.NewRequest(http.MethodGet, target, nil)
		r.RemoteAddr = "127.0.0.1:1"
		w := &discard{h: http.Header{}}
		for pb.Next() {
			clear(w.h)
			f.h.ServeHTTP(w, r)
			if w.code != 0 && w.code != 200 {
				b.Fatalf("status %d", w.code)
			}
		}
	})
}

func BenchmarkHandlerIDs1(b *testing.B)    { benchHandler(b, "/v1/keys/order/ids") }
func BenchmarkHandlerIDs1000(b *testing.B) { benchHandler(b, "/v1/keys/order/ids?count=1000") }

type discard struct {
	h    http.Header
	code int
}

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) WriteHeader(c int)           { d.code = c }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
