package strategies

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/region"
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/testkit/testserver"
	"github.com/idmint/idmint/witness"
)

// identityRefusals starts nodes against one coordinator (or witness):
// the first records eu-west (index 1 of 2); a node configured as another
// region, or as none, is refused naming where it is recorded and both
// regions; another node of eu-west (its own data directory) starts.
func identityRefusals(t *testing.T, where string, edit func(c *server.Config)) {
	t.Helper()
	keys := map[string]server.KeyConfig{"u": {Strategy: "uuid"}}
	with := func(r func(*server.Config)) func(*server.Config) {
		return func(c *server.Config) {
			edit(c)
			if r != nil {
				r(c)
			}
		}
	}
	s, err := regionServer(t, t.TempDir(), with(inRegion("eu-west", 1, 2)), keys)
	if err != nil {
		t.Fatalf("first start: %v", err)
	}
	s.Close(context.Background())
	_, err = regionServer(t, t.TempDir(), with(inRegion("us-east", 0, 2)), keys)
	if err == nil || !strings.Contains(err.Error(), "configured as us-east (index 0 of 2), but its "+where) || !strings.Contains(err.Error(), "records eu-west (index 1 of 2)") {
		t.Fatalf("another region: %v, want a refusal naming its %s, us-east and eu-west", err, where)
	}
	_, err = regionServer(t, t.TempDir(), with(nil), keys)
	if err == nil || !strings.Contains(err.Error(), "no region: section, but its "+where) || !strings.Contains(err.Error(), "eu-west (index 1 of 2)") {
		t.Fatalf("no region: %v, want a refusal naming its %s and eu-west", err, where)
	}
	if _, err := regionServer(t, t.TempDir(), with(inRegion("eu-west", 1, 2)), keys); err != nil {
		t.Fatalf("a second node of eu-west: %v", err)
	}
}

// TestRegionIdentityEtcd: an etcd coordinator records the region under its
// prefix.
func TestRegionIdentityEtcd(t *testing.T) {
	coord := "etcd://" + testserver.Addr(t, testserver.Etcd) + "/" + testserver.Prefix(t) + "?name=app"
	identityRefusals(t, "coordinator etcd://", func(c *server.Config) { c.Coordinator = coord })
}

// TestRegionIdentityPostgres: a PostgreSQL coordinator records the region
// in a row beside its worker table.
func TestRegionIdentityPostgres(t *testing.T) {
	coord := testserver.Database(t, testserver.Postgres)
	identityRefusals(t, "coordinator postgres://", func(c *server.Config) { c.Coordinator = coord })
}

// TestRegionIdentityZooKeeper: a ZooKeeper coordinator records the
// region in a znode beside its own.
func TestRegionIdentityZooKeeper(t *testing.T) {
	coord := "zk://" + testserver.Addr(t, testserver.ZooKeeper) + "/" + testserver.Prefix(t) + "/snowflake/app"
	identityRefusals(t, "coordinator zk://", func(c *server.Config) { c.Coordinator = coord })
}

// TestRegionIdentityWitness: two regions whose nodes keep their own
// coordinator (the data directory) but were given one witness by mistake:
// the witness records the first region, and the second is refused.
func TestRegionIdentityWitness(t *testing.T) {
	w := testserver.Database(t, testserver.Postgres)
	identityRefusals(t, "witness postgres://", func(c *server.Config) { c.Witness = w })
}

