package snowflake

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
)

func TestFileHorizon(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "worker-1.horizon")
	h := NewFileHorizon(path)
	if got, err := h.Load(ctx); err != nil || !got.IsZero() {
		t.Fatalf("Load of a missing file = %v, %v", got, err)
	}
	got, err := h.Extend(ctx, t0)
	if err != nil || !got.Equal(t0) {
		t.Fatalf("Extend = %v, %v", got, err)
	}
	// Never decreases, and a covered Extend does not write.
	if got, err := h.Extend(ctx, t0.Add(-time.Hour)); err != nil || !got.Equal(t0) {
		t.Fatalf("Extend backwards = %v, %v", got, err)
	}
	later := t0.Add(1234567891 * time.Nanosecond)
	if _, err := h.Extend(ctx, later); err != nil {
		t.Fatal(err)
	}
	// A fresh FileHorizon (a restarted process) reads what was persisted.
	if got, err := NewFileHorizon(path).Load(ctx); err != nil || !got.Equal(later) {
		t.Fatalf("Load after restart = %v, %v; want %v", got, err, later)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
	// A corrupt file is an error, never "no horizon".
	for _, bad := range []string{"", "hello\n", fileHorizonMagic + "2026-01-02T03:04:05Z", fileHorizonMagic + "yesterday\n"} {
		if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := NewFileHorizon(path).Load(ctx); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("Load of %q = %v, want an error naming the file", bad, err)
		}
		if _, err := NewFileHorizon(path).Extend(ctx, later.Add(time.Hour)); err == nil {
			t.Errorf("Extend over a corrupt %q succeeded", bad)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := NewFileHorizon(path).Load(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("Load with a cancelled ctx = %v", err)
	}
	if _, err := NewFileHorizon(filepath.Join(path, "no", "dir")).Extend(ctx, t0); err == nil {
		t.Error("Extend into a missing directory succeeded")
	}
}

// TestHorizonRestart is design.md U6: a generator persists its horizon; a
// restarted one whose clock is an hour behind issues nothing at or below it.
func TestHorizonRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := twitter(t)
	path := filepath.Join(t.TempDir(), "horizon")
	g1, f1 := newGen(t, l, Settings{Horizon: NewFileHorizon(path)})
	var issued []int64
	for range 1000 {
		issued = append(issued, mustNext(t, g1))
		f1.Advance(time.Millisecond)
	}
	// g1 "crashes": it is never closed, so the lead-ahead horizon it
	// recorded stays on disk, as after kill -9.
	h, err := NewFileHorizon(path).Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lastStamp := mustDecode(t, l, issued[len(issued)-1]).Time
	if !h.After(lastStamp.Add(2 * time.Second)) {
		t.Fatalf("persisted horizon %v not a lead ahead of the last stamp %v", h, lastStamp)
	}

	// Restart with the clock an hour behind: the default policy refuses,
	// saying how far behind the horizon the clock is.
	back := clock.NewFake(t0.Add(-time.Hour))
	g2, _ := newGen(t, l, Settings{Clock: back, Horizon: NewFileHorizon(path)})
	_, err = g2.Next(ctx)
	var cb *ClockBehindError
	if !errors.As(err, &cb) || cb.Behind < time.Hour+2*time.Second {
		t.Fatalf("restart an hour behind = %v, want *ClockBehindError of over 1h2s", err)
	}
	g2.Close()

	// With a logical clock allowed to run two hours ahead, it issues, but
	// only strictly after the horizon.
	g3, _ := newGen(t, l, Settings{Clock: back, Horizon: NewFileHorizon(path), Rollback: RollbackLogical, LogicalLimit: 2 * time.Hour})
	h, _ = NewFileHorizon(path).Load(ctx) // g2 may have extended it
	dst := make([]int64, 10000)
	if n, err := g3.NextN(ctx, dst); n != len(dst) || err != nil {
		t.Fatalf("NextN after restart = %d, %v", n, err)
	}
	maxOld := slices.Max(issued)
	for _, id := range dst {
		if id <= maxOld {
			t.Fatalf("restarted generator issued %d, not above the previous run's %d", id, maxOld)
		}
		if p := mustDecode(t, l, id); !p.Time.After(h) {
			t.Fatalf("restarted generator stamped %v, not after the horizon %v", p.Time, h)
		}
	}
	g3.Close()
	if h2, _ := NewFileHorizon(path).Load(ctx); h2.Before(mustDecode(t, l, dst[len(dst)-1]).Time) {
		t.Fatalf("horizon %v below the last stamp", h2)
	}
}

