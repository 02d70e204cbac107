package strategies

import (
	"encoding/json"
	"testing"

	"github.com/idmint/idmint/server"
)

// A segment key with options.floor serves only IDs above it, from the
// first request on (the first segments are loaded in the background at
// start: the floor is raised before they load), on the native and Leaf's
// routes alike.
func TestSegmentFloor(t *testing.T) {
	const floor = 987_654_321
	_, h := newServer(t, map[string]server.KeyConfig{
		"order":  {Strategy: "segment", Step: 100, Options: map[string]string{"floor": "987_654_321"}},
		"plain":  {Strategy: "segment", Step: 100},
		"orders": {Strategy: "segment", Step: 100, Options: map[string]string{"floor": "0"}},
	})
	code, body := get(t, h, "GET", "/v1/keys/order/ids?count=500", "")
	if code != 200 {
		t.Fatalf("ids: %d %s", code, body)
	}
	var ans struct{ IDs []json.Number }
	if err := json.Unmarshal([]byte(body), &ans); err != nil || len(ans.IDs) != 500 {
		t.Fatalf("ids: %v %.200s", err, body)
	}
	for _, n := range ans.IDs {
		if id, err := n.Int64(); err != nil || id <= floor {
			t.Fatalf("ID %d is not above the floor %d", id, floor)
		}
	}
	if code, body := get(t, h, "GET", "/api/segment/get/order", ""); code != 200 || body <= "987654321" || len(body) < 9 {
		t.Fatalf("Leaf's route: %d %s", code, body)
	}
	// Keys without a floor (or floor 0) are unchanged.
	if code, body := get(t, h, "GET", "/api/segment/get/plain", ""); code != 200 || body != "1" {
		t.Fatalf("plain: %d %q", code, body)
	}
}
