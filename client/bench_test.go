package client

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
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

// monoMem is an in-process endpoint of a monotonic key: answers at once,
// so what is measured is the client's cost of sharing requests.
type monoMem struct {
	memTransport
	rtt time.Duration // how long an answer takes (a network's round trip)
}

func (m *monoMem) rangeOf(ctx context.Context, key, token string, n int) (int64, int64, meta, error) {
	if m.rtt > 0 {
		time.Sleep(m.rtt) // stands for the network; nothing waits on it
	}
	first, count, _, err := m.memTransport.rangeOf(ctx, key, token, n)
	return first, count, meta{strategy: "monotonic"}, err
}

func (m *monoMem) ids(ctx context.Context, key, token string, n int) ([]int64, bool, meta, error) {
	ids, text, _, err := m.memTransport.ids(ctx, key, token, n)
	return ids, text, meta{strategy: "monotonic"}, err
}

// BenchmarkMonotonicShared: 256 goroutines call Next on a monotonic key
// of an in-process endpoint whose answers take rtt; every call waits for
// a shared request. ns/op over the cores is the client's CPU per call.
//
//	go test -run '^$' -bench MonotonicShared ./client/
func BenchmarkMonotonicShared(b *testing.B) {
	for _, rtt := range []time.Duration{0, 200 * time.Microsecond} {
		b.Run("rtt="+rtt.String(), func(b *testing.B) { benchShared(b, rtt) })
	}
}

func benchShared(b *testing.B, rtt time.Duration) {
	c, err := New([]string{"http://127.0.0.1:1"}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	c.pool.eps[0].t = &monoMem{rtt: rtt}
	ctx := context.Background()
	if _, err := c.Next(ctx, "seq"); err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(128)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Next(ctx, "seq"); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(c.Stats().Keys[0].Requests)/float64(b.N), "requests/ID")
}
