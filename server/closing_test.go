package server

import (
	"context"
	"strings"
	"testing"
)

// TestClosedServerAnswersUnavailable: a request that reaches a server
// whose Close has run (a keep-alive connection during shutdown, a handler
// served on after Close) gets 503 with Retry-After, which clients retry
// elsewhere, not 404 unknown_key, which they take as their own mistake.
func TestClosedServerAnswersUnavailable(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	if w := do(f.h, req{target: "/v1/keys/order/ids"}); w.Code != 200 {
		t.Fatalf("before Close: %d %s", w.Code, w.Body)
	}
	f.s.Close(context.Background())
	w := do(f.h, req{target: "/v1/keys/order/ids"})
	if w.Code != 503 || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), "shutting down") {
		t.Fatalf("after Close: %d Retry-After %q %s", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
}