// TestRegionRegistry: regions claim their indexes in a registry (a private
// etcd); a region claiming a taken index is refused naming the holder, a
// different count is refused; with the registry stopped, a region that
// claimed before starts from its data directory's copy, and one that never
// did is refused; a released region's index is free again.
func TestRegionRegistry(t *testing.T) {
	etcd := testserver.Start(t, testserver.Etcd)
	reg := "etcd://" + etcd.Addr() + "/regions"
	keys := map[string]server.KeyConfig{"u": {Strategy: "uuid"}}
	start := func(dir, name string, index, count int) error {
		s, err := regionServer(t, dir, func(c *server.Config) {
			inRegion(name, index, count)(c)
			c.Region.Registry = reg
		}, keys)
		if err == nil {
			s.Close(context.Background())
		}
		return err
	}
	usDir, euDir := t.TempDir(), t.TempDir()
	if err := start(usDir, "us-east", 0, 2); err != nil {
		t.Fatal(err)
	}
	if err := start(usDir, "us-east", 0, 2); err != nil {
		t.Fatalf("the same region again: %v", err)
	}
	err := start(euDir, "eu-west", 0, 2)
	if err == nil || !strings.Contains(err.Error(), "index 0 is held by region us-east") || !strings.Contains(err.Error(), "region eu-west cannot take it") {
		t.Fatalf("a taken index: %v", err)
	}
	if err := start(t.TempDir(), "ap-south", 1, 3); err == nil || !strings.Contains(err.Error(), "says 3 regions") || !strings.Contains(err.Error(), "records 2") {
		t.Fatalf("another count: %v", err)
	}
	if err := start(euDir, "eu-west", 1, 2); err != nil {
		t.Fatalf("eu-west on the free index: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(euDir, "region-claim.json")); err != nil || !strings.Contains(string(b), `"eu-west"`) {
		t.Fatalf("claim cache: %q %v", b, err)
	}

	etcd.Stop(t)
	if err := start(euDir, "eu-west", 1, 2); err != nil {
		t.Fatalf("a region that claimed before, registry down: %v", err)
	}
	err = start(t.TempDir(), "eu-west", 1, 2)
	if err == nil || !strings.Contains(err.Error(), "region.registry: cannot reach") || !strings.Contains(err.Error(), "first start needs its registry") {
		t.Fatalf("a first start with the registry down: %v", err)
	}
	etcd.Restart(t)

	// Retire us-east: its index is free for another region.
	w, err := witness.Open(context.Background(), reg, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if i, err := ReleaseRegion(context.Background(), w.(witness.Recorder), "us-east"); err != nil || i != 0 {
		t.Fatalf("release: %d %v", i, err)
	}
	if err := start(t.TempDir(), "sa-east", 0, 2); err != nil {
		t.Fatalf("the released index: %v", err)
	}
	if _, err := ReleaseRegion(context.Background(), w.(witness.Recorder), "nowhere"); err == nil || !strings.Contains(err.Error(), `no region called "nowhere"`) {
		t.Fatalf("release of an unknown region: %v", err)
	}
}

// TestRegionRegistrySQL: the registry in a PostgreSQL database refuses a
// taken index and a name claimed at another index.
func TestRegionRegistrySQL(t *testing.T) {
	db := testserver.Database(t, testserver.Postgres)
	w, err := witness.Open(context.Background(), db, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rec := w.(witness.Recorder)
	ctx := context.Background()
	if err := ClaimIndex(ctx, rec, region.Region{Name: "us-east", Index: 0, Count: 2}); err != nil {
		t.Fatal(err)
	}
	if err := ClaimIndex(ctx, rec, region.Region{Name: "eu-west", Index: 0, Count: 2}); err == nil || !strings.Contains(err.Error(), "held by region us-east") {
		t.Fatalf("taken index: %v", err)
	}
	if err := ClaimIndex(ctx, rec, region.Region{Name: "us-east", Index: 1, Count: 2}); err == nil || !strings.Contains(err.Error(), "region us-east holds index 0") {
		t.Fatalf("a name at another index: %v", err)
	}
	// The refused claim gave index 1 back.
	if err := ClaimIndex(ctx, rec, region.Region{Name: "eu-west", Index: 1, Count: 2}); err != nil {
		t.Fatalf("index 1 after the refused claim: %v", err)
	}
}

// TestRegionTicketRedisDisjoint: two regions, each with its own ticket
// database and its own Redis counter, all counting from 1, issue disjoint
// IDs; a single region's ticket IDs are unchanged by becoming region 0.
func TestRegionTicketRedisDisjoint(t *testing.T) {
	redisAddr := testserver.Addr(t, testserver.Redis)
	prefix := testserver.Prefix(t)
	var got [3][]int64
	for i, edit := range []func(*server.Config){nil, inRegion("r0", 0, 2), inRegion("r1", 1, 2)} {
		pg := testserver.Database(t, testserver.Postgres) // the region's own store
		keys := map[string]server.KeyConfig{
			"t": {Strategy: "ticket", Store: "pg"},
			"r": {Strategy: "redis", Options: map[string]string{"redis": redisAddr, "counter_key": fmt.Sprintf("%s:%d", prefix, i)}},
		}
		s, err := regionServer(t, t.TempDir(), func(c *server.Config) {
			if edit != nil {
				edit(c)
			}
			c.Stores = map[string]string{"pg": pg}
		}, keys)
		if err != nil {
			t.Fatal(err)
		}
		got[i] = append(idsOf(t, s.Handler(), "t", 200), idsOf(t, s.Handler(), "r", 200)...)
	}
	for j := range 200 {
		if got[0][j] != got[1][j] {
			t.Fatalf("ticket ID %d: %d without a region, %d as region 0", j, got[0][j], got[1][j])
		}
	}
	disjoint(t, "ticket and redis", got[1], got[2])
	if got[2][0] != 1<<62|got[1][0] {
		t.Fatalf("region 1's first ticket %d, want 2^62|%d", got[2][0], got[1][0])
	}
}

// TestRegionIdentityCoordinatorDown: with its etcd coordinator stopped, a
// node whose data directory holds the region it recorded before starts
// (with a warning), a node that never recorded it is refused, and a node
// without a region starts as it always did.
func TestRegionIdentityCoordinatorDown(t *testing.T) {
	etcd := testserver.Start(t, testserver.Etcd)
	coord := "etcd://" + etcd.Addr() + "/idmint?name=app"
	keys := map[string]server.KeyConfig{"u": {Strategy: "uuid"}}
	start := func(dir string, r func(*server.Config)) error {
		s, err := regionServer(t, dir, func(c *server.Config) {
			c.Coordinator = coord
			if r != nil {
				r(c)
			}
		}, keys)
		if err == nil {
			s.Close(context.Background())
		}
		return err
	}
	dir := t.TempDir()
	if err := start(dir, inRegion("eu-west", 1, 2)); err != nil {
		t.Fatal(err)
	}
	etcd.Stop(t)
	if err := start(dir, inRegion("eu-west", 1, 2)); err != nil {
		t.Fatalf("the recorded region, coordinator down: %v", err)
	}
	if err := start(dir, inRegion("us-east", 0, 2)); err == nil || !strings.Contains(err.Error(), "cannot record or check this node's region us-east (index 0 of 2)") {
		t.Fatalf("another region than the copy, coordinator down: %v", err)
	}
	if err := start(t.TempDir(), inRegion("eu-west", 1, 2)); err == nil || !strings.Contains(err.Error(), "cannot record or check") {
		t.Fatalf("a node that never recorded its region, coordinator down: %v", err)
	}
	if err := start(t.TempDir(), nil); err != nil {
		t.Fatalf("a node without a region, coordinator down: %v", err)
	}
}
