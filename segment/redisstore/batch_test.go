package redisstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/testkit/testserver"
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

// TestCreateMissingAfterScriptFlush: CreateMissing creates the keys that
// are missing in one pipeline, leaves an existing hash as it is, and
// survives a server that lost its script cache.
func TestCreateMissingAfterScriptFlush(t *testing.T) {
	addr := testserver.Addr(t, testserver.Redis)
	ctx := context.Background()
	s := opener(t, "redis://"+addr+"/0?allow_volatile=true&prefix="+testserver.Prefix(t))()
	defer s.Close()
	if err := s.Create(ctx, segment.KeyInfo{Key: "old", MaxID: 500, Step: 7}); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	keys := []segment.KeyInfo{{Key: "old", Step: 100}, {Key: "new1", Step: 100, Description: "d"}, {Key: "new2", MaxID: 9, Step: 3}}
	if err := s.(segment.BatchCreator).CreateMissing(ctx, keys); err != nil {
		t.Fatal(err)
	}
	want := map[string]segment.KeyInfo{
		"old":  {Key: "old", MaxID: 500, Step: 7},
		"new1": {Key: "new1", MaxID: segment.DefaultMaxID, Step: 100, Description: "d"},
		"new2": {Key: "new2", MaxID: 9, Step: 3},
	}
	for name, w := range want {
		k, err := s.Get(ctx, name)
		if err != nil || k.MaxID != w.MaxID || k.Step != w.Step || k.Description != w.Description {
			t.Errorf("%s: %+v, %v; want max_id %d, step %d, description %q", name, k, err, w.MaxID, w.Step, w.Description)
		}
	}
	if err := s.(segment.BatchCreator).CreateMissing(ctx, []segment.KeyInfo{{Key: "ok", Step: 1}, {Key: "", Step: 1}}); !errors.Is(err, segment.ErrBadKey) {
		t.Errorf("CreateMissing with an empty key: %v, want ErrBadKey", err)
	}
	if _, err := s.Get(ctx, "ok"); !errors.Is(err, segment.ErrUnknownKey) {
		t.Errorf("a batch refused for a bad key created its good key: %v", err)
	}
}