// TestHorizonCrashRestartWaits: after a crash the recorded horizon is up to
// a lead ahead of the clock. A restarted generator waits that out (it is the
// expected cost of a crash, not a rollback) and then issues strictly after it.
func TestHorizonCrashRestartWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := twitter(t)
	path := filepath.Join(t.TempDir(), "horizon")
	g1, f1 := newGen(t, l, Settings{Horizon: NewFileHorizon(path)})
	last := mustNext(t, g1) // then "kill -9": no Close
	h, _ := NewFileHorizon(path).Load(ctx)
	if !h.After(f1.Now().Add(2 * time.Second)) {
		t.Fatalf("horizon %v is not ahead of the clock %v", h, f1.Now())
	}
	// A restarted process whose clock is 500 ms behind is told how far
	// behind it is (the wait exceeds the lead it may wait out)...
	f2 := clock.NewFake(f1.Now().Add(-500 * time.Millisecond))
	g2, _ := newGen(t, l, Settings{Clock: f2, Horizon: NewFileHorizon(path)})
	var cb *ClockBehindError
	if _, err := g2.Next(ctx); !errors.As(err, &cb) || cb.Behind < 3500*time.Millisecond {
		t.Fatalf("restart 500 ms behind = %v, want *ClockBehindError of at least 3.5 s", err)
	}
	// ...and once its clock has caught up with the crashed holder's, it
	// waits out the rest of the lead instead of failing.
	f2.Advance(600 * time.Millisecond)
	got := make(chan int64, 1)
	errc := make(chan error, 1)
	go func() {
		id, err := g2.Next(ctx)
		errc <- err
		got <- id
	}()
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	slept := make(chan error, 1)
	go func() { slept <- f2.WaitForSleepers(waitCtx, 1) }()
	select {
	case err := <-errc:
		t.Fatalf("Next after a crash restart returned at once: %v; want a wait", err)
	case <-slept:
	}
	f2.Advance(h.Sub(f2.Now()) + time.Millisecond)
	if err := <-errc; err != nil {
		t.Fatalf("Next after a crash restart = %v, want a wait then an ID", err)
	}
	id := <-got
	if id <= last || !mustDecode(t, l, id).Time.After(h) {
		t.Fatalf("restart issued %d (%v), want above %d and after the horizon %v", id, mustDecode(t, l, id).Time, last, h)
	}
}

// TestHorizonGracefulRestart: Close records the last issued ID's time, so a
// restart on the same clock issues at once, strictly above everything before.
func TestHorizonGracefulRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := twitter(t)
	path := filepath.Join(t.TempDir(), "horizon")
	g1, f := newGen(t, l, Settings{Horizon: NewFileHorizon(path)})
	var last int64
	for range 100 {
		last = mustNext(t, g1)
	}
	if err := g1.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := g1.Next(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close = %v", err)
	}
	h, _ := NewFileHorizon(path).Load(ctx)
	if want := mustDecode(t, l, last).Time; !h.Equal(want) {
		t.Fatalf("released horizon %v, want the last stamp %v", h, want)
	}
	g2, _ := newGen(t, l, Settings{Clock: f, Horizon: NewFileHorizon(path)})
	f.Advance(time.Millisecond)
	id, err := g2.Next(ctx)
	if err != nil || id <= last {
		t.Fatalf("graceful restart: Next = %d, %v; want > %d at once", id, err, last)
	}
}

