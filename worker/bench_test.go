package worker

import (
	"context"
	"testing"
	"time"
)

// BenchmarkLeaseValidUntil is the fence check a generator makes per ID.
func BenchmarkLeaseValidUntil(b *testing.B) {
	a, _ := NewStatic(1, WithMemoryHorizon())
	l, err := a.Acquire(context.Background(), 31)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if l.ValidUntil() <= 0 {
				b.Fatal("invalid")
			}
		}
	})
}

// BenchmarkLeaseExtendCovered is an Extend the recorded horizon already
// covers: no I/O.
func BenchmarkLeaseExtendCovered(b *testing.B) {
	a, _ := NewStatic(1, WithMemoryHorizon())
	ctx := context.Background()
	l, err := a.Acquire(ctx, 31)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	until := time.Now().Add(time.Hour)
	if _, err := l.Extend(ctx, until); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := l.Extend(ctx, until.Add(-time.Second)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
