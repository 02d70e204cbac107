package client

import (
	"context"
	"sync/atomic"
	"testing"
)

// memTransport is an in-process endpoint with a segment key: the cost
// measured is the client's, not a network's.
type memTransport struct{ next atomic.Int64 }

func (m *memTransport) rangeOf(_ context.Context, _, _ string, n int) (int64, int64, meta, error) {
	return m.next.Add(int64(n)) - int64(n) + 1, int64(n), meta{strategy: "segment"}, nil
}

func (m *memTransport) ids(_ context.Context, _, _ string, n int) ([]int64, bool, meta, error) {
	first := m.next.Add(int64(n)) - int64(n) + 1
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = first + int64(i)
	}
	return ids, false, meta{strategy: "segment"}, nil
}

func (m *memTransport) close() {}

func memClient(b *testing.B) *Client {
	c, err := New([]string{"http://127.0.0.1:1"}, Options{MaxCount: 1_000_000, MinBatch: 1 << 20, MaxBatch: 1 << 24})
	if err != nil {
		b.Fatal(err)
	}
	c.pool.eps[0].t = &memTransport{}
	b.Cleanup(func() { c.Close() })
	if _, err := c.Next(context.Background(), "order"); err != nil {
		b.Fatal(err)
	}
	return c
}

// go test -run '^$' -bench 'Next' -benchtime 100000000x ./client/
func BenchmarkNext(b *testing.B) {
	c := memClient(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Next(ctx, "order"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNextParallel(b *testing.B) {
	c := memClient(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Next(ctx, "order"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkNextN100(b *testing.B) {
	c := memClient(b)
	ctx := context.Background()
	dst := make([]int64, 100)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := c.NextN(ctx, "order", dst); err != nil {
			b.Fatal(err)
		}
	}
}
