package bench

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/snowflake"
)

// cpuTime is the process's user+system CPU time (getrusage).
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
}

// BenchmarkCapacityCPU drives the Twitter layout at its cap (4,096,000
// IDs/s) with 1, 8 and 64 goroutines calling NextN for 1,000 IDs, so they
// spend most of their time waiting for the next tick, and reports the
// process CPU per million IDs ("cpu-ms/M") and the rate reached. Compare
// with BenchmarkSegmentBatchCPU: in the library alone the cap costs far
// more than 2x (one thread's sleep and wake per tick, ~40 µs here, against
// ~2.7 µs for a tick's 4,096 IDs from a segment); the server-level figure,
// where requests dominate, comes from idmint bench --metrics (README).
func BenchmarkCapacityCPU(b *testing.B) {
	l, _ := snowflake.Lookup("twitter")
	for _, par := range []int{1, 8, 64} {
		b.Run(map[int]string{1: "1", 8: "8", 64: "64"}[par], func(b *testing.B) {
			g, err := snowflake.New(l, snowflake.Settings{Node: map[string]int64{"worker": 1, "datacenter": 1}})
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close()
			ctx := context.Background()
			b.ReportAllocs()
			batchCPU(b, par, func(dst []int64) error { _, err := g.NextN(ctx, dst); return err })
		})
	}
}

// BenchmarkSegmentBatchCPU is the reference for BenchmarkCapacityCPU: the
// CPU per million IDs of segment NextN batches of 1,000 from memory (an
// in-memory store leasing 10,000,000 at a time, so loads are rare), with 1, 8 and 64
// goroutines.
func BenchmarkSegmentBatchCPU(b *testing.B) {
	ctx := context.Background()
	for _, par := range []int{1, 8, 64} {
		b.Run(map[int]string{1: "1", 8: "8", 64: "64"}[par], func(b *testing.B) {
			st := &memStore{max: 0}
			a, err := segment.New(st, segment.Options{})
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
			batchCPU(b, par, func(dst []int64) error { _, err := k.NextN(ctx, dst); return err })
		})
	}
}

// batchCPU runs b.N batches of 1,000 IDs of next over par goroutines and
// reports the CPU milliseconds per million IDs and the IDs per second.
func batchCPU(b *testing.B, par int, next func(dst []int64) error) {
	c0, t0 := cpuTime(b), time.Now()
	var wg sync.WaitGroup
	per := b.N/par + 1
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dst := make([]int64, 1000)
			for range per {
				if err := next(dst); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	ids := float64(per*par) * 1000
	b.ReportMetric((cpuTime(b)-c0).Seconds()*1e3/(ids/1e6), "cpu-ms/M")
	b.ReportMetric(ids/time.Since(t0).Seconds(), "ids/s")
}

// memStore is a one-key in-memory segment.Store: the allocator's cost
// without a database's.
type memStore struct {
	mu  sync.Mutex
	max int64
}

func (m *memStore) Allocate(ctx context.Context, key string, step int64) (segment.Segment, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	const s = 10_000_000
	m.max += s
	return segment.Segment{Start: m.max - s, End: m.max, Step: s}, nil
}
func (m *memStore) Create(ctx context.Context, k segment.KeyInfo) error { return nil }
func (m *memStore) Get(ctx context.Context, key string) (segment.KeyInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return segment.KeyInfo{Key: key, MaxID: m.max, Step: 10_000_000}, nil
}
func (m *memStore) List(ctx context.Context) ([]segment.KeyInfo, error)       { return nil, nil }
func (m *memStore) SetStep(ctx context.Context, key string, step int64) error { return nil }
func (m *memStore) Delete(ctx context.Context, key string) error              { return nil }
func (m *memStore) Raise(ctx context.Context, key string, atLeast int64) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	before := m.max
	m.max = max(m.max, atLeast)
	return before, nil
}
func (m *memStore) Close() error { return nil }
