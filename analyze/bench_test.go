package analyze

import (
	"bytes"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/idmint/idmint/snowflake"
)

// BenchmarkRead analyses 2^20 Twitter-layout IDs from 4 workers, locally
// shuffled (a k-sorted log): one op is the whole report.
//
//	go test -run XXX -bench Read -benchtime 3x ./analyze/
func BenchmarkRead(b *testing.B) {
	tw, ok := snowflake.Lookup("twitter")
	if !ok {
		b.Fatal("no twitter layout")
	}
	const n = 1 << 20
	in := twitterLog(b, n)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		rep, err := Read(bytes.NewReader(in), Options{Layout: tw, Now: now})
		if err != nil || rep.Count != n {
			b.Fatal(rep.Count, err)
		}
	}
}

// BenchmarkAnalyzeMemory reports what Read allocates per ID (bytes/ID: the
// total allocated during one Read over the IDs read, so an upper bound of
// what it holds at any moment) for 2^20 Twitter-layout IDs from 4 workers,
// locally shuffled, and for 2^20 plain integers.
//
//	go test -run XXX -bench AnalyzeMemory -benchtime 3x ./analyze/
func BenchmarkAnalyzeMemory(b *testing.B) {
	tw, _ := snowflake.Lookup("twitter")
	for _, c := range []struct {
		name string
		opt  Options
		in   []byte
	}{
		{"twitter", Options{Layout: tw, Now: now}, twitterLog(b, 1<<20)},
		{"integer", Options{Format: Integer, Now: now}, integerLog(1 << 20)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var ms runtime.MemStats
			var total uint64
			n := 0
			for range b.N {
				runtime.ReadMemStats(&ms)
				before := ms.TotalAlloc
				rep, err := Read(bytes.NewReader(c.in), c.opt)
				runtime.ReadMemStats(&ms)
				if err != nil {
					b.Fatal(err)
				}
				total += ms.TotalAlloc - before
				n += rep.Count
			}
			b.ReportMetric(float64(total)/float64(n), "bytes/ID")
		})
	}
}

// twitterLog is n Twitter-layout IDs of 4 workers, 1,000 per millisecond,
// swapped within windows of 50 lines: a k-sorted log.
func twitterLog(b testing.TB, n int) []byte {
	tw, _ := snowflake.Lookup("twitter")
	rng := rand.New(rand.NewPCG(5, 5))
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	ids := make([]int64, 0, n)
	for i := range n {
		id, err := snowflake.Compose(tw, snowflake.Parts{Time: start.Add(time.Duration(i/1000) * time.Millisecond),
			Node: map[string]int64{"worker": int64(i % 4)}, Sequence: int64(i % 1000 / 4)})
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, id)
	}
	for i := 0; i+50 < n; i += 50 {
		j := i + rng.IntN(50)
		ids[i], ids[j] = ids[j], ids[i]
	}
	var buf bytes.Buffer
	for _, id := range ids {
		buf.WriteString(strconv.FormatInt(id, 10))
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// integerLog is 1..n, one per line, with every 1000th line repeated.
func integerLog(n int) []byte {
	var buf bytes.Buffer
	for i := 1; i <= n; i++ {
		buf.WriteString(strconv.Itoa(i))
		buf.WriteByte('\n')
		if i%1000 == 0 && i < n {
			buf.WriteString(strconv.Itoa(i))
			buf.WriteByte('\n')
			n--
		}
	}
	return buf.Bytes()
}
