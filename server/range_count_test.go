package server

import (
	"strings"
	"testing"
)

// TestRangeCountAboveMaxCount: a range answer is two numbers whatever its
// size, so /range takes counts up to MaxRangeCount even where max_count is
// lower; /ids, whose answer grows with the count, keeps max_count. Clients
// that cache IDs fetch large blocks in one round trip.
func TestRangeCountAboveMaxCount(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) { c.MaxCount = 100 })
	if w := do(f.h, req{target: "/v1/keys/order/range?count=1000000"}); w.Code != 200 || !strings.Contains(w.Body.String(), `"first"`) {
		t.Fatalf("range of 1,000,000 with max_count 100: %d %s", w.Code, w.Body)
	}
	// Each refusal names the limit that governs the route: max_count does
	// not govern /range.
	if w := do(f.h, req{target: "/v1/keys/order/range?count=1000001"}); w.Code != 400 || !strings.Contains(w.Body.String(), `"field":"count"`) ||
		!strings.Contains(w.Body.String(), "between 1 and 1000000 (the most one range may hold)") {
		t.Fatalf("range above MaxRangeCount: %d %s", w.Code, w.Body)
	}
	if w := do(f.h, req{target: "/v1/keys/order/ids?count=101"}); w.Code != 400 || !strings.Contains(w.Body.String(), "bad_count") ||
		!strings.Contains(w.Body.String(), "between 1 and 100 (max_count)") {
		t.Fatalf("ids above max_count: %d %s", w.Code, w.Body)
	}
}
