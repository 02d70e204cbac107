package monotonic

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/idmint/idmint/testkit/testserver"
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

// BenchmarkEtcdVia: n IDs per Next, asked of the leader directly and of a
// follower (which forwards to the leader, coalescing concurrent requests),
// 32 goroutines, two nodes in this process on a shared etcd. cpu-ns/id is
// the process's CPU time (user + system, both nodes) per ID.
func BenchmarkEtcdVia(b *testing.B) {
	addr := testserver.Addr(b, testserver.Etcd)
	prefix := "/" + testserver.Prefix(b) + "/"
	var nodes []*Etcd
	for i := 0; i < 2; i++ {
		p, err := ListenPeers("127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Close() })
		e, err := NewEtcd(EtcdConfig{Client: etcdClientB(b, addr), Prefix: prefix, Name: "k", Advertise: p.Addr(), Forward: p, TTL: 2 * time.Second,
			Window: 10_000_000})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { e.Close() })
		p.Add("k", e, nil)
		nodes = append(nodes, e)
	}
	testserver.Eventually(b, "a leader", 10*time.Second, func() bool {
		_, s0 := nodes[0].Leader()
		_, s1 := nodes[1].Leader()
		return s0 || s1
	})
	leader, follower := nodes[0], nodes[1]
	if _, self := follower.Leader(); self {
		leader, follower = follower, leader
	}
	for _, n := range []int64{1, 100} {
		for _, via := range []struct {
			name string
			e    *Etcd
		}{{"leader", leader}, {"follower", follower}} {
			b.Run(fmt.Sprintf("n=%d/%s", n, via.name), func(b *testing.B) {
				b.ReportAllocs()
				b.SetParallelism(16) // 32 goroutines on 2 cores
				fwd0, served0 := follower.Status().Forwarded, leader.Status().Served
				cpu0 := cpuTime()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := via.e.Next(context.Background(), n); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.StopTimer()
				ids := float64(b.N) * float64(n)
				b.ReportMetric(ids/b.Elapsed().Seconds(), "ids/s")
				b.ReportMetric(float64(cpuTime()-cpu0)/ids, "cpu-ns/id")
				if batches := leader.Status().Served - served0; batches > 0 {
					b.ReportMetric(float64(follower.Status().Forwarded-fwd0)/float64(batches), "calls/batch")
				}
			})
		}
	}
}

// cpuTime is the process's user + system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
