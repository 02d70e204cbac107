package redisstore_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idmint/idmint/internal/testserver"
	"github.com/idmint/idmint/segment"
)

// TestAllocateManyAfterScriptFlush: a server that lost its script cache
// (a restart, SCRIPT FLUSH) refuses the pipeline's EVALSHAs without
// running them; AllocateMany loads the script and sends them again, and
// each key moves exactly once.
func TestAllocateManyAfterScriptFlush(t *testing.T) {
	addr := testserver.Addr(t, testserver.Redis)
	ctx := context.Background()
	s := opener(t, "redis://"+addr+"/0?allow_volatile=true&prefix="+testserver.Prefix(t))()
	defer s.Close()
	var reqs []segment.AllocateRequest
	for _, k := range []string{"a", "b", "c"} {
		if err := s.Create(ctx, segment.KeyInfo{Key: k, Step: 10}); err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, segment.AllocateRequest{Key: k})
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := s.(segment.BatchAllocator).AllocateMany(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		if g.Err != nil || g.Segment != (segment.Segment{Start: 1, End: 11, Step: 10}) {
			t.Errorf("%s: %+v, %v; want [1, 11)", reqs[i].Key, g.Segment, g.Err)
		}
		if k, _ := s.Get(ctx, reqs[i].Key); k.MaxID != 11 {
			t.Errorf("%s: max_id %d, want 11 (moved once)", reqs[i].Key, k.MaxID)
		}
	}
}
