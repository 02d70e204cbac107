package stamp

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

var errFull = errors.New("full")

func TestWaitSleepsToTheNextMillisecond(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0.Add(300 * time.Microsecond))
	m := &Millis{Clk: clk, MaxWait: time.Second, Last: t0.UnixMilli()}
	done := make(chan error, 1)
	m.Mu.Lock()
	go func() {
		done <- m.Wait(t.Context(), clk.Now(), func(int64, time.Duration) error { return errFull })
	}()
	if err := clk.WaitForSleepers(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	if !m.Mu.TryLock() {
		t.Fatal("Wait sleeps holding the lock")
	}
	m.Mu.Unlock()
	clk.Advance(700 * time.Microsecond)
	if err := <-done; err != nil {
		t.Fatalf("Wait = %v", err)
	}
}

func TestWaitBeyondMaxWaitAndCancel(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0.Add(-time.Second)) // stepped back: the next ms is 1 s away
	m := &Millis{Clk: clk, MaxWait: 10 * time.Millisecond, Last: t0.UnixMilli()}
	m.Mu.Lock()
	var gotHeld int64
	var gotWait time.Duration
	err := m.Wait(t.Context(), clk.Now(), func(held int64, wait time.Duration) error {
		gotHeld, gotWait = held, wait
		return errFull
	})
	if !errors.Is(err, errFull) || gotHeld != t0.UnixMilli() || gotWait != time.Second+time.Millisecond {
		t.Fatalf("Wait = %v, held %d, wait %v", err, gotHeld, gotWait)
	}
	if a := m.Ahead(); a != time.Second {
		t.Fatalf("Ahead = %v, want 1s", a)
	}
	m.MaxWait = 2 * time.Second
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	m.Mu.Lock()
	if err := m.Wait(ctx, clk.Now(), nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a cancelled ctx = %v", err)
	}
}

func TestAheadBeforeFirstStamp(t *testing.T) {
	t.Parallel()
	m := &Millis{Clk: clock.NewFake(t0), Last: -1}
	if a := m.Ahead(); a != 0 {
		t.Fatalf("Ahead = %v", a)
	}
}
