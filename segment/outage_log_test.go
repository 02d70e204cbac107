package segment_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/segment"
)

// switchStore is a one-key store that leases 100 numbers at a time and
// fails every Allocate while down is set.
type switchStore struct {
	mu   sync.Mutex
	max  int64
	down bool
}

var errStoreDown = errors.New("switchstore: connection refused")

func (s *switchStore) setDown(d bool) { s.mu.Lock(); s.down = d; s.mu.Unlock() }

func (s *switchStore) Allocate(ctx context.Context, key string, step int64) (segment.Segment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return segment.Segment{}, errStoreDown
	}
	s.max += 100
	return segment.Segment{Start: s.max - 100, End: s.max, Step: 100}, nil
}
func (s *switchStore) Create(context.Context, segment.KeyInfo) error { return nil }
func (s *switchStore) Get(context.Context, string) (segment.KeyInfo, error) {
	return segment.KeyInfo{}, nil
}
func (s *switchStore) List(context.Context) ([]segment.KeyInfo, error) { return nil, nil }
func (s *switchStore) SetStep(context.Context, string, int64) error    { return nil }
func (s *switchStore) Delete(context.Context, string) error            { return nil }
func (s *switchStore) Raise(context.Context, string, int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max, nil
}
func (s *switchStore) Close() error { return nil }

type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) count(sub string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), sub)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestAbsorbedOutageLoggedOnceAndCounted: while the store is down and the
// current buffer still serves, the failed background loads are logged
// once (with the IDs left) and counted in Stats.StoreErrors; the recovery
// is logged once too; callers never see an error and no ID repeats.
func TestAbsorbedOutageLoggedOnceAndCounted(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := &switchStore{}
	var logs logBuffer
	a, err := segment.New(store, segment.Options{Clock: clk, Step: segment.StepPolicy{Fixed: true},
		RetryMin: 10 * time.Millisecond, RetryMax: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k, _ := a.Key("order")
	seen := map[int64]bool{}
	next := func() {
		t.Helper()
		id, err := k.Next(ctx)
		if err != nil {
			t.Fatalf("Next during an outage the buffer absorbs: %v", err)
		}
		if seen[id] {
			t.Fatalf("duplicate %d", id)
		}
		seen[id] = true
	}
	next() // first segment [0, 100)
	store.setDown(true)
	for i := 0; i < 20; i++ { // past the 10 % mark: the next segment loads in the background
		next()
	}
	const failures = 5
	for i := 1; i <= failures; i++ {
		if err := clk.WaitForSleepers(ctx, 1); err != nil {
			t.Fatalf("the loader did not back off after failure %d: %v", i, err)
		}
		if i < failures {
			clk.Advance(10 * time.Millisecond)
		}
		next()
	}
	st := k.Stats()
	if st.StoreErrors != failures || !st.StoreFailing {
		t.Fatalf("Stats: StoreErrors %d StoreFailing %v, want %d true", st.StoreErrors, st.StoreFailing, failures)
	}
	if n := logs.count("store failed; serving the current buffer while retrying"); n != 1 {
		t.Fatalf("%d outage lines for %d failed loads, want 1:\n%s", n, failures, &logs)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "key=order") ||
		!strings.Contains(logs.String(), "ids_left=") || !strings.Contains(logs.String(), "connection refused") {
		t.Fatalf("outage line lacks level, key, IDs left or cause:\n%s", &logs)
	}

	store.setDown(false)
	clk.Advance(10 * time.Millisecond)
	poll(t, "the key to stop reporting a failing store once it answered", func() bool { return !k.Stats().StoreFailing })
	if n := logs.count("store answers again"); n != 1 {
		t.Fatalf("%d recovery lines, want 1:\n%s", n, &logs)
	}
	if !strings.Contains(logs.String(), "failed_loads=5") {
		t.Fatalf("recovery line lacks the failed loads:\n%s", &logs)
	}
	for i := 0; i < 150; i++ { // through the rest of the first segment and into the second
		next()
	}
}
