package node

import (
	"context"
	"testing"
)

// BenchmarkNext is a node's Next under a lease (fence checked per ID): the
// cost over snowflake.Generator.Next is one atomic load and the fence read.
func BenchmarkNext(b *testing.B) {
	ctx := context.Background()
	n, err := New(ctx, Config{Layout: layout(), Coordinator: "static://1?horizon=memory", Node: map[string]int64{"datacenter": 1}})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := n.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNextParallel is Next from every P at once.
func BenchmarkNextParallel(b *testing.B) {
	ctx := context.Background()
	n, err := New(ctx, Config{Layout: layout(), Coordinator: "static://1?horizon=memory", Node: map[string]int64{"datacenter": 1}})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := n.Next(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
