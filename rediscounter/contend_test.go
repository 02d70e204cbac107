package rediscounter

import (
	"context"
	"sync"
	"testing"

	"github.com/idmint/idmint/testkit/testserver"
)

// Processes racing one key with a tiny block keep pushing the counter past
// each other's ceiling: a call must still get its IDs (the lead it raises
// grows with each lost race), not ErrBehind.
func TestContendedCeiling(t *testing.T) {
	addr := testserver.Addr(t, testserver.Redis)
	marks := sqliteMarks(t)
	key := testserver.Prefix(t)
	var cs []*Counter
	for range 4 {
		cs = append(cs, openCounter(t, Config{Redis: addr, Key: key, Marks: marks, Block: 1}))
	}
	var set ids
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			c := cs[w%len(cs)]
			buf := make([]int64, 5)
			for range 200 {
				n, err := c.NextN(context.Background(), buf)
				if err != nil {
					t.Error(err)
					return
				}
				set.add(t, buf[:n]...)
			}
		})
	}
	wg.Wait()
	if len(set.seen) != 16*200*5 {
		t.Fatalf("%d values, want %d", len(set.seen), 16*200*5)
	}
}
