package server

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// A request its client gave up on (the connection closed while the
// issuer waited for its store) is answered 499 and counted in
// idmint_requests_abandoned_total, not listed among the server's
// refusals: under load such requests were 40 of the dashboard's 50 recent
// errors, hiding the real ones. A timeout is still a refusal.
func TestAbandonedRequestIsNoRefusal(t *testing.T) {
	f := newFixture(t, nil)
	c := f.cs.get("order")
	c.block = make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequest("GET", "/v1/keys/order/ids", nil).WithContext(ctx)
	w := httptest.NewRecorder()
	done := make(chan struct{})
	go func() { f.h.ServeHTTP(w, r); close(done) }()
	select {
	case <-c.block:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the issuer")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the request did not end after its client gave up")
	}
	if w.Code != StatusClientClosed || !strings.Contains(w.Body.String(), `"code":"cancelled"`) {
		t.Fatalf("abandoned: %d %s, want 499 cancelled", w.Code, w.Body)
	}
	var m dto.Metric
	f.s.metrics.abandoned.Write(&m)
	if n := m.GetCounter().GetValue(); n != 1 {
		t.Fatalf("idmint_requests_abandoned_total = %v, want 1", n)
	}
	if rs := f.s.Refusals(); len(rs) != 0 {
		t.Fatalf("an abandoned request is listed as a refusal: %+v", rs)
	}
	// A deadline that ends is the server's failure to answer in time.
	ctx, cancel = context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	r = httptest.NewRequest("GET", "/v1/keys/order/ids", nil).WithContext(ctx)
	w = httptest.NewRecorder()
	go func() { <-c.block }()
	f.h.ServeHTTP(w, r)
	if w.Code != 503 || len(f.s.Refusals()) != 1 {
		t.Fatalf("timed out: %d %s, %d refusals listed; want 503 and one", w.Code, w.Body, len(f.s.Refusals()))
	}
}
