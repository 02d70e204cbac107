package idtest

import (
	"cmp"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
)

func TestUniqueCollectsEveryID(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	ids := Unique(t, 4, 100, func(int, int) (int64, error) { return n.Add(1), nil }, cmp.Compare[int64])
	total := 0
	for _, l := range ids {
		total += len(l)
	}
	if len(ids) != 4 || total != 400 {
		t.Fatalf("got %d goroutines, %d IDs", len(ids), total)
	}
}

// fakeTB records failures instead of stopping the test, so the failure
// paths of Unique can be checked.
type fakeTB struct {
	testing.TB
	failed bool
}

func (f *fakeTB) Fatalf(string, ...any) { f.failed = true; panic(f) }
func (f *fakeTB) Fatal(...any)          { f.failed = true; panic(f) }
func (f *fakeTB) Helper()               {}

func fails(t *testing.T, run func(tb testing.TB)) bool {
	t.Helper()
	f := &fakeTB{TB: t}
	func() {
		defer func() {
			if r := recover(); r != nil && r != f {
				panic(r)
			}
		}()
		run(f)
	}()
	return f.failed
}

func TestUniqueFailures(t *testing.T) {
	t.Parallel()
	if !fails(t, func(tb testing.TB) {
		Unique(tb, 2, 3, func(_, i int) (int, error) { return i, nil }, nil)
	}) {
		t.Error("duplicates across goroutines passed")
	}
	if !fails(t, func(tb testing.TB) {
		Unique(tb, 1, 3, func(_, i int) (int, error) { return -i, nil }, cmp.Compare[int])
	}) {
		t.Error("decreasing IDs passed with cmp")
	}
	if fails(t, func(tb testing.TB) {
		Unique(tb, 1, 3, func(_, i int) (int, error) { return -i, nil }, nil)
	}) {
		t.Error("decreasing IDs failed without cmp")
	}
	if !fails(t, func(tb testing.TB) {
		Unique(tb, 1, 3, func(_, i int) (int, error) { return 0, context.Canceled }, nil)
	}) {
		t.Error("error from next passed")
	}
}

func TestAfterWait(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	got := AfterWait(t, clk, time.Second, func() (time.Time, error) {
		err := clk.Sleep(t.Context(), time.Second)
		return clk.Now(), err
	})
	if !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("woke at %v", got)
	}
}

// TestWaitsAreBounded: a generator that blocks fails Unique and AfterWait
// within Timeout instead of hanging the test. Not parallel: it shortens
// the package's Timeout.
func TestWaitsAreBounded(t *testing.T) {
	old := Timeout
	Timeout = 200 * time.Millisecond
	defer func() { Timeout = old }()
	release := make(chan struct{})
	defer close(release)
	block := func() (int, error) { <-release; return 0, nil }

	began := time.Now()
	if !fails(t, func(tb testing.TB) {
		Unique(tb, 2, 3, func(w, i int) (int, error) {
			if w == 1 && i == 1 {
				return block()
			}
			return w*10 + i, nil
		}, nil)
	}) {
		t.Error("Unique passed with a goroutine blocked")
	}
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	if !fails(t, func(tb testing.TB) { AfterWait(tb, clk, time.Second, block) }) {
		t.Error("AfterWait passed with next blocked off the clock")
	}
	if !fails(t, func(tb testing.TB) {
		AfterWait(tb, clk, time.Second, func() (int, error) {
			if err := clk.Sleep(context.Background(), time.Second); err != nil {
				return 0, err
			}
			return block()
		})
	}) {
		t.Error("AfterWait passed with next blocked after the clock moved")
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("three bounded waits took %v", took)
	}
}
