package node

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/snowflake"
)

// TestCoordinatorRestoredFromSnapshot: the coordinator's database is
// restored from a snapshot taken before the node issued (its horizon goes
// back), and the node comes back with a clock 500 ms behind. The horizon
// kept in the node's own directory (HorizonDir) makes it start after
// everything it stamped; without it the node would stamp again what it
// stamped before the restore.
func TestCoordinatorRestoredFromSnapshot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbDir, local := t.TempDir(), t.TempDir()
	db := filepath.Join(dbDir, "w.db")
	cfg := func(c clock.Clock) Config {
		return Config{Layout: layout(), Coordinator: "sqlite://" + db, Clock: c, Node: map[string]int64{"datacenter": 0},
			WorkerLimit: 1, HorizonDir: local,
			Generator: snowflake.Settings{HorizonLead: 500 * time.Millisecond, MaxRollbackWait: 5 * time.Second}}
	}
	// The snapshot: the coordinator as it was before the node issued.
	first, err := New(ctx, cfg(clock.NewReal()))
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	snap := map[string][]byte{}
	for _, f := range []string{"w.db", "w.db-wal", "w.db-shm"} {
		if b, err := os.ReadFile(filepath.Join(dbDir, f)); err == nil {
			snap[f] = b
		}
	}
	a, err := New(ctx, cfg(clock.NewReal()))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	var maxA int64
	for range 20000 {
		id, err := a.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen[id], maxA = true, id
	}
	a.Close()
	// The restore.
	for _, f := range []string{"w.db", "w.db-wal", "w.db-shm"} {
		os.Remove(filepath.Join(dbDir, f))
		if b, ok := snap[f]; ok {
			if err := os.WriteFile(filepath.Join(dbDir, f), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	b, err := New(ctx, cfg(skewed{clock.NewReal(), 500 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for range 20000 {
		id, err := b.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if seen[id] || id <= maxA {
			t.Fatalf("after the coordinator was restored, the node issued %d (seen before: %v), not above its last %d", id, seen[id], maxA)
		}
	}
}