// memHorizon is an in-memory Horizon that records calls and can block or
// fail Extend.
type memHorizon struct {
	mu      sync.Mutex
	cur     time.Time
	extends int
	gate    chan struct{} // when non-nil, Extend waits for it to close
	entered chan struct{} // receives once per Extend call, if non-nil
	err     error
}

func (m *memHorizon) Load(ctx context.Context) (time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur, nil
}

func (m *memHorizon) Extend(ctx context.Context, until time.Time) (time.Time, error) {
	m.mu.Lock()
	gate, entered := m.gate, m.entered
	m.mu.Unlock()
	if entered != nil {
		entered <- struct{}{}
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.extends++
	if m.err != nil {
		return time.Time{}, m.err
	}
	if until.After(m.cur) {
		m.cur = until
	}
	return m.cur, nil
}

func (m *memHorizon) recorded() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur
}

// TestHorizonBoundsStamps checks U3: every ID is stamped at or before the
// horizon recorded when it is returned, as the clock runs across many leads.
func TestHorizonBoundsStamps(t *testing.T) {
	t.Parallel()
	l := twitter(t)
	m := &memHorizon{}
	g, f := newGen(t, l, Settings{Horizon: m, HorizonLead: time.Second})
	for range 200 {
		id := mustNext(t, g)
		if p := mustDecode(t, l, id); p.Time.After(m.recorded()) {
			t.Fatalf("ID stamped %v past the recorded horizon %v", p.Time, m.recorded())
		}
		f.Advance(50 * time.Millisecond)
	}
	if m.extends < 5 {
		t.Fatalf("only %d extensions over 10 s with a 1 s lead", m.extends)
	}
	if got := g.Horizon(); got.After(m.recorded()) || got.Before(f.Now()) {
		t.Fatalf("Horizon() = %v, recorded %v, now %v", got, m.recorded(), f.Now())
	}
}

// TestHorizonExtensionInFlight checks that while an extension is in flight
// nobody issues past the old horizon, and that callers below it are not
// held up by it.
func TestHorizonExtensionInFlight(t *testing.T) {
	t.Parallel()
	l := twitter(t)
	m := &memHorizon{}
	g, f := newGen(t, l, Settings{Horizon: m, HorizonLead: time.Second})
	mustNext(t, g) // loads and records t0 + ~1 s
	old := m.recorded()

	m.mu.Lock()
	m.gate, m.entered = make(chan struct{}), make(chan struct{}, 16)
	m.mu.Unlock()
	// Past half the lead: the next call starts a background extension but
	// does not wait for it.
	f.Advance(600 * time.Millisecond)
	mustNext(t, g)
	<-m.entered
	mustNext(t, g)

	// Past the old horizon: callers must wait for the extension.
	f.Advance(time.Second)
	var wg sync.WaitGroup
	var released atomic.Bool
	results := make(chan int64, 4)
	for range 4 {
		wg.Go(func() {
			id, err := g.Next(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			if !released.Load() {
				t.Errorf("ID %d issued while the extension past %v was in flight", id, old)
			}
			results <- id
		})
	}
	released.Store(true)
	close(m.gate)
	wg.Wait()
	close(results)
	for id := range results {
		if p := mustDecode(t, l, id); p.Time.After(m.recorded()) {
			t.Fatalf("ID stamped %v past the horizon %v", p.Time, m.recorded())
		}
	}
}

func TestHorizonErrors(t *testing.T) {
	t.Parallel()
	l := twitter(t)
	boom := errors.New("lease lost")
	m := &memHorizon{err: boom}
	g, _ := newGen(t, l, Settings{Horizon: m})
	_, err := g.Next(context.Background())
	if !errors.Is(err, ErrHorizon) || !errors.Is(err, boom) {
		t.Fatalf("Next with a failing Extend = %v", err)
	}
	m.mu.Lock()
	m.err = nil
	m.mu.Unlock()
	mustNext(t, g)

	// A failing background extension neither stops IDs below the recorded
	// horizon nor is retried on every call.
	m4 := &memHorizon{}
	g4, f4 := newGen(t, l, Settings{Horizon: m4, HorizonLead: time.Second})
	mustNext(t, g4)
	m4.mu.Lock()
	m4.err, m4.extends = boom, 0
	m4.mu.Unlock()
	f4.Advance(700 * time.Millisecond) // past half the lead, below the horizon
	for range 100 {
		mustNext(t, g4)
	}
	g4.Close() // waits for the background extension
	if m4.extends != 1 {
		t.Fatalf("%d background Extend calls after a failure, want 1", m4.extends)
	}

	// A caller's ctx ends its wait for an extension, not the extension.
	m2 := &memHorizon{gate: make(chan struct{})}
	g2, _ := newGen(t, l, Settings{Horizon: m2})
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if _, err := g2.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next with a stuck Extend = %v", err)
	}
	close(m2.gate)
	mustNext(t, g2)

	// A horizon past the layout's end is refused.
	m3 := &memHorizon{cur: l.End().Add(time.Hour)}
	g3, _ := newGen(t, l, Settings{Horizon: m3})
	if _, err := g3.Next(context.Background()); !errors.Is(err, ErrLayoutExpired) {
		t.Fatalf("Next with a horizon past End = %v", err)
	}
}

