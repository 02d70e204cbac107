package snowflake

import (
	"context"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
)

// wideLayout's sequence never runs out at benchmark rates: 2^22 IDs per ms.
var wideLayout = MustParseLayout("time=41:1ms,worker=1,seq=21,epoch=2010-11-04T01:42:54.657Z")

func newBenchGen(b *testing.B, l Layout, s Settings) *Generator {
	b.Helper()
	if s.Node == nil {
		s.Node = map[string]int64{}
		for _, f := range l.NodeFields() {
			s.Node[f.Name] = 1
		}
	}
	g, err := New(l, s)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() })
	return g
}

// BenchmarkNext measures Next on a layout whose sequence never runs out,
// from one goroutine: the budget is 20 ns/op and 0 allocs.
func BenchmarkNext(b *testing.B) {
	g := newBenchGen(b, wideLayout, Settings{})
	ctx := context.Background()
	b.ReportAllocs()
	var last int64
	for b.Loop() {
		id, err := g.Next(ctx)
		if err != nil || id <= last {
			b.Fatalf("id %d after %d: %v", id, last, err)
		}
		last = id
	}
}

// BenchmarkNextParallel is BenchmarkNext from GOMAXPROCS goroutines.
func BenchmarkNextParallel(b *testing.B) {
	g := newBenchGen(b, wideLayout, Settings{})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.Next(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkNextPrecise reads the clock on every ID (Settings.Coarse < 0).
func BenchmarkNextPrecise(b *testing.B) {
	g := newBenchGen(b, wideLayout, Settings{Coarse: -1})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTwitterCapacity issues Twitter-layout IDs from one goroutine under
// OverflowWait as fast as the layout allows (4,096,000 IDs/s) and reports
// the rate reached, its share of capacity and the longest single call.
func BenchmarkTwitterCapacity(b *testing.B) {
	l, _ := Lookup("twitter")
	g := newBenchGen(b, l, Settings{})
	ctx := context.Background()
	c := clock.NewReal()
	b.ReportAllocs()
	var worst, stalled time.Duration
	start := c.Mono()
	prev := start
	for b.Loop() {
		if _, err := g.Next(ctx); err != nil {
			b.Fatal(err)
		}
		now := c.Mono()
		gap := now - prev
		worst = max(worst, gap)
		if gap > l.Unit() {
			// Beyond the longest wait the generator makes (one tick), the
			// goroutine was descheduled by other load on the machine.
			stalled += gap - l.Unit()
		}
		prev = now
	}
	elapsed := c.Mono() - start
	rate := float64(b.N) / elapsed.Seconds()
	b.ReportMetric(rate, "ids/s")
	b.ReportMetric(100*rate/l.CapacityPerSecond(), "%capacity")
	b.ReportMetric(float64(worst.Microseconds()), "worst-µs")
	// On a loaded machine, lost capacity is mostly time the goroutine spent
	// descheduled: report it so the two can be told apart.
	b.ReportMetric(100*stalled.Seconds()/elapsed.Seconds(), "%descheduled")
}

// BenchmarkNextN issues batches of 1,000 IDs on the Twitter layout and on a
// layout whose sequence never runs out, and reports IDs per second.
func BenchmarkNextN(b *testing.B) {
	tw, _ := Lookup("twitter")
	for _, l := range []Layout{tw, wideLayout} {
		b.Run(l.Name(), func(b *testing.B) {
			g := newBenchGen(b, l, Settings{})
			ctx := context.Background()
			dst := make([]int64, 1000)
			b.ReportAllocs()
			c := clock.NewReal()
			start := c.Mono()
			for b.Loop() {
				if n, err := g.NextN(ctx, dst); err != nil || n != len(dst) {
					b.Fatal(n, err)
				}
			}
			b.ReportMetric(float64(b.N)*float64(len(dst))/(c.Mono()-start).Seconds(), "ids/s")
		})
	}
}
