package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/segment/redisstore"
	"github.com/idmint/idmint/segment/segmenttest"
	"github.com/idmint/idmint/testkit/testserver"
)

func benchOpener(b *testing.B) segmenttest.Opener {
	url := "redis://" + testserver.Addr(b, testserver.Redis) + "/0?allow_volatile=true&prefix=" + testserver.Prefix(b)
	return func() segment.Store {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := redisstore.Open(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
}

// BenchmarkAllocate: one allocation round trip (one EVALSHA).
func BenchmarkAllocate(b *testing.B) { segmenttest.BenchmarkAllocate(b, benchOpener(b)) }

// BenchmarkNext: Next through the double buffer on Redis.
func BenchmarkNext(b *testing.B) { segmenttest.BenchmarkNext(b, benchOpener(b)) }
