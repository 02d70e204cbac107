package segmenttest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/testkit/testserver"
)

// Outage is the store-outage scenario every real store passes: with a
// fixed step of 100, an allocator serves 50 IDs and has its next segment
// ready; then stop takes the store down. The 150 buffered IDs must still be
// served; past them Next must fail with ErrUnavailable well within the
// caller's 5 s deadline; after restart brings the store back, the same
// allocator must recover by itself. Every ID is checked against every
// other; the returned set lets a caller go on (say, to a crash test) and
// keep checking. store must be empty of key "o" and is not closed.
func Outage(t *testing.T, store segment.Store, stop, restart func()) map[int64]bool {
	t.Helper()
	ctx := context.Background()
	if err := store.Create(ctx, segment.KeyInfo{Key: "o", Step: 100}); err != nil {
		t.Fatal(err)
	}
	a, err := segment.New(store, segment.Options{
		Step:        segment.StepPolicy{Fixed: true},
		LoadTimeout: 2 * time.Second,
		RetryMin:    20 * time.Millisecond,
		RetryMax:    200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	seen := map[int64]bool{}
	take := func() error {
		id, err := a.Next(ctx, "o")
		if err == nil {
			if seen[id] {
				t.Fatalf("ID %d repeated", id)
			}
			seen[id] = true
		}
		return err
	}
	for range 50 {
		if err := take(); err != nil {
			t.Fatal(err)
		}
	}
	testserver.Eventually(t, "the next segment to load", 30*time.Second, func() bool { return a.Stats()[0].NextReady })
	stop()
	// 50 left in the current segment, 100 in the next: all still served.
	for i := range 150 {
		if err := take(); err != nil {
			t.Fatalf("buffered ID %d failed during the outage: %v", i, err)
		}
	}
	// Past the buffers: a clear, prompt error, within the caller's deadline.
	var failed error
	for range 20 {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		t0 := time.Now()
		_, err := a.Next(dctx, "o")
		cancel()
		if err == nil {
			t.Fatal("Next succeeded with the store down and the buffers used up")
		}
		if d := time.Since(t0); d > 5*time.Second+500*time.Millisecond {
			t.Fatalf("Next took %v, past the caller's 5 s deadline", d)
		}
		if errors.Is(err, segment.ErrUnavailable) {
			failed = err
			break
		}
	}
	if failed == nil {
		t.Fatal("no ErrUnavailable while the store was down")
	}
	t.Logf("error during the outage: %v", failed)
	restart()
	testserver.Eventually(t, "allocation to recover", 30*time.Second, func() bool { return take() == nil })
	for range 300 {
		if err := take(); err != nil {
			t.Fatalf("after recovery: %v", err)
		}
	}
	if st := a.Stats()[0]; st.LoadErrors == 0 || st.Loads < 4 {
		t.Fatalf("stats after the outage = %+v", st)
	}
	return seen
}
