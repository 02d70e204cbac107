package strategies

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/snowflake"
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

// A snowflake key's floor (the largest ID of the layout a team already
// has, from uid-generator say) is proven at start: the layout's IDs from
// the current tick on must be above it, or the key is refused, naming the
// floor's time. Every ID is checked too, so a clock set back below the
// floor's time after the start answers 503 instead of an ID at or below it.
func TestSnowflakeFloor(t *testing.T) {
	l, err := snowflake.ParseLayout("time=41:1ms,dc=3,worker=7,seq=12,epoch=2024-01-01")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	floorAt := func(at time.Time) int64 {
		id, err := snowflake.Compose(l, snowflake.Parts{Time: at, Node: map[string]int64{"dc": 7, "worker": 127}, Sequence: 4095})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	past := floorAt(start.Add(-time.Hour))
	clk := clock.NewFake(start)
	keys := map[string]server.KeyConfig{"s": {Strategy: "snowflake", Layout: "mine", Options: map[string]string{"dc": "5", "floor": strconv.FormatInt(past, 10)}}}
	s, h := newServerClock(t, keys, clk)
	// Set back below the floor's time before the first ID: the generator
	// has stamped nothing yet, so only the floor check stands between the
	// clock and an ID at or below the floor.
	clk.Set(start.Add(-2 * time.Hour))
	if code, body := get(t, h, "GET", "/v1/keys/s/ids?count=1", ""); code != 503 {
		t.Fatalf("clock behind the floor before the first ID: %d %s", code, body)
	}
	clk.Set(start)
	code, body := get(t, h, "GET", "/v1/keys/s/ids?count=100", "")
	var ans struct{ IDs []json.Number }
	if code != 200 || json.Unmarshal([]byte(body), &ans) != nil || len(ans.IDs) != 100 {
		t.Fatalf("ids: %d %.200s", code, body)
	}
	for _, n := range ans.IDs {
		if id, _ := n.Int64(); id <= past {
			t.Fatalf("ID %d is not above the floor %d", id, past)
		}
	}
	// The clock is set back two hours, below the floor's time.
	clk.Set(start.Add(-2 * time.Hour))
	if code, body := get(t, h, "GET", "/v1/keys/s/ids?count=1", ""); code != 503 {
		t.Fatalf("clock behind the floor: %d %s", code, body)
	}
	s.Close(context.Background())

	// A floor stamped after this clock's now cannot be proven: refused.
	future := floorAt(start.Add(time.Hour))
	keys["s"] = server.KeyConfig{Strategy: "snowflake", Layout: "mine", Options: map[string]string{"dc": "5", "floor": strconv.FormatInt(future, 10)}}
	if _, err := newServerErr(t, keys, clock.NewFake(start)); err == nil || !strings.Contains(err.Error(), "options.floor") || !strings.Contains(err.Error(), "not yet past") {
		t.Fatalf("a floor ahead of the clock: %v", err)
	}
}
