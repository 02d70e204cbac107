package segment_test

import (
	"context"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/segment"
)

func benchAllocator(b *testing.B, step int64, latency time.Duration) (*segment.Allocator, *segment.Key) {
	b.Helper()
	f := newFake()
	f.latency = latency
	if err := f.Create(context.Background(), segment.KeyInfo{Key: "bench", Step: step}); err != nil {
		b.Fatal(err)
	}
	a, err := segment.New(f, segment.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close() })
	k, err := a.Key("bench")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := k.Next(context.Background()); err != nil { // first load
		b.Fatal(err)
	}
	return a, k
}

// BenchmarkNext: one goroutine, IDs from memory through a held Key handle.
func BenchmarkNext(b *testing.B) {
	_, k := benchAllocator(b, 1_000_000, 0)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := k.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNextByName: the same through Allocator.Next, looking the key up
// by name on every call.
func BenchmarkNextByName(b *testing.B) {
	a, _ := benchAllocator(b, 1_000_000, 0)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := a.Next(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNextParallel(b *testing.B) {
	_, k := benchAllocator(b, 1_000_000, 0)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := k.Next(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkRange1000 reserves blocks of 1,000 IDs.
func BenchmarkRange1000(b *testing.B) {
	_, k := benchAllocator(b, 1_000_000, 0)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	var ids int64
	for b.Loop() {
		blk, err := k.Range(ctx, 1000)
		if err != nil {
			b.Fatal(err)
		}
		ids += blk.Len()
	}
	b.ReportMetric(float64(ids)/b.Elapsed().Seconds(), "IDs/s")
}

// BenchmarkNextN1000 fills a slice of 1,000 IDs per call.
func BenchmarkNextN1000(b *testing.B) {
	_, k := benchAllocator(b, 1_000_000, 0)
	ctx := context.Background()
	dst := make([]int64, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	var ids int64
	for b.Loop() {
		n, err := k.NextN(ctx, dst)
		if err != nil {
			b.Fatal(err)
		}
		ids += int64(n)
	}
	b.ReportMetric(float64(ids)/b.Elapsed().Seconds(), "IDs/s")
}

// BenchmarkNextStoreLatency proves the double buffer keeps the store off
// the hot path: every allocation takes 2 ms (a slow database), the key's
// step is 100,000 (Leaf grows it to 1,000,000 on a busy key), and no call
// should find both buffers empty. It reports the calls that waited for
// the store ("waits", want 0 — the key's first load is before the timer),
// the loads done meanwhile, the slowest call and the calls over 1 ms; those
// two include the scheduler's preemption on a busy machine, which "waits"
// tells apart from waiting on the store. ns/op includes reading the clock
// twice per call.
func BenchmarkNextStoreLatency(b *testing.B) {
	_, k := benchAllocator(b, 100_000, 2*time.Millisecond)
	ctx := context.Background()
	clk := clock.NewReal()
	before := k.Stats()
	var slowest time.Duration
	var over1ms int
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		t0 := clk.Mono()
		if _, err := k.Next(ctx); err != nil {
			b.Fatal(err)
		}
		d := clk.Mono() - t0
		if d > slowest {
			slowest = d
		}
		if d > time.Millisecond {
			over1ms++
		}
	}
	after := k.Stats()
	b.ReportMetric(float64(after.Waits-before.Waits), "waits")
	b.ReportMetric(float64(after.Loads-before.Loads), "loads")
	b.ReportMetric(float64(slowest.Nanoseconds()), "slowest-ns")
	b.ReportMetric(float64(over1ms), "calls>1ms")
}
