package segmenttest

import (
	"context"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/segment"
)

// BenchmarkAllocate measures one store round trip: an Allocate of the
// key's own step.
func BenchmarkAllocate(b *testing.B, open Opener) {
	ctx := context.Background()
	s := open()
	defer s.Close()
	if err := s.Create(ctx, segment.KeyInfo{Key: "bench", Step: 1000}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Allocate(ctx, "bench", 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNext runs an Allocator on the store with Leaf's defaults (load
// at 10 %, dynamic step) and a key configured with step 100,000, and
// reports how many Next calls had to wait for the store once the first
// segment was in ("waits": 0 means the double buffer kept the store off
// the hot path), the loads done meanwhile, and the slowest call (which
// includes the scheduler's preemptions on a busy machine).
func BenchmarkNext(b *testing.B, open Opener) {
	ctx := context.Background()
	s := open()
	defer s.Close()
	if err := s.Create(ctx, segment.KeyInfo{Key: "bench", Step: 100_000}); err != nil {
		b.Fatal(err)
	}
	a, err := segment.New(s, segment.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	k, err := a.Key("bench")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := k.Next(ctx); err != nil {
		b.Fatal(err)
	}
	clk := clock.NewReal()
	before := k.Stats()
	var slowest time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		t0 := clk.Mono()
		if _, err := k.Next(ctx); err != nil {
			b.Fatal(err)
		}
		if d := clk.Mono() - t0; d > slowest {
			slowest = d
		}
	}
	after := k.Stats()
	b.ReportMetric(float64(after.Waits-before.Waits), "waits")
	b.ReportMetric(float64(after.Loads-before.Loads), "loads")
	b.ReportMetric(float64(slowest.Nanoseconds()), "slowest-ns")
}
