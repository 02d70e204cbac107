package segmenttest

import (
	"context"
	"fmt"
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

// BenchmarkAllocateMany leases lots of lot keys at a time from a store of
// rows keys (each lot one AllocateMany, a server's warm-up lot or group
// commit) and reports the cost per key: flat as lot grows when the batch
// statement is linear in its keys.
func BenchmarkAllocateMany(b *testing.B, open Opener, rows, lot int) {
	ctx := context.Background()
	s := open()
	defer s.Close()
	if lot <= 0 || rows%lot != 0 {
		b.Fatalf("lot %d: want a divisor of rows %d (a lot must not hold a key twice)", lot, rows)
	}
	ba, ok := s.(segment.BatchAllocator)
	if !ok {
		b.Skip("the store has no AllocateMany")
	}
	infos := make([]segment.KeyInfo, rows)
	for i := range infos {
		infos[i] = segment.KeyInfo{Key: fmt.Sprintf("k%d", i), Step: 1000}
	}
	if bc, ok := s.(segment.BatchCreator); ok {
		if err := bc.CreateMissing(ctx, infos); err != nil {
			b.Fatal(err)
		}
	} else {
		for _, k := range infos {
			if err := s.Create(ctx, k); err != nil {
				b.Fatal(err)
			}
		}
	}
	reqs := make([]segment.AllocateRequest, lot)
	next := 0
	b.ResetTimer()
	for b.Loop() {
		for i := range reqs {
			reqs[i] = segment.AllocateRequest{Key: infos[next].Key}
			next = (next + 1) % rows
		}
		out, err := ba.AllocateMany(ctx, reqs)
		if err != nil {
			b.Fatal(err)
		}
		for i, a := range out {
			if a.Err != nil {
				b.Fatalf("key %s: %v", reqs[i].Key, a.Err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*lot), "ns/key")
}
