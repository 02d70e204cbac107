package redisstore_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/segment/redisstore"
	"github.com/idmint/idmint/testkit/testserver"
)

// HINCRBY refuses an overflow, and also a max_id or step field that is
// not an integer. Each gets its own error naming the field and its value:
// a hand-edited field is not reported as a used-up number line.
func TestAllocateRefusedByHINCRBY(t *testing.T) {
	addr := testserver.Addr(t, testserver.Redis)
	prefix := testserver.Prefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := redisstore.Open(ctx, "redis://"+addr+"/0?allow_volatile=true&prefix="+prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rc := redis.NewClient(&redis.Options{Addr: addr})
	defer rc.Close()
	for _, tc := range []struct {
		key         string
		field, set  string // written into the key's hash after Create
		step        int64
		is          error
		wants, nots string
	}{
		{"full", "", "", 10, segment.ErrOverflow, "max_id 9223372036854775800 + step 10", ""},
		{"badmax", "max_id", "abc", 10, nil, `max_id field is "abc", not an integer`, "overflow"},
		{"badstep", "step", "1e3", 0, segment.ErrBadStep, `step field is "1e3", not an integer`, "overflow"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			if err := s.Create(ctx, segment.KeyInfo{Key: tc.key, MaxID: math.MaxInt64 - 7, Step: 100}); err != nil {
				t.Fatal(err)
			}
			if tc.field != "" {
				if err := rc.HSet(ctx, prefix+":segment:{"+tc.key+"}", tc.field, tc.set).Err(); err != nil {
					t.Fatal(err)
				}
			}
			_, err := s.Allocate(ctx, tc.key, tc.step)
			if err == nil || !strings.Contains(err.Error(), tc.wants) || (tc.is != nil && !errors.Is(err, tc.is)) ||
				(tc.nots != "" && (strings.Contains(err.Error(), tc.nots) || errors.Is(err, segment.ErrOverflow))) {
				t.Errorf("Allocate(%s, %d) = %v; want an error containing %q (is %v)", tc.key, tc.step, err, tc.wants, tc.is)
			}
		})
	}
}