// TestHorizonRestartSameMillisecond: Close lowers the horizon to the
// millisecond of the last issued ID; a new generator started within that
// same millisecond (the clock has not moved) must not issue from that
// millisecond again — its sequence would restart at 0 and repeat IDs. It
// waits for the next millisecond and issues above every earlier ID.
func TestHorizonRestartSameMillisecond(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := twitter(t)
	path := filepath.Join(t.TempDir(), "horizon")
	g1, f := newGen(t, l, Settings{Horizon: NewFileHorizon(path)})
	var ids []int64
	for range 100 { // all in one millisecond: the fake clock stands still
		ids = append(ids, mustNext(t, g1))
	}
	last := ids[len(ids)-1]
	if err := g1.Close(); err != nil {
		t.Fatal(err)
	}
	lastAt := mustDecode(t, l, last).Time
	if h, _ := NewFileHorizon(path).Load(ctx); !h.Equal(lastAt) || !f.Now().Truncate(time.Millisecond).Equal(lastAt) {
		t.Fatalf("horizon %v, clock %v; want both at the last ID's millisecond %v", h, f.Now(), lastAt)
	}

	g2, _ := newGen(t, l, Settings{Clock: f, Horizon: NewFileHorizon(path)})
	defer g2.Close()
	got, errc := nextAsync(g2)
	slept := make(chan error, 1)
	go func() { slept <- f.WaitForSleepers(ctx, 1) }()
	select {
	case id := <-got:
		if id <= last {
			t.Fatalf("restart in the same millisecond issued %d, not above the last ID %d: IDs repeat", id, last)
		}
		t.Fatalf("restart in the same millisecond issued %d at once; want a wait for the next millisecond", id)
	case err := <-errc:
		t.Fatalf("restart in the same millisecond = %v; want a wait for the next millisecond", err)
	case err := <-slept:
		if err != nil {
			t.Fatalf("restarted generator neither issued nor waited: %v", err)
		}
	}
	f.Advance(time.Millisecond)
	var id int64
	select {
	case id = <-got:
	case err := <-errc:
		t.Fatal(err)
	case <-ctx.Done():
		t.Fatal("restarted generator still waiting a minute after the clock moved")
	}
	if id <= last || !mustDecode(t, l, id).Time.After(lastAt) {
		t.Fatalf("restart issued %d at %v, want above %d and after %v", id, mustDecode(t, l, id).Time, last, lastAt)
	}
	if slices.Contains(ids, id) {
		t.Fatalf("restart repeated %d", id)
	}
}
