package clock

import (
	"context"
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestFakeAdvanceAndStep(t *testing.T) {
	t.Parallel()
	f := NewFake(t0)
	f.Advance(3 * time.Second)
	if got := f.Now(); !got.Equal(t0.Add(3 * time.Second)) {
		t.Fatalf("Now after Advance = %v", got)
	}
	f.Step(-time.Hour)
	if got := f.Now(); !got.Equal(t0.Add(3*time.Second - time.Hour)) {
		t.Fatalf("Now after Step back = %v", got)
	}
	if got := f.Mono(); got != 3*time.Second {
		t.Fatalf("Mono moved with Step: %v", got)
	}
	f.Advance(-time.Second)
	if got := f.Mono(); got != 3*time.Second {
		t.Fatalf("negative Advance moved Mono: %v", got)
	}
	f.Set(t0)
	if !f.Now().Equal(t0) {
		t.Fatal("Set did not set the wall clock")
	}
}

func TestFakeSleepWakesOnAdvance(t *testing.T) {
	t.Parallel()
	f := NewFake(t0)
	ctx := context.Background()
	done := make(chan error, 1)
	go func() { done <- f.Sleep(ctx, 10*time.Millisecond) }()
	if err := f.WaitForSleepers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	f.Advance(9 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("Sleep returned before its deadline")
	default:
	}
	if f.Sleepers() != 1 {
		t.Fatalf("Sleepers = %d, want 1", f.Sleepers())
	}
	f.Advance(time.Millisecond)
	if err := <-done; err != nil {
		t.Fatalf("Sleep = %v", err)
	}
	if f.Sleepers() != 0 {
		t.Fatalf("Sleepers = %d after wake", f.Sleepers())
	}
}

func TestFakeSleepCancel(t *testing.T) {
	t.Parallel()
	f := NewFake(t0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Sleep(ctx, time.Hour) }()
	if err := f.WaitForSleepers(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep = %v, want context.Canceled", err)
	}
	if f.Sleepers() != 0 {
		t.Fatalf("cancelled sleeper still registered")
	}
	if err := f.Sleep(ctx, time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on done ctx = %v", err)
	}
	if err := f.Sleep(context.Background(), 0); err != nil {
		t.Fatalf("Sleep(0) = %v", err)
	}
}

func TestRealSleep(t *testing.T) {
	t.Parallel()
	c := NewReal()
	for _, d := range []time.Duration{0, 200 * time.Microsecond, 3 * time.Millisecond} {
		start := c.Mono()
		if err := c.Sleep(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		if got := c.Mono() - start; got < d {
			t.Fatalf("Sleep(%v) returned after %v", d, got)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(ctx, time.Millisecond); !errors.Is(err, context.Canceled) {
		t.Fatalf("short Sleep on cancelled ctx = %v", err)
	}
	if err := c.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("long Sleep on cancelled ctx = %v", err)
	}
	if c.Mono() < 0 || c.Now().IsZero() {
		t.Fatal("Real clock reads nonsense")
	}
}
