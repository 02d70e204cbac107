package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
)

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// fakeBackend is a coordinator the test controls.
type fakeBackend struct {
	mu       sync.Mutex
	kaErr    error
	kaCalls  int
	stores   []time.Time
	storeErr error
	released bool
	releases int
	// kaHook, when set, runs inside keepalive (unlocked), before it
	// answers: a keepalive that takes time.
	kaHook func(ctx context.Context)
	// storeBlock, when set, makes store wait for ctx.
	storeBlock bool
	// storeHook, when set, runs inside store (unlocked), before it
	// answers: a write that takes time.
	storeHook func(ctx context.Context)
}

func (b *fakeBackend) keepalive(ctx context.Context) error {
	b.mu.Lock()
	hook := b.kaHook
	b.mu.Unlock()
	if hook != nil {
		hook(ctx)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.kaCalls++
	return b.kaErr
}

func (b *fakeBackend) store(ctx context.Context, until time.Time) (time.Time, error) {
	b.mu.Lock()
	block, hook := b.storeBlock, b.storeHook
	b.mu.Unlock()
	if hook != nil {
		hook(ctx)
	}
	if block {
		<-ctx.Done()
		return time.Time{}, ctx.Err()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.storeErr != nil {
		return time.Time{}, b.storeErr
	}
	b.stores = append(b.stores, until)
	return until, nil
}

func (b *fakeBackend) lower(ctx context.Context, last time.Time) (time.Time, error) {
	return b.store(ctx, last)
}

func (b *fakeBackend) release(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.released = true
	b.releases++
	return nil
}

func (b *fakeBackend) set(f func(b *fakeBackend)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f(b)
}

func fakeLease(t *testing.T, opts ...Option) (*Lease, *fakeBackend, *clock.Fake) {
	t.Helper()
	return fakeLeaseOn(t, &fakeBackend{}, opts...)
}

func fakeLeaseOn(t *testing.T, b backend, opts ...Option) (*Lease, *fakeBackend, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(t0)
	opts = append([]Option{WithClock(clk), WithTTL(3 * time.Second), WithMargin(600 * time.Millisecond), WithLogger(slog.New(slog.DiscardHandler))}, opts...)
	s, err := newSettings(opts)
	if err != nil {
		t.Fatal(err)
	}
	l := newLease(s, 7, 42, t0.Add(-time.Second), b, clk.Mono(), true)
	t.Cleanup(func() { l.Close() })
	fb, _ := b.(*fakeBackend)
	if c, ok := b.(*confirmingBackend); ok {
		fb = c.fakeBackend
	}
	return l, fb, clk
}

// tick advances the fake clock by one keepalive period and waits until the
// keepalive loop has run and gone back to sleep.
func tick(t *testing.T, l *Lease, clk *clock.Fake) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clk.WaitForSleepers(ctx, 1); err != nil {
		t.Fatal("keepalive loop is not sleeping:", err)
	}
	clk.Advance(l.every)
	// Wait until the loop sleeps again, or has ended because the lease is
	// lost.
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	go func() {
		select {
		case <-l.Done():
			wcancel()
		case <-wctx.Done():
		}
	}()
	if err := clk.WaitForSleepers(wctx, 1); err != nil && ctx.Err() != nil {
		t.Fatal("keepalive loop did not go back to sleep:", err)
	}
}

func TestLeaseFenceFollowsConfirmedKeepalives(t *testing.T) {
	t.Parallel()
	l, b, clk := fakeLease(t)
	if l.ID() != 7 || l.Generation() != 42 {
		t.Fatalf("ID, Generation = %d, %d", l.ID(), l.Generation())
	}
	if got, want := l.ValidUntil(), 2400*time.Millisecond; got != want {
		t.Fatalf("ValidUntil at acquisition = %v, want TTL-margin = %v", got, want)
	}
	tick(t, l, clk) // keepalive sent at Mono 1s
	if got, want := l.ValidUntil(), 3400*time.Millisecond; got != want {
		t.Fatalf("ValidUntil after keepalive = %v, want %v", got, want)
	}

	// The coordinator becomes unreachable: the fence stops moving, and the
	// lease is not Done.
	b.set(func(b *fakeBackend) { b.kaErr = errors.New("connection refused") })
	tick(t, l, clk) // 2s
	tick(t, l, clk) // 3s
	if !l.Valid() {
		t.Fatal("lease invalid before its deadline")
	}
	tick(t, l, clk) // 4s > 3.4s
	if l.Valid() || l.ValidUntil() != 3400*time.Millisecond {
		t.Fatalf("Valid = %v, ValidUntil = %v at Mono %v: want invalid, unchanged", l.Valid(), l.ValidUntil(), clk.Mono())
	}
	select {
	case <-l.Done():
		t.Fatal("Done closed on a mere outage")
	default:
	}

	// Wall-clock jumps do not move the fence.
	clk.Step(time.Hour)
	clk.Step(-2 * time.Hour)
	if l.Valid() {
		t.Fatal("a wall-clock jump revived the lease")
	}

	// The coordinator answers again: the lease recovers.
	b.set(func(b *fakeBackend) { b.kaErr = nil })
	tick(t, l, clk) // keepalive sent at 5s
	if got, want := l.ValidUntil(), 7400*time.Millisecond; got != want || !l.Valid() {
		t.Fatalf("after recovery ValidUntil = %v (valid %v), want %v", got, l.Valid(), want)
	}
}

func TestLeaseLostClosesDoneAndFencesWrites(t *testing.T) {
	t.Parallel()
	l, b, clk := fakeLease(t)
	if _, err := l.Extend(context.Background(), t0.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	b.set(func(b *fakeBackend) { b.kaErr = fmt.Errorf("%w: taken over", ErrLeaseLost) })
	tick(t, l, clk)
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed after the coordinator reported the lease lost")
	}
	if !errors.Is(l.Err(), ErrLeaseLost) || l.ValidUntil() != 0 || l.Valid() {
		t.Fatalf("Err = %v, ValidUntil = %v", l.Err(), l.ValidUntil())
	}
	h, err := l.Extend(context.Background(), t0.Add(time.Hour))
	if !errors.Is(err, ErrLeaseLost) || !h.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("Extend after loss = %v, %v; want the old horizon and ErrLeaseLost", h, err)
	}
	if len(b.stores) != 1 {
		t.Fatalf("a lost lease wrote its horizon: %v", b.stores)
	}
}

