package strategies

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idmint/idmint/server"
)

// regionServer starts a server whose config is cfg's fields over a
// single-node base in dir (static coordinator, SQLite default store).
func regionServer(t testing.TB, dir string, edit func(c *server.Config), keys map[string]server.KeyConfig) (*server.Server, error) {
	t.Helper()
	reg := server.NewRegistry()
	if err := Register(reg); err != nil {
		t.Fatal(err)
	}
	cfg := &server.Config{DataDir: dir, Coordinator: "static://7",
		Stores: map[string]string{"default": "sqlite://" + filepath.Join(dir, "seg.db")},
		Keys:   keys}
	if edit != nil {
		edit(cfg)
	}
	cfg.SetDefaults()
	s, err := server.New(context.Background(), server.Options{Config: cfg, Registry: reg, Surfaces: surfaces,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s, nil
}

func inRegion(name string, index, count int) func(c *server.Config) {
	return func(c *server.Config) { c.Region = server.RegionConfig{Name: name, Index: index, Count: count} }
}

// TestRegionIdentityDataDir: with a coordinator that keeps nothing
// (static://), the data directory records the region on the first start;
// a start configured as another region, or as none, is refused naming
// both; the same region starts again.
func TestRegionIdentityDataDir(t *testing.T) {
	dir := t.TempDir()
	keys := map[string]server.KeyConfig{"u": {Strategy: "uuid"}}
	s, err := regionServer(t, dir, inRegion("eu-west", 1, 2), keys)
	if err != nil {
		t.Fatalf("first start: %v", err)
	}
	s.Close(context.Background())
	if _, err := regionServer(t, dir, inRegion("us-east", 0, 2), keys); err == nil ||
		!strings.Contains(err.Error(), "configured as us-east (index 0 of 2)") || !strings.Contains(err.Error(), "records eu-west (index 1 of 2)") {
		t.Fatalf("another region's start: %v, want a refusal naming us-east and eu-west", err)
	}
	if _, err := regionServer(t, dir, inRegion("eu-west", 0, 2), keys); err == nil || !strings.Contains(err.Error(), "records eu-west (index 1 of 2)") {
		t.Fatalf("another index: %v, want a refusal", err)
	}
	if _, err := regionServer(t, dir, inRegion("eu-west", 1, 3), keys); err == nil || !strings.Contains(err.Error(), "records eu-west (index 1 of 2)") {
		t.Fatalf("another count: %v, want a refusal", err)
	}
	if _, err := regionServer(t, dir, nil, keys); err == nil || !strings.Contains(err.Error(), "no region: section") || !strings.Contains(err.Error(), "eu-west (index 1 of 2)") {
		t.Fatalf("no region: %v, want a refusal naming eu-west", err)
	}
	if _, err := regionServer(t, dir, inRegion("eu-west", 1, 2), keys); err != nil {
		t.Fatalf("same region again: %v", err)
	}
	// A deployment that never had a region starts as before.
	if _, err := regionServer(t, t.TempDir(), nil, keys); err != nil {
		t.Fatal(err)
	}
}

// disjoint fails the test when a and b share an ID.
func disjoint(t *testing.T, what string, a, b []int64) {
	t.Helper()
	seen := make(map[int64]bool, len(a))
	for _, v := range a {
		seen[v] = true
	}
	for _, v := range b {
		if seen[v] {
			t.Fatalf("%s: ID %d issued in both regions", what, v)
		}
	}
}

// TestRegionSegmentDisjoint: two regions with their own SQLite stores,
// both counting from 1, issue disjoint IDs (region 1 in the upper half of
// the number line), ranges included; region 0's IDs are exactly those of
// a deployment without a region.
func TestRegionSegmentDisjoint(t *testing.T) {
	keys := map[string]server.KeyConfig{"order": {Strategy: "segment", Step: 100}}
	var got [3][]int64
	for i, edit := range []func(*server.Config){nil, inRegion("r0", 0, 2), inRegion("r1", 1, 2)} {
		s, err := regionServer(t, t.TempDir(), edit, keys)
		if err != nil {
			t.Fatal(err)
		}
		got[i] = append(idsOf(t, s.Handler(), "order", 250), idsOf(t, s.Handler(), "order", 250)...)
		code, body := get(t, s.Handler(), "GET", "/v1/keys/order/range?count=50", "")
		if code != 200 {
			t.Fatalf("range: %d %s", code, body)
		}
		var rb struct{ First, Last string }
		decodeJSON(t, body, &rb)
		for _, v := range ints(t, []string{rb.First, rb.Last}) {
			got[i] = append(got[i], v)
		}
	}
	for j, v := range got[0] {
		if got[1][j] != v {
			t.Fatalf("region 0's ID %d is %d; without a region it was %d: region 0 must issue what a single region did", j, got[1][j], v)
		}
	}
	disjoint(t, "segment", got[1], got[2])
	if got[2][0] != 1<<62|1 {
		t.Fatalf("region 1 of 2's first ID is %d, want 2^62|1", got[2][0])
	}
}

func decodeJSON(t testing.TB, body string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
}
