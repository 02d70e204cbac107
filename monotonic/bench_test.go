package monotonic

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/idmint/idmint/internal/testserver"
)

func BenchmarkFileNext1000(b *testing.B) {
	f, err := OpenFile(FileConfig{Path: filepath.Join(b.TempDir(), "bound"), Window: 10_000_000})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := f.Next(context.Background(), 1000); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)*1000/b.Elapsed().Seconds(), "ids/s")
}

// BenchmarkEtcdFollowerSingle: single IDs asked of a follower, which
// coalesces them into round trips to the leader (shared etcd).
func BenchmarkEtcdFollowerSingle(b *testing.B) {
	addr := testserver.Addr(b, testserver.Etcd)
	prefix := "/" + testserver.Prefix(b) + "/"
	var nodes []*Etcd
	for i := 0; i < 2; i++ {
		p, err := ListenPeers("127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		cli := etcdClientB(b, addr)
		e, err := NewEtcd(EtcdConfig{Client: cli, Prefix: prefix, Name: "k", Advertise: p.Addr(), Forward: p, TTL: 2 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		defer e.Close()
		p.Add("k", e, nil)
		nodes = append(nodes, e)
	}
	testserver.Eventually(b, "a leader", 10*time.Second, func() bool {
		_, s0 := nodes[0].Leader()
		_, s1 := nodes[1].Leader()
		return s0 || s1
	})
	follower := nodes[0]
	if _, self := follower.Leader(); self {
		follower = nodes[1]
	}
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := follower.Next(context.Background(), 1); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}
