// Package bench compares idmint's strategies with their Go peers on the
// same benchmarks. Run everything side by side with
//
//	cd bench && go test -bench . -benchmem
//
// Files are per strategy (snowflake_test.go, ...). Peers live only in this
// module; the idmint module itself never depends on them.
package bench

import (
	"context"
	"testing"
	"time"

	bwsnowflake "github.com/bwmarrin/snowflake"
	"github.com/google/uuid"
	"github.com/oklog/ulid/v2"
	"github.com/rs/xid"
	"github.com/sony/sonyflake"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/snowflake"
)

// wide is a layout whose sequence never runs out at benchmark rates
// (2^21 IDs per millisecond), so Next measures the generator, not the clock.
var wide = snowflake.MustParseLayout("time=41:1ms,worker=1,seq=21,epoch=2010-11-04T01:42:54.657Z")

// peer is one ID generator under test: next issues one ID.
type peer struct {
	name string
	next func() error
}

func idmintPeer(b *testing.B, name string, l snowflake.Layout) peer {
	node := map[string]int64{}
	for _, f := range l.NodeFields() {
		node[f.Name] = 1
	}
	g, err := snowflake.New(l, snowflake.Settings{Node: node})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() })
	ctx := context.Background()
	return peer{name, func() error { _, err := g.Next(ctx); return err }}
}

// bwmarrinPeer builds a bwmarrin/snowflake node with the given widths. Its
// widths are package-level variables, read when the node is created.
func bwmarrinPeer(b *testing.B, name string, nodeBits, stepBits uint8) peer {
	defer func(n, s uint8) { bwsnowflake.NodeBits, bwsnowflake.StepBits = n, s }(bwsnowflake.NodeBits, bwsnowflake.StepBits)
	bwsnowflake.NodeBits, bwsnowflake.StepBits = nodeBits, stepBits
	n, err := bwsnowflake.NewNode(1)
	if err != nil {
		b.Fatal(err)
	}
	return peer{name, func() error { n.Generate(); return nil }}
}

func sonyflakePeer(b *testing.B) peer {
	sf, err := sonyflake.New(sonyflake.Settings{MachineID: func() (uint16, error) { return 1, nil }})
	if err != nil {
		b.Fatal(err)
	}
	return peer{"sonyflake-v1", func() error { _, err := sf.NextID(); return err }}
}

// unboundedPeers are generators whose sequence does not run out at
// benchmark rates: the per-ID cost of the generator itself.
func unboundedPeers(b *testing.B) []peer {
	var v7err error
	return []peer{
		idmintPeer(b, "idmint-wide", wide),
		bwmarrinPeer(b, "bwmarrin-wide", 1, 21),
		{"xid", func() error { xid.New(); return nil }},
		{"ulid-make", func() error { ulid.Make(); return nil }},
		{"uuid-v4", func() error { uuid.New(); return nil }},
		{"uuid-v7", func() error { _, v7err = uuid.NewV7(); return v7err }},
	}
}

// BenchmarkSnowflakeNext: one goroutine, one ID per call, a layout whose
// sequence never runs out. idmint's budget: 20 ns/op, 0 allocs.
func BenchmarkSnowflakeNext(b *testing.B) {
	b.Run("idmint-wide", func(b *testing.B) { runNext(b, idmintPeer(b, "", wide)) })
	b.Run("bwmarrin-wide", func(b *testing.B) { runNext(b, bwmarrinPeer(b, "", 1, 21)) })
	for _, p := range unboundedPeers(b)[2:] {
		b.Run(p.name, func(b *testing.B) { runNext(b, p) })
	}
}

func runNext(b *testing.B, p peer) {
	b.ReportAllocs()
	for b.Loop() {
		if err := p.next(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSnowflakeNextParallel is BenchmarkSnowflakeNext from GOMAXPROCS
// goroutines sharing one generator.
func BenchmarkSnowflakeNextParallel(b *testing.B) {
	for _, name := range []string{"idmint-wide", "bwmarrin-wide", "xid", "ulid-make", "uuid-v4", "uuid-v7"} {
		b.Run(name, func(b *testing.B) {
			var p peer
			for _, q := range unboundedPeers(b) {
				if q.name == name {
					p = q
				}
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := p.next(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkSnowflakeCapacity issues IDs from one goroutine as fast as each
// layout allows and reports the rate, its share of the layout's capacity
// and the longest single call. Twitter's bits: 4,096,000 IDs/s; Sonyflake's:
// 25,600 IDs/s (sonyflake v1 sleeps when its sequence runs out).
func BenchmarkSnowflakeCapacity(b *testing.B) {
	tw, _ := snowflake.Lookup("twitter")
	sf, _ := snowflake.Lookup("sonyflake")
	b.Run("idmint-twitter", func(b *testing.B) { runCapacity(b, idmintPeer(b, "", tw), tw.CapacityPerSecond()) })
	b.Run("bwmarrin-default", func(b *testing.B) { runCapacity(b, bwmarrinPeer(b, "", 10, 12), tw.CapacityPerSecond()) })
	b.Run("idmint-sonyflake", func(b *testing.B) { runCapacity(b, idmintPeer(b, "", sf), sf.CapacityPerSecond()) })
	b.Run("sonyflake-v1", func(b *testing.B) { runCapacity(b, sonyflakePeer(b), sf.CapacityPerSecond()) })
}

func runCapacity(b *testing.B, p peer, capacity float64) {
	c := clock.NewReal()
	b.ReportAllocs()
	var worst time.Duration
	start := c.Mono()
	prev := start
	for b.Loop() {
		if err := p.next(); err != nil {
			b.Fatal(err)
		}
		now := c.Mono()
		worst = max(worst, now-prev)
		prev = now
	}
	rate := float64(b.N) / (c.Mono() - start).Seconds()
	b.ReportMetric(rate, "ids/s")
	b.ReportMetric(100*rate/capacity, "%capacity")
	b.ReportMetric(float64(worst.Microseconds()), "worst-µs")
}

// BenchmarkSnowflakeBatch1000 takes IDs in batches of 1,000: idmint's NextN
// against 1,000 calls of each peer's single-ID function, on Twitter's bits.
func BenchmarkSnowflakeBatch1000(b *testing.B) {
	tw, _ := snowflake.Lookup("twitter")
	for _, l := range []snowflake.Layout{tw, wide} {
		b.Run("idmint-"+map[bool]string{true: "twitter", false: "wide"}[l.Name() == "twitter"], func(b *testing.B) {
			g, err := snowflake.New(l, snowflake.Settings{Node: nodeOf(l)})
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close()
			dst := make([]int64, 1000)
			ctx := context.Background()
			runBatch(b, func() error {
				_, err := g.NextN(ctx, dst)
				return err
			})
		})
	}
	for _, p := range []peer{bwmarrinPeer(b, "bwmarrin-default", 10, 12), bwmarrinPeer(b, "bwmarrin-wide", 1, 21)} {
		b.Run(p.name, func(b *testing.B) {
			runBatch(b, func() error {
				for range 1000 {
					p.next()
				}
				return nil
			})
		})
	}
}

func runBatch(b *testing.B, batch func() error) {
	c := clock.NewReal()
	b.ReportAllocs()
	start := c.Mono()
	for b.Loop() {
		if err := batch(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*1000/(c.Mono()-start).Seconds(), "ids/s")
}

func nodeOf(l snowflake.Layout) map[string]int64 {
	node := map[string]int64{}
	for _, f := range l.NodeFields() {
		node[f.Name] = 1
	}
	return node
}
