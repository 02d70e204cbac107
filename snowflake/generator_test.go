package snowflake

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func twitter(t testing.TB) Layout {
	t.Helper()
	l, ok := Lookup("twitter")
	if !ok {
		t.Fatal("no twitter layout")
	}
	return l
}

// newGen returns a generator for l; node fields default to 1 and the clock
// to a Fake at t0.
func newGen(t testing.TB, l Layout, s Settings) (*Generator, *clock.Fake) {
	t.Helper()
	var f *clock.Fake
	if s.Clock == nil {
		f = clock.NewFake(t0)
		s.Clock = f
	}
	if s.Node == nil {
		s.Node = map[string]int64{}
		for _, fl := range l.NodeFields() {
			s.Node[fl.Name] = 1
		}
	}
	g, err := New(l, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g, f
}

func mustNext(t testing.TB, g *Generator) int64 {
	t.Helper()
	id, err := g.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func mustDecode(t testing.TB, l Layout, id int64) Parts {
	t.Helper()
	p, err := Decode(l, id)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// nextAsync runs Next in a goroutine and returns channels for its result.
func nextAsync(g *Generator) (<-chan int64, <-chan error) {
	ids, errs := make(chan int64, 1), make(chan error, 1)
	go func() {
		id, err := g.Next(context.Background())
		if err != nil {
			errs <- err
			return
		}
		ids <- id
	}()
	return ids, errs
}

func waitSleepers(t *testing.T, f *clock.Fake, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.WaitForSleepers(ctx, n); err != nil {
		t.Fatalf("no goroutine reached Sleep: %v", err)
	}
}

// TestUniqueConcurrent is design.md U1/U2 under concurrency: 8 goroutines
// take 1,000,000 IDs each from one Twitter-layout generator on the real
// clock (so ticks run out and the Wait path is exercised); every ID is
// collected, none repeats, and each goroutine sees a strictly increasing
// sequence.
func TestUniqueConcurrent(t *testing.T) {
	const goroutines, perG = 8, 1_000_000
	l := twitter(t)
	g, _ := newGen(t, l, Settings{Clock: clock.NewReal()})
	all := make([]int64, goroutines*perG)
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for w := range goroutines {
		wg.Go(func() {
			mine := all[w*perG : (w+1)*perG]
			ctx := context.Background()
			var last int64
			for i := range mine {
				id, err := g.Next(ctx)
				if err != nil {
					errs <- err
					return
				}
				if id <= last {
					errs <- errors.New("goroutine saw a non-increasing ID")
					return
				}
				mine[i], last = id, id
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("duplicate ID %d", all[i])
		}
	}
	if all[0] <= 0 {
		t.Fatalf("non-positive ID %d", all[0])
	}
	for _, id := range []int64{all[0], all[len(all)-1]} {
		if p := mustDecode(t, l, id); p.Node["worker"] != 1 || p.Node["datacenter"] != 1 {
			t.Fatalf("ID %d carries node %v", id, p.Node)
		}
	}
}

func TestNextStampsAndNode(t *testing.T) {
	t.Parallel()
	l := twitter(t)
	g, f := newGen(t, l, Settings{Node: map[string]int64{"datacenter": 3, "worker": 17}})
	id := mustNext(t, g)
	p := mustDecode(t, l, id)
	if !p.Time.Equal(t0) || p.Node["datacenter"] != 3 || p.Node["worker"] != 17 || p.Sequence != 0 {
		t.Fatalf("first ID decodes to %+v", p)
	}
	if p := mustDecode(t, l, mustNext(t, g)); !p.Time.Equal(t0) || p.Sequence != 1 {
		t.Fatalf("second ID decodes to %+v", p)
	}
	f.Advance(1500 * time.Microsecond)
	if p := mustDecode(t, l, mustNext(t, g)); !p.Time.Equal(t0.Add(time.Millisecond)) || p.Sequence != 0 {
		t.Fatalf("ID after 1.5 ms decodes to %+v", p)
	}
}

func TestRandomSequenceStart(t *testing.T) {
	t.Parallel()
	l, _ := Lookup("leaf")
	var asked []int64
	g, f := newGen(t, l, Settings{Rand: func(n int64) int64 { asked = append(asked, n); return n - 1 }})
	for range 3 {
		if p := mustDecode(t, l, mustNext(t, g)); p.Sequence != 99 {
			t.Fatalf("first ID of a tick has sequence %d, want 99", p.Sequence)
		}
		if p := mustDecode(t, l, mustNext(t, g)); p.Sequence != 100 {
			t.Fatalf("second ID of a tick has sequence %d, want 100", p.Sequence)
		}
		f.Advance(time.Millisecond)
	}
	if len(asked) != 3 || asked[0] != 100 {
		t.Fatalf("Rand called with %v, want 100 once per tick", asked)
	}
	// A custom Rand out of range cannot spill into the time field.
	g3, _ := newGen(t, l, Settings{Rand: func(n int64) int64 { return -7 }})
	if p := mustDecode(t, l, mustNext(t, g3)); p.Sequence >= 100 || !p.Time.Equal(t0) {
		t.Fatalf("out-of-range Rand gave %+v", p)
	}
	// With the default source, starts stay within [0, 100).
	g2, f2 := newGen(t, l, Settings{})
	seen := map[int64]bool{}
	for range 500 {
		p := mustDecode(t, l, mustNext(t, g2))
		if p.Sequence < 0 || p.Sequence >= 100 {
			t.Fatalf("random start %d outside [0,100)", p.Sequence)
		}
		seen[p.Sequence] = true
		f2.Advance(time.Millisecond)
	}
	if len(seen) < 50 {
		t.Fatalf("only %d distinct starts in 500 ticks", len(seen))
	}
}

func TestOverflowWait(t *testing.T) {
	t.Parallel()
	l := twitter(t)
	g, f := newGen(t, l, Settings{})
	dst := make([]int64, 4096)
	if n, err := g.NextN(context.Background(), dst); n != 4096 || err != nil {
		t.Fatalf("NextN = %d, %v", n, err)
	}
	if p := mustDecode(t, l, dst[4095]); !p.Time.Equal(t0) || p.Sequence != 4095 {
		t.Fatalf("4096th ID decodes to %+v", p)
	}
	ids, errs := nextAsync(g)
	waitSleepers(t, f, 1)
	select {
	case id := <-ids:
		t.Fatalf("Next returned %d with the tick's sequence used up", id)
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	f.Advance(time.Millisecond)
	select {
	case id := <-ids:
		if p := mustDecode(t, l, id); !p.Time.Equal(t0.Add(time.Millisecond)) || p.Sequence != 0 || id <= dst[4095] {
			t.Fatalf("ID after the wait decodes to %+v", p)
		}
	case err := <-errs:
		t.Fatal(err)
	}
	if a := g.Ahead(); a != 0 {
		t.Fatalf("Ahead = %v under OverflowWait", a)
	}
}

func TestOverflowWaitCancel(t *testing.T) {
	t.Parallel()
	l := MustParseLayout("time=40:1ms,seq=1,epoch=2020-01-01")
	g, _ := newGen(t, l, Settings{})
	mustNext(t, g)
	mustNext(t, g)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with a used-up tick and a cancelled ctx = %v", err)
	}
}

func TestOverflowBorrow(t *testing.T) {
	t.Parallel()
	l := twitter(t)
	const limit = 5 * time.Millisecond
	g, f := newGen(t, l, Settings{Overflow: OverflowBorrow, BorrowLimit: limit})
	// The current tick plus five borrowed ones, without any wait.
	dst := make([]int64, 6*4096)
	if n, err := g.NextN(context.Background(), dst); n != len(dst) || err != nil {
		t.Fatalf("NextN = %d, %v", n, err)
	}
	for i := 1; i < len(dst); i++ {
		if dst[i] <= dst[i-1] {
			t.Fatalf("IDs not increasing at %d", i)
		}
	}
	last := mustDecode(t, l, dst[len(dst)-1])
	if !last.Time.Equal(t0.Add(limit)) || last.Sequence != 4095 {
		t.Fatalf("last borrowed ID decodes to %+v", last)
	}
	if a := g.Ahead(); a != limit {
		t.Fatalf("Ahead = %v, want %v", a, limit)
	}
	// At the bound, the next call waits for the wall clock.
	ids, errs := nextAsync(g)
	waitSleepers(t, f, 1)
	f.Advance(time.Millisecond)
	select {
	case id := <-ids:
		p := mustDecode(t, l, id)
		if !p.Time.Equal(t0.Add(limit+time.Millisecond)) || p.Sequence != 0 {
			t.Fatalf("ID after the bound decodes to %+v", p)
		}
		if ahead := p.Time.Sub(f.Now()); ahead > limit {
			t.Fatalf("stamped %v ahead of the clock, bound %v", ahead, limit)
		}
	case err := <-errs:
		t.Fatal(err)
	}
}

func TestRollbackWithinThresholdWaits(t *testing.T) {
	t.Parallel()
	l := twitter(t)
	g, f := newGen(t, l, Settings{})
	first := mustNext(t, g)
	f.Step(-3 * time.Millisecond)
	ids, errs := nextAsync(g)
	waitSleepers(t, f, 1)
	f.Advance(3 * time.Millisecond)
	select {
	case id := <-ids:
		if id <= first {
			t.Fatalf("ID %d after rollback not above %d", id, first)
		}
		if p := mustDecode(t, l, id); p.Time.Before(t0) {
			t.Fatalf("ID stamped %v, before the last stamp %v", p.Time, t0)
		}
	case err := <-errs:
		t.Fatalf("rollback of 3 ms under a 5 ms threshold: %v", err)
	}
}

func TestRollbackBeyondThresholdErrors(t *testing.T) {
	t.Parallel()
	l := twitter(t)
	g, f := newGen(t, l, Settings{})
	first := mustNext(t, g)
	f.Step(-time.Hour)
	_, err := g.Next(context.Background())
	var cb *ClockBehindError
	if !errors.As(err, &cb) || !errors.Is(err, ErrClockBehind) {
		t.Fatalf("Next after an hour's rollback = %v, want *ClockBehindError", err)
	}
	if cb.Behind != time.Hour || cb.MaxWait != 5*time.Millisecond || !strings.Contains(err.Error(), "1h0m0s") {
		t.Fatalf("ClockBehindError = %+v (%v)", cb, err)
	}
	if f.Sleepers() != 0 {
		t.Fatal("generator sleeps on a rollback beyond its threshold")
	}
	// Once the clock is back, IDs resume above the old ones.
	f.Step(time.Hour)
	if id := mustNext(t, g); id <= first {
		t.Fatalf("ID %d after recovery not above %d", id, first)
	}
	// Never waiting: even 1 ms is reported.
	g2, f2 := newGen(t, l, Settings{MaxRollbackWait: -1})
	mustNext(t, g2)
	f2.Step(-time.Millisecond)
	if _, err := g2.Next(context.Background()); !errors.As(err, &cb) || cb.Behind != time.Millisecond {
		t.Fatalf("MaxRollbackWait<0: %v", err)
	}
}

func TestRollbackLogical(t *testing.T) {
	t.Parallel()
	l := twitter(t)
	const limit = 10 * time.Second
	g, f := newGen(t, l, Settings{Rollback: RollbackLogical, LogicalLimit: limit})
	var all []int64
	for range 100 {
		all = append(all, mustNext(t, g))
	}
	f.Step(-2 * time.Second)
	dst := make([]int64, 3*4096)
	if n, err := g.NextN(context.Background(), dst); n != len(dst) || err != nil {
		t.Fatalf("NextN after rollback = %d, %v", n, err)
	}
	all = append(all, dst...)
	for range 100 {
		all = append(all, mustNext(t, g))
	}
	for i := 1; i < len(all); i++ {
		if all[i] <= all[i-1] {
			t.Fatalf("ID %d at %d not above %d", all[i], i, all[i-1])
		}
	}
	if p := mustDecode(t, l, all[len(all)-1]); p.Time.Before(t0) {
		t.Fatalf("logical clock stamped %v, before the last stamp %v", p.Time, t0)
	}
	if a := g.Ahead(); a < 2*time.Second || a > limit {
		t.Fatalf("Ahead = %v, want between 2s and %v", a, limit)
	}
	if f.Sleepers() != 0 {
		t.Fatal("logical mode slept")
	}
	// Beyond the logical bound it reports the distance.
	f.Step(-time.Minute)
	var cb *ClockBehindError
	if _, err := g.Next(context.Background()); !errors.As(err, &cb) || cb.Behind < time.Minute {
		t.Fatalf("rollback beyond the logical bound = %v", err)
	}
}

type testFence struct{ until atomic.Int64 }

func (f *testFence) ValidUntil() time.Duration { return time.Duration(f.until.Load()) }

func TestFence(t *testing.T) {
	t.Parallel()
	l := twitter(t)
	fence := &testFence{}
	fence.until.Store(int64(10 * time.Second))
	g, f := newGen(t, l, Settings{Fence: fence})
	a := mustNext(t, g)
	fence.until.Store(0)
	if _, err := g.Next(context.Background()); !errors.Is(err, ErrFenced) {
		t.Fatalf("Next with an expired fence = %v", err)
	}
	if n, err := g.NextN(context.Background(), make([]int64, 10)); n != 0 || !errors.Is(err, ErrFenced) {
		t.Fatalf("NextN with an expired fence = %d, %v", n, err)
	}
	fence.until.Store(int64(20 * time.Second))
	b := mustNext(t, g)
	if b <= a {
		t.Fatalf("ID after the fence resumed %d not above %d", b, a)
	}
	f.Advance(20 * time.Second) // Mono reaches ValidUntil: a paused process waking up
	if _, err := g.Next(context.Background()); !errors.Is(err, ErrFenced) {
		t.Fatalf("Next at Mono == ValidUntil = %v", err)
	}
	// The cached fast path (real clock) reads the fence too.
	fence2 := &testFence{}
	g2, _ := newGen(t, l, Settings{Clock: clock.NewReal(), Fence: fence2})
	for range 100 {
		if _, err := g2.Next(context.Background()); !errors.Is(err, ErrFenced) {
			t.Fatalf("real-clock Next with a zero fence = %v", err)
		}
	}
	fence2.until.Store(math.MaxInt64)
	mustNext(t, g2)
}

func TestNewValidation(t *testing.T) {
	t.Parallel()
	tw := twitter(t)
	baidu, _ := Lookup("baidu")
	future, _ := tw.WithEpoch(t0.Add(time.Hour))
	node := map[string]int64{"datacenter": 1, "worker": 2}
	tests := []struct {
		name   string
		layout Layout
		s      Settings
		err    error
		text   string
	}{
		{"zero layout", Layout{}, Settings{}, ErrInvalidLayout, "layout"},
		{"node missing", tw, Settings{Node: map[string]int64{"worker": 1}}, ErrInvalidNode, `datacenter ""`},
		{"node too wide", tw, Settings{Node: map[string]int64{"datacenter": 1, "worker": 32}}, ErrInvalidNode, `worker "32"`},
		{"unknown node", tw, Settings{Node: map[string]int64{"datacenter": 1, "worker": 2, "shard": 3}}, ErrInvalidNode, `node "shard"`},
		{"expired layout", baidu, Settings{Node: map[string]int64{"worker": 1}}, ErrLayoutExpired, "2024-11-20T13:24:16Z"},
		{"epoch in future", future, Settings{Node: node}, ErrEpochInFuture, "epoch"},
		{"borrow limit below a tick", tw, Settings{Node: node, Overflow: OverflowBorrow, BorrowLimit: time.Microsecond}, ErrInvalidSettings, `BorrowLimit "1µs"`},
		{"negative borrow limit", tw, Settings{Node: node, Overflow: OverflowBorrow, BorrowLimit: -time.Second}, ErrInvalidSettings, `BorrowLimit "-1s"`},
		{"logical limit below a tick", tw, Settings{Node: node, Rollback: RollbackLogical, LogicalLimit: time.Nanosecond}, ErrInvalidSettings, `LogicalLimit "1ns"`},
		{"bad overflow", tw, Settings{Node: node, Overflow: 7}, ErrInvalidSettings, `Overflow "7"`},
		{"bad rollback", tw, Settings{Node: node, Rollback: -1}, ErrInvalidSettings, `Rollback "-1"`},
		{"negative lead", tw, Settings{Node: node, HorizonLead: -time.Second}, ErrInvalidSettings, `HorizonLead "-1s"`},
	}
	for _, tt := range tests {
		tt.s.Clock = clock.NewFake(t0)
		_, err := New(tt.layout, tt.s)
		if !errors.Is(err, tt.err) || !strings.Contains(err.Error(), tt.text) {
			t.Errorf("%s: New = %v, want %v naming %s", tt.name, err, tt.err, tt.text)
		}
	}
	rebased, _ := baidu.WithEpoch(time.Date(2024, 11, 21, 0, 0, 0, 0, time.UTC))
	g, err := New(rebased, Settings{Clock: clock.NewFake(t0), Node: map[string]int64{"worker": 5}})
	if err != nil {
		t.Fatalf("re-based baidu: %v", err)
	}
	defer g.Close()
	if p := mustDecode(t, rebased, mustNext(t, g)); !p.Time.Equal(t0) || p.Node["worker"] != 5 {
		t.Fatalf("re-based baidu ID decodes to %+v", p)
	}
}

func TestLayoutRunsOut(t *testing.T) {
	t.Parallel()
	l := MustParseLayout("time=4:1s,seq=1,epoch=2026-01-02T03:03:55Z") // ends at t0+6s
	g, f := newGen(t, l, Settings{})
	mustNext(t, g)
	if r := g.Remaining(); r != 6*time.Second {
		t.Fatalf("Remaining = %v, want 6s", r)
	}
	f.Advance(6 * time.Second)
	if _, err := g.Next(context.Background()); !errors.Is(err, ErrLayoutExpired) {
		t.Fatalf("Next past End = %v", err)
	}
	// The last tick's sequence running out is the end too, not a wait.
	l2 := MustParseLayout("time=4:1s,seq=1,epoch=2026-01-02T03:03:50Z") // last tick is t0
	g2, _ := newGen(t, l2, Settings{})
	mustNext(t, g2)
	mustNext(t, g2)
	if _, err := g2.Next(context.Background()); !errors.Is(err, ErrLayoutExpired) {
		t.Fatalf("Next after the last tick's sequence = %v", err)
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	for _, c := range []clock.Clock{clock.NewFake(t0), clock.NewReal()} {
		g, _ := newGen(t, twitter(t), Settings{Clock: c})
		mustNext(t, g)
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Next(context.Background()); !errors.Is(err, ErrClosed) {
			t.Fatalf("Next after Close = %v", err)
		}
		if _, err := g.NextN(context.Background(), make([]int64, 3)); !errors.Is(err, ErrClosed) {
			t.Fatalf("NextN after Close = %v", err)
		}
	}
}

// TestRealClockStamps checks the cached fast path against the real clock: a
// stamp never leads the clock and lags it by a bounded amount.
func TestRealClockStamps(t *testing.T) {
	t.Parallel()
	l := twitter(t)
	c := clock.NewReal()
	g, _ := newGen(t, l, Settings{Clock: c})
	var last int64
	for range 20 {
		before := c.Now()
		for range 1000 {
			id := mustNext(t, g)
			if id <= last {
				t.Fatalf("%d after %d", id, last)
			}
			last = id
		}
		after := c.Now()
		p := mustDecode(t, l, last)
		if p.Time.After(after) {
			t.Fatalf("stamp %v leads the clock %v", p.Time, after)
		}
		if p.Time.Before(before.Add(-time.Second)) {
			t.Fatalf("stamp %v lags the clock %v by more than a second", p.Time, before)
		}
	}
}

// TestSimpleflakeCollisionRate measures how often n uncoordinated
// Simpleflake generators, each issuing one ID in the same millisecond,
// collide, and compares it with the documented 1 - exp(-n(n-1)/2^23).
func TestSimpleflakeCollisionRate(t *testing.T) {
	t.Parallel()
	l, _ := Lookup("simpleflake")
	const n, trials = 1000, 300
	f := clock.NewFake(t0)
	gens := make([]*Generator, n)
	for i := range gens {
		gens[i], _ = newGen(t, l, Settings{Clock: f})
	}
	collided := 0
	ids := make([]int64, n)
	for range trials {
		for i, g := range gens {
			ids[i] = mustNext(t, g)
		}
		slices.Sort(ids)
		for i := 1; i < n; i++ {
			if ids[i] == ids[i-1] {
				collided++
				break
			}
		}
		f.Advance(time.Millisecond)
	}
	p := 1 - math.Exp(-float64(n*(n-1))/(1<<23))
	mean, sd := p*trials, math.Sqrt(trials*p*(1-p))
	t.Logf("%d of %d trials collided (expected %.1f ± %.1f, p = %.4f)", collided, trials, mean, sd, p)
	if math.Abs(float64(collided)-mean) > 5*sd {
		t.Fatalf("%d collisions in %d trials, expected %.1f ± %.1f", collided, trials, mean, sd)
	}
}
