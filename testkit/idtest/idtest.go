// Package idtest holds the test scaffolding the ID-format packages share:
// collecting IDs from many goroutines and checking them for duplicates and
// per-goroutine order, and driving a fake clock through a generator's wait.
//
// It is imported only by _test.go files.
package idtest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
)

// Unique runs goroutines goroutines that each call next(w, i) perG times
// (w is the goroutine, i the call within it) and returns every ID, one
// slice per goroutine. It fails t if next returns an error, if any ID
// appears twice among all of them, or if fewer than goroutines*perG IDs came
// back. When cmp is not nil it also fails unless each goroutine's IDs
// strictly increase under cmp (cmp(a, b) < 0 when a sorts before b).
//
// It fails t, saying how far each goroutine got, if they have not all
// finished within Timeout: a generator that blocks fails fast instead of
// holding the test until go test's own timeout.
//
// next may advance a fake clock; it must not call t.Fatal.
func Unique[K comparable](t testing.TB, goroutines, perG int, next func(w, i int) (K, error), cmp func(a, b K) int) [][]K {
	t.Helper()
	out := make([][]K, goroutines)
	errs := make(chan error, goroutines)
	progress := make([]atomic.Int64, goroutines)
	var wg sync.WaitGroup
	for w := range goroutines {
		wg.Go(func() {
			ids := make([]K, 0, perG)
			for i := range perG {
				id, err := next(w, i)
				if err != nil {
					errs <- err
					return
				}
				ids = append(ids, id)
				progress[w].Add(1)
			}
			out[w] = ids
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(Timeout):
		got := make([]int64, goroutines)
		for w := range progress {
			got[w] = progress[w].Load()
		}
		t.Fatalf("idtest.Unique: after %v the goroutines had taken %v of %d IDs each; a call blocks", Timeout, got, perG)
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := make(map[K]struct{}, goroutines*perG)
	for w, ids := range out {
		for i, id := range ids {
			if _, dup := seen[id]; dup {
				t.Fatalf("duplicate %v (goroutine %d, ID %d)", id, w, i)
			}
			seen[id] = struct{}{}
			if cmp != nil && i > 0 && cmp(ids[i-1], id) >= 0 {
				t.Fatalf("goroutine %d: ID %d %v not after %v", w, i, id, ids[i-1])
			}
		}
	}
	if len(seen) != goroutines*perG {
		t.Fatalf("got %d IDs, want %d", len(seen), goroutines*perG)
	}
	return out
}

// Timeout bounds every wait in this package: Unique's goroutines, and
// each of AfterWait's two waits.
var Timeout = time.Minute

// AfterWait calls next in a goroutine, waits until it sleeps on clk (the
// generator ran out of its time unit), advances clk by d and returns what
// next returned. It fails t if next fails, if it never sleeps, or if it
// does not return after the advance (each within Timeout).
func AfterWait[K any](t testing.TB, clk *clock.Fake, d time.Duration, next func() (K, error)) K {
	t.Helper()
	type result struct {
		id  K
		err error
	}
	done := make(chan result, 1)
	go func() {
		id, err := next()
		done <- result{id, err}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), Timeout)
	defer cancel()
	asleep := make(chan error, 1)
	go func() { asleep <- clk.WaitForSleepers(ctx, 1) }()
	select {
	case r := <-done:
		t.Fatalf("idtest.AfterWait: next returned (%v, %v) without waiting for the clock", r.id, r.err)
	case err := <-asleep:
		if err != nil {
			t.Fatalf("idtest.AfterWait: next did not sleep on the clock within %v: %v", Timeout, err)
		}
	}
	clk.Advance(d)
	var r result
	select {
	case r = <-done:
	case <-time.After(Timeout):
		t.Fatalf("idtest.AfterWait: next did not return within %v after the clock moved %v", Timeout, d)
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.id
}

// Context returns a context for a test's calls to a generator: t's own,
// with a deadline Timeout from now. A Next that waits on a fake clock
// nobody advances then fails with context.DeadlineExceeded instead of
// holding the test until go test's own timeout.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), Timeout)
	t.Cleanup(cancel)
	return ctx
}
