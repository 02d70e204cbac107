package strategies

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/idmint/idmint/api/idmintv1"

	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/snowflake"
	"github.com/idmint/idmint/witness"
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

// TestRegionSnowflakeDisjoint: two regions whose nodes hold the same
// worker ID issue disjoint snowflake IDs, with the region index in the
// layout's datacenter field, or (a layout without one) in disjoint slices
// of the worker IDs.
func TestRegionSnowflakeDisjoint(t *testing.T) {
	for _, tc := range []struct {
		name, layout, field string
		want                [2]int64 // the field's value in region 0 and 1
	}{
		{"datacenter field", "time=41:1ms,datacenter=2,worker=8,seq=12,epoch=2024-01-01", "datacenter", [2]int64{0, 1}},
		{"region_field", "time=41:1ms,site=2,worker=8,seq=12,epoch=2024-01-01", "site", [2]int64{0, 1}},
		{"worker slices", "time=41:1ms,worker=10,seq=12,epoch=2024-01-01", "worker", [2]int64{7, 512 + 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := server.KeyConfig{Strategy: "snowflake", Layout: "l"}
			if tc.field == "site" {
				kc.Options = map[string]string{"region_field": "site"}
			}
			var got [2][]int64
			for i := range 2 {
				s, err := regionServer(t, t.TempDir(), func(c *server.Config) {
					inRegion(fmt.Sprintf("r%d", i), i, 2)(c)
					c.Layouts = map[string]string{"l": tc.layout}
				}, map[string]server.KeyConfig{"sf": kc})
				if err != nil {
					t.Fatal(err)
				}
				got[i] = idsOf(t, s.Handler(), "sf", 2000)
				l, err := snowflake.ParseLayout(tc.layout)
				if err != nil {
					t.Fatal(err)
				}
				for _, id := range got[i][:5] {
					p, err := snowflake.Decode(l, id)
					if err != nil || p.Node[tc.field] != tc.want[i] {
						t.Fatalf("region %d: ID %d has %s %d (%v), want %d", i, id, tc.field, p.Node[tc.field], err, tc.want[i])
					}
				}
			}
			disjoint(t, tc.name, got[0], got[1])
		})
	}
}

