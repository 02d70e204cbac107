package sqlstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/segment/sqlstore"
	"github.com/idmint/idmint/testkit/testserver"
	"github.com/idmint/idmint/witness"
)

// counting is a SQLite store that counts its allocation round trips and
// holds the first AllocateMany until gate closes.
type counting struct {
	*sqlstore.Store
	mu     sync.Mutex
	single int   // Allocate calls
	sizes  []int // keys per AllocateMany
	gate   chan struct{}
}

func (c *counting) Allocate(ctx context.Context, key string, step int64) (segment.Segment, error) {
	c.mu.Lock()
	c.single++
	c.mu.Unlock()
	return c.Store.Allocate(ctx, key, step)
}

func (c *counting) AllocateMany(ctx context.Context, reqs []segment.AllocateRequest) ([]segment.Allocation, error) {
	c.mu.Lock()
	c.sizes = append(c.sizes, len(reqs))
	first := len(c.sizes) == 1
	c.mu.Unlock()
	if first {
		select {
		case <-c.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return c.Store.AllocateMany(ctx, reqs)
}

// TestGroupCommitSQLite: 1,000 keys' first loads on a real SQLite store,
// with the data directory's witness, while the store is busy with the
// first: they reach the database in two round trips (two commits), not
// 1,000, and every key starts at its first number.
func TestGroupCommitSQLite(t *testing.T) {
	ctx := context.Background()
	const n = 1000
	s, err := sqlstore.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "idmint.db"))
	if err != nil {
		t.Fatal(err)
	}
	c := &counting{Store: s, gate: make(chan struct{})}
	w, err := witness.OpenFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	a, err := segment.New(c, segment.Options{Witness: w, CloseStore: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var rows []segment.KeyInfo
	for i := range n {
		rows = append(rows, segment.KeyInfo{Key: fmt.Sprintf("k%d", i), Step: 100})
	}
	if _, err := a.EnsureKeys(ctx, rows); err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i], errs[i] = a.Next(ctx, rows[i].Key)
		}()
	}
	testserver.Eventually(t, "every first load to be in a batch or waiting for one (loads are not gathered)", 30*time.Second, func() bool {
		st := a.BatchStats()
		return st.Requests+uint64(st.Pending) == n
	})
	close(c.gate)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || ids[i] != 1 {
			t.Fatalf("%s: first ID %d, %v; want 1", rows[i].Key, ids[i], errs[i])
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.single != 0 || len(c.sizes) > 2 {
		t.Fatalf("%d single allocations and %d batches (the first: %v) for %d first loads; want at most 2 batches",
			c.single, len(c.sizes), c.sizes[:min(len(c.sizes), 8)], n)
	}
}
