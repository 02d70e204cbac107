package analyze

import (
	"bytes"
	"math/rand/v2"
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
	tw, _ := snowflake.Lookup("twitter")
	rng := rand.New(rand.NewPCG(5, 5))
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	n := 1 << 20
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
	in := buf.Bytes()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		rep, err := Read(bytes.NewReader(in), Options{Layout: tw, Now: now})
		if err != nil || rep.Count != n {
			b.Fatal(rep.Count, err)
		}
	}
}