// TestRegionSnowflakeRefused: a layout without room for the regions, or a
// key whose own datacenter value is not its region's, is refused naming
// the layout, the field and the values.
func TestRegionSnowflakeRefused(t *testing.T) {
	for _, tc := range []struct {
		name, layout string
		count        int
		opts         map[string]string
		want         []string
	}{
		{"narrow datacenter", "time=41:1ms,datacenter=1,worker=8,seq=12,epoch=2024-01-01", 3, nil, []string{`field "datacenter" has 2 values, fewer than region.count 3`}},
		{"few workers", "time=41:1ms,worker=1,seq=12,epoch=2024-01-01", 4, nil, []string{"2 worker IDs, fewer than region.count 4"}},
		{"few workers after limit", "time=41:1ms,worker=10,seq=12,epoch=2024-01-01", 4, map[string]string{"worker_limit": "3"}, []string{"3 worker IDs, fewer than region.count 4"}},
		{"datacenter set otherwise", "time=41:1ms,datacenter=2,worker=8,seq=12,epoch=2024-01-01", 2, map[string]string{"datacenter": "1"}, []string{"options.datacenter", `"1"`, "(0 for region r (index 0 of 2))"}},
		{"no such region_field", "time=41:1ms,worker=10,seq=12,epoch=2024-01-01", 2, map[string]string{"region_field": "dc"}, []string{"options.region_field", `no node field "dc"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := regionServer(t, t.TempDir(), func(c *server.Config) {
				inRegion("r", 0, tc.count)(c)
				c.Layouts = map[string]string{"l": tc.layout}
			}, map[string]server.KeyConfig{"sf": {Strategy: "snowflake", Layout: "l", Options: tc.opts}})
			if err == nil {
				t.Fatal("started")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	// The same datacenter value as the region's is accepted.
	if _, err := regionServer(t, t.TempDir(), func(c *server.Config) {
		inRegion("r", 1, 2)(c)
		c.Layouts = map[string]string{"l": "time=41:1ms,datacenter=2,worker=8,seq=12,epoch=2024-01-01"}
	}, map[string]server.KeyConfig{"sf": {Strategy: "snowflake", Layout: "l", Options: map[string]string{"datacenter": "1"}}}); err != nil {
		t.Fatal(err)
	}
}

// TestRegionOrdernumDisjoint: two regions' order numbers, each from its
// own store counting from 1, never coincide; region 0 (of 1 or of 2)
// issues the numbers no region did.
func TestRegionOrdernumDisjoint(t *testing.T) {
	kc := server.KeyConfig{Strategy: "ordernum", Step: 50, Options: map[string]string{"format": "length=8", "key": "000102030405060708090a0b0c0d0e0f"}}
	strs := func(h http.Handler) []string {
		code, body := get(t, h, "GET", "/v1/keys/on/ids?count=500", "")
		var b struct{ IDs []string }
		if code != 200 {
			t.Fatalf("%d %s", code, body)
		}
		decodeJSON(t, body, &b)
		return b.IDs
	}
	var got [4][]string
	for i, edit := range []func(*server.Config){nil, inRegion("solo", 0, 1), inRegion("r0", 0, 2), inRegion("r1", 1, 2)} {
		s, err := regionServer(t, t.TempDir(), edit, map[string]server.KeyConfig{"on": kc})
		if err != nil {
			t.Fatal(err)
		}
		got[i] = strs(s.Handler())
	}
	if strings.Join(got[0], ",") != strings.Join(got[1], ",") {
		t.Fatal("region 0 of 1 changed the order numbers")
	}
	// Region 0 of 2 issues the numbers a single region did, so a single
	// region that becomes region 0 repeats none of its own, and region 1
	// (its own block) none of them either.
	if strings.Join(got[0], ",") != strings.Join(got[2], ",") {
		t.Fatal("region 0 of 2 changed the order numbers: a single region growing into two would reissue")
	}
	seen := map[string]bool{}
	for _, v := range got[2] {
		seen[v] = true
	}
	for _, v := range got[3] {
		if seen[v] {
			t.Fatalf("order number %s issued in both regions", v)
		}
	}
}

// TestRegionMonotonic: with two regions a monotonic key must choose.
// Neither scope nor home_region is refused naming the key and both
// options; scope: region issues increasing values on the region's share
// (two regions never meet); a timestamp form with scope: region is
// refused; a key whose home is the other region answers every request
// with 503 naming that region, over HTTP and gRPC.
func TestRegionMonotonic(t *testing.T) {
	plain := server.KeyConfig{Strategy: "monotonic"}
	_, err := regionServer(t, t.TempDir(), inRegion("r0", 0, 2), map[string]server.KeyConfig{"m": plain})
	if err == nil || !strings.Contains(err.Error(), "keys.m.options") || !strings.Contains(err.Error(), "options.scope: region") || !strings.Contains(err.Error(), "options.home_region: NAME") {
		t.Fatalf("a monotonic key without scope or home_region: %v", err)
	}
	ts := server.KeyConfig{Strategy: "monotonic", Options: map[string]string{"scope": "region", "form": "timestamp"}}
	if _, err := regionServer(t, t.TempDir(), inRegion("r0", 0, 2), map[string]server.KeyConfig{"m": ts}); err == nil || !strings.Contains(err.Error(), "keys.m.options.form") {
		t.Fatalf("timestamp form with scope region: %v", err)
	}
	both := server.KeyConfig{Strategy: "monotonic", Options: map[string]string{"scope": "region", "home_region": "r0"}}
	if _, err := regionServer(t, t.TempDir(), inRegion("r0", 0, 2), map[string]server.KeyConfig{"m": both}); err == nil || !strings.Contains(err.Error(), "both given") {
		t.Fatalf("scope and home_region: %v", err)
	}
	// A single region needs neither (and a deployment without regions is
	// as before).
	if _, err := regionServer(t, t.TempDir(), inRegion("solo", 0, 1), map[string]server.KeyConfig{"m": plain}); err != nil {
		t.Fatal(err)
	}

	scoped := server.KeyConfig{Strategy: "monotonic", Options: map[string]string{"scope": "region"}}
	var got [2][]int64
	for i := range 2 {
		s, err := regionServer(t, t.TempDir(), inRegion(fmt.Sprintf("r%d", i), i, 2), map[string]server.KeyConfig{"m": scoped})
		if err != nil {
			t.Fatal(err)
		}
		got[i] = append(idsOf(t, s.Handler(), "m", 300), idsOf(t, s.Handler(), "m", 300)...)
		for j := 1; j < len(got[i]); j++ {
			if got[i][j] <= got[i][j-1] {
				t.Fatalf("region %d: %d after %d", i, got[i][j], got[i][j-1])
			}
		}
	}
	disjoint(t, "monotonic scope region", got[0], got[1])
	if got[1][0] < 1<<62 {
		t.Fatalf("region 1's first value %d is not in its share (from 2^62)", got[1][0])
	}

	home := server.KeyConfig{Strategy: "monotonic", Options: map[string]string{"home_region": "us-east"}}
	s, err := regionServer(t, t.TempDir(), inRegion("eu-west", 1, 2), map[string]server.KeyConfig{"m": home})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/keys/m/ids?count=3", "/v1/keys/m/range?count=3"} {
		code, body := get(t, s.Handler(), "GET", path, "")
		if code != http.StatusServiceUnavailable || !strings.Contains(body, `served by region us-east only`) || !strings.Contains(body, "region eu-west") {
			t.Fatalf("%s on a node of another region: %d %s", path, code, body)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := s.GRPCServer()
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = idmintv1.NewIDsClient(cc).NextIDs(ctx, &idmintv1.NextIDsRequest{Key: "m", Count: 2})
	if st, _ := status.FromError(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "served by region us-east only") {
		t.Fatalf("gRPC on a node of another region: %v", err)
	}
	// The home region serves it.
	s2, err := regionServer(t, t.TempDir(), inRegion("us-east", 0, 2), map[string]server.KeyConfig{"m": home})
	if err != nil {
		t.Fatal(err)
	}
	idsOf(t, s2.Handler(), "m", 3)
}

// TestRegionRandomKeys: keys whose IDs are random or carry per-node bits
// need nothing from a region and are not refused; /metrics names the
// region (and a node without one has no such series).
func TestRegionRandomKeys(t *testing.T) {
	keys := map[string]server.KeyConfig{}
	for _, st := range []string{"uuid", "ulid", "ksuid", "xid", "objectid", "timeid-random"} {
		keys[st] = server.KeyConfig{Strategy: st}
	}
	keys["flake128"] = server.KeyConfig{Strategy: "flake128", Options: map[string]string{"worker": "3"}}
	s, err := regionServer(t, t.TempDir(), inRegion("eu-west", 1, 2), keys)
	if err != nil {
		t.Fatal(err)
	}
	for name := range keys {
		if code, body := get(t, s.Handler(), "GET", "/v1/keys/"+name+"/ids?count=5", ""); code != 200 {
			t.Errorf("%s: %d %s", name, code, body)
		}
	}
	_, body := get(t, s.Handler(), "GET", "/metrics", "")
	if !strings.Contains(body, `idmint_region_info{count="2",index="1",region="eu-west"} 1`) {
		t.Errorf("/metrics has no idmint_region_info for eu-west:\n%s", grepLines(body, "region"))
	}
	plain, err := regionServer(t, t.TempDir(), nil, map[string]server.KeyConfig{"u": {Strategy: "uuid"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, body := get(t, plain.Handler(), "GET", "/metrics", ""); strings.Contains(body, "idmint_region_info") {
		t.Error("a node without a region exports idmint_region_info")
	}
}

// TestRegionWitnessSpaces: a region's marks live under its name, so two
// regions sharing a witness never read each other's; region 0 starts from
// the mark its key had before it had a region (its numbers did not move),
// region 1 does not.
func TestRegionWitnessSpaces(t *testing.T) {
	// A wrapper that read one space and claimed another would make
	// witness.Raise loop: the deadline ends it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f, err := witness.OpenFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := witness.Raise(ctx, f, "segment/order", 5000); err != nil { // before regions
		t.Fatal(err)
	}
	r0 := regionWitness{f, "us-east:", true}
	r1 := regionWitness{f, "eu-west:", false}
	if m, err := r0.Mark(ctx, "segment/order"); err != nil || m != 5000 {
		t.Fatalf("region 0's mark: %d %v, want the single region's 5000", m, err)
	}
	if m, err := r1.Mark(ctx, "segment/order"); err != nil || m != 0 {
		t.Fatalf("region 1's mark: %d %v, want 0", m, err)
	}
	if _, err := witness.Raise(ctx, r1, "segment/order", 300); err != nil {
		t.Fatal(err)
	}
	if _, err := witness.Raise(ctx, r0, "segment/order", 7000); err != nil {
		t.Fatal(err)
	}
	for space, want := range map[string]int64{"segment/order": 5000, "us-east:segment/order": 7000, "eu-west:segment/order": 300} {
		if m, err := f.Mark(ctx, space); err != nil || m != want {
			t.Errorf("space %s: mark %d %v, want %d", space, m, err, want)
		}
	}
}

// BenchmarkRegionSegmentNext: a segment key's single-ID issue without a
// region and as region 1 of 2 (one compare and one OR more per ID):
// go test -run - -bench RegionSegmentNext ./server/strategies
func BenchmarkRegionSegmentNext(b *testing.B) {
	for _, tc := range []struct {
		name string
		edit func(*server.Config)
	}{{"no region", nil}, {"region 1 of 2", inRegion("r1", 1, 2)}} {
		b.Run(tc.name, func(b *testing.B) {
			s, err := regionServer(b, b.TempDir(), tc.edit, map[string]server.KeyConfig{"order": {Strategy: "segment", Step: 1 << 20}})
			if err != nil {
				b.Fatal(err)
			}
			ints := s.Lookup("order").Int64s()
			ctx := context.Background()
			dst := make([]int64, 1)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := ints.NextInt64s(ctx, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestRegionShareUsedUp: a region's store that counts past the region's
// share is refused (503, naming the region and the key), never let into
// the next region's share; a range that would cross it likewise.
func TestRegionShareUsedUp(t *testing.T) {
	const limit = 1<<62 - 1 // region 0 of 2 issues 0..2^62-1
	keys := map[string]server.KeyConfig{"order": {Strategy: "segment", Step: 10, Options: map[string]string{"floor": fmt.Sprint(limit - 2)}}}
	s, err := regionServer(t, t.TempDir(), inRegion("r0", 0, 2), keys)
	if err != nil {
		t.Fatal(err)
	}
	if got := idsOf(t, s.Handler(), "order", 2); got[0] != limit-1 || got[1] != limit {
		t.Fatalf("the share's last IDs: %v, want %d and %d", got, int64(limit-1), int64(limit))
	}
	for _, path := range []string{"/v1/keys/order/ids?count=1", "/v1/keys/order/range?count=5"} {
		code, body := get(t, s.Handler(), "GET", path, "")
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "share of the ID space is used up") || !strings.Contains(body, "region r0 (index 0 of 2)") {
			t.Fatalf("%s past the share: %d %s", path, code, body)
		}
	}
	l := newRegionLine(&server.Config{Region: server.RegionConfig{Name: "r1", Index: 1, Count: 2}}, "k")
	if _, err := l.applyRange(limit-1, 3); err == nil {
		t.Fatal("a range across the share's end was mapped")
	}
	if first, err := l.applyRange(limit-1, 2); err != nil || first != 1<<62|(limit-1) {
		t.Fatalf("a range ending at the share's end: %d %v", first, err)
	}
	if err := l.apply([]int64{-1}); err == nil {
		t.Fatal("a negative counter was mapped")
	}
}

// TestRegionWitnessKeyed: a node of a region keeps a key's marks under the
// region's name, in counter units; a node without a region keeps the
// spaces it always had.
func TestRegionWitnessKeyed(t *testing.T) {
	for _, tc := range []struct {
		edit        func(*server.Config)
		space, none string
	}{{nil, "segment/order", "r1:segment/order"}, {inRegion("r1", 1, 2), "r1:segment/order", "segment/order"}} {
		dir := t.TempDir()
		s, err := regionServer(t, dir, tc.edit, map[string]server.KeyConfig{"order": {Strategy: "segment", Step: 100}})
		if err != nil {
			t.Fatal(err)
		}
		idsOf(t, s.Handler(), "order", 10)
		s.Close(context.Background())
		f, err := witness.OpenFile(dir)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if m, err := f.Mark(ctx, tc.space); err != nil || m < 10 || m > 1000 {
			t.Errorf("space %s: mark %d %v, want the store's counter (10..1000)", tc.space, m, err)
		}
		if m, err := f.Mark(ctx, tc.none); err != nil || m != 0 {
			t.Errorf("space %s: mark %d %v, want none", tc.none, m, err)
		}
		f.Close()
	}
}