func TestLeaseExtendOnlyGrows(t *testing.T) {
	t.Parallel()
	l, b, _ := fakeLease(t)
	ctx := context.Background()
	if h, _ := l.Load(ctx); !h.Equal(t0.Add(-time.Second)) {
		t.Fatalf("Load = %v, want the previous holder's horizon", h)
	}
	for i, c := range []struct {
		until, want time.Time
		writes      int
	}{
		{t0.Add(2 * time.Second), t0.Add(2 * time.Second), 1},
		{t0.Add(time.Second), t0.Add(2 * time.Second), 1}, // lower: no write
		{t0.Add(2 * time.Second), t0.Add(2 * time.Second), 1},
		{t0.Add(5 * time.Second), t0.Add(5 * time.Second), 2},
	} {
		got, err := l.Extend(ctx, c.until)
		if err != nil || !got.Equal(c.want) || len(b.stores) != c.writes {
			t.Fatalf("step %d: Extend(%v) = %v, %v with %d writes; want %v, %d writes", i, c.until, got, err, len(b.stores), c.want, c.writes)
		}
	}
	// A failed write leaves the horizon as it was.
	b.set(func(b *fakeBackend) { b.storeErr = errors.New("timeout") })
	if got, err := l.Extend(ctx, t0.Add(time.Hour)); err == nil || !got.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("failed Extend = %v, %v", got, err)
	}
	if h, _ := l.Load(ctx); !h.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("Load after a failed Extend = %v", h)
	}
}

func TestLeaseClose(t *testing.T) {
	t.Parallel()
	l, b, _ := fakeLease(t)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if !b.released || !errors.Is(l.Err(), ErrClosed) || l.Valid() {
		t.Fatalf("after Close: released %v, Err %v, Valid %v", b.released, l.Err(), l.Valid())
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if _, err := l.Extend(context.Background(), t0.Add(time.Hour)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Extend after Close = %v", err)
	}
}

func TestOptionsValidated(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		opts []Option
		want string
	}{
		{"short ttl", []Option{WithTTL(time.Millisecond)}, "ttl 1ms"},
		{"margin over ttl", []Option{WithTTL(2 * time.Second), WithMargin(3 * time.Second)}, "margin 3s"},
		{"negative margin", []Option{WithMargin(-time.Second)}, "margin -1s"},
		{"zero timeout", []Option{WithTimeout(-1)}, "timeout -1ns"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewStatic(1, c.opts...)
			if !errors.Is(err, ErrBadOption) || !contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrBadOption naming %q", err, c.want)
			}
		})
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
