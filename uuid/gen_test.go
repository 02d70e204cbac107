package uuid

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/testkit/idtest"
)

func fakeAt(t time.Time) *clock.Fake { return clock.NewFake(t) }

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

type generator interface {
	Next(context.Context) (UUID, error)
}

func assertUnique(t *testing.T, ids []UUID) {
	t.Helper()
	seen := make(map[UUID]struct{}, len(ids))
	for _, id := range ids {
		if _, dup := seen[id]; dup {
			t.Fatalf("duplicate %s among %d IDs", id, len(ids))
		}
		seen[id] = struct{}{}
	}
}

func TestUniqueUnderConcurrency(t *testing.T) {
	t.Parallel()
	const workers, n = 8, 20000
	for _, tc := range []struct {
		name    string
		version int
		make    func(Settings) (generator, error)
		step    time.Duration
	}{
		{"v1", 1, func(s Settings) (generator, error) { return NewV1(s) }, 100 * time.Nanosecond},
		{"v4", 4, func(s Settings) (generator, error) { return NewV4(s) }, 0},
		{"v6", 6, func(s Settings) (generator, error) { return NewV6(s) }, 100 * time.Nanosecond},
		{"v7", 7, func(s Settings) (generator, error) { return NewV7(s) }, time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := fakeAt(t0)
			g, err := tc.make(Settings{Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			ctx := idtest.Context(t)
			out := idtest.Unique(t, workers, n, func(int, int) (UUID, error) {
				id, err := g.Next(ctx)
				if tc.step > 0 {
					clk.Advance(tc.step)
				}
				return id, err
			}, nil)
			for _, ids := range out {
				for _, id := range ids {
					if err := id.Check(tc.version); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}

// TestV7MonotonicAcrossRollback: a frozen clock (many IDs per millisecond),
// then a 10 s step back; every ID is greater than the one before, and Ahead
// reports the lead until the clock catches up.
func TestV7MonotonicAcrossRollback(t *testing.T) {
	t.Parallel()
	clk := fakeAt(t0)
	g, _ := NewV7(Settings{Clock: clk})
	ctx := idtest.Context(t)
	var prev UUID
	for i := range 30000 {
		switch i {
		case 10000:
			clk.Advance(3 * time.Millisecond)
		case 20000:
			clk.Step(-10 * time.Second)
			if a := g.Ahead(); a < 9*time.Second {
				t.Fatalf("Ahead after step back = %v", a)
			}
		}
		id, err := g.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if id.Compare(prev) <= 0 {
			t.Fatalf("ID %d %s not greater than %s", i, id, prev)
		}
		prev = id
	}
	if ts, _ := prev.Time(); !ts.Equal(t0.Add(3 * time.Millisecond)) {
		t.Fatalf("after step back stamped %v, want the held millisecond", ts)
	}
	clk.Advance(11 * time.Second)
	if a := g.Ahead(); a != 0 {
		t.Fatalf("Ahead after catching up = %v", a)
	}
	if id, _ := g.Next(ctx); id.Compare(prev) <= 0 {
		t.Fatal("not monotonic after catching up")
	}
}

func TestV7NeverAheadUnderLoad(t *testing.T) {
	t.Parallel()
	clk := fakeAt(t0)
	g, _ := NewV7(Settings{Clock: clk})
	ctx := idtest.Context(t)
	for range 100000 { // 100k IDs in one millisecond; Method 3 would lead by 24 ms
		if _, err := g.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if a := g.Ahead(); a != 0 {
		t.Fatalf("Ahead = %v under load with a steady clock", a)
	}
}

// TestV7CounterExhausted lowers the counter limit to reach the overflow
// path: Next waits for the next millisecond, or fails when that is further
// than MaxWait.
func TestV7CounterExhausted(t *testing.T) {
	t.Parallel()
	clk := fakeAt(t0)
	g, _ := NewV7(Settings{Clock: clk, Rand: bytes.NewReader(make([]byte, 4096))})
	g.limit = 4 // counter seeds at 0 from the zero reader: 4 IDs per ms
	ctx := idtest.Context(t)
	var ids []UUID
	for range 4 {
		id, err := g.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	id := idtest.AfterWait(t, clk, time.Millisecond, func() (UUID, error) { return g.Next(ctx) })
	if ts, _ := id.Time(); !ts.Equal(t0.Add(time.Millisecond)) || id.Compare(ids[3]) <= 0 {
		t.Fatalf("after exhaustion got %s at %v", id, ts)
	}
	for range 3 {
		_, _ = g.Next(ctx)
	}
	clk.Step(-2 * time.Second)
	if _, err := g.Next(ctx); !errors.Is(err, ErrExhausted) {
		t.Fatalf("exhausted with clock 2 s behind: %v, want ErrExhausted", err)
	}
}

func TestV1OverloadWaitsInsteadOfRunningAhead(t *testing.T) {
	t.Parallel()
	clk := fakeAt(t0)
	g, _ := NewV1(Settings{Clock: clk, MaxAhead: time.Microsecond}) // 10 ticks
	ctx := idtest.Context(t)
	var ids []UUID
	for range 11 {
		id, err := g.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if a := g.Ahead(); a != time.Microsecond {
		t.Fatalf("Ahead = %v, want 1µs", a)
	}
	ids = append(ids, idtest.AfterWait(t, clk, 100*time.Nanosecond, func() (UUID, error) { return g.Next(ctx) }))
	assertUnique(t, ids)
	if a := g.Ahead(); a > time.Microsecond {
		t.Fatalf("Ahead = %v exceeds MaxAhead", a)
	}

	g2, _ := NewV6(Settings{Clock: clk, MaxAhead: time.Microsecond, MaxWait: 50 * time.Nanosecond})
	for range 11 {
		_, _ = g2.Next(ctx)
	}
	if _, err := g2.Next(ctx); !errors.Is(err, ErrExhausted) {
		t.Fatalf("overload beyond MaxWait: %v, want ErrExhausted", err)
	}
}

func TestV1RollbackBumpsClockSequence(t *testing.T) {
	t.Parallel()
	clk := fakeAt(t0)
	g, _ := NewV6(Settings{Clock: clk})
	ctx := idtest.Context(t)
	a, _ := g.Next(ctx)
	clk.Step(-500 * time.Nanosecond) // within MaxAhead: same sequence, tick moves on
	b, _ := g.Next(ctx)
	clk.Step(-time.Second)
	c, _ := g.Next(ctx)
	sa, _ := a.ClockSeq()
	sb, _ := b.ClockSeq()
	sc, _ := c.ClockSeq()
	if sb != sa || b.Compare(a) <= 0 {
		t.Fatalf("small step back: seq %d→%d, order %d", sa, sb, b.Compare(a))
	}
	if sc != (sa+1)&0x3fff {
		t.Fatalf("large step back: seq %d→%d, want +1", sa, sc)
	}
	if ts, _ := c.Time(); !ts.Equal(clk.Now()) {
		t.Fatalf("after step back stamped %v, want the clock %v", ts, clk.Now())
	}
	assertUnique(t, []UUID{a, b, c})
	node, _ := a.Node()
	if node[0]&1 != 1 {
		t.Fatalf("random node %x lacks the multicast bit", node)
	}
}

func TestSettingsAndInputErrors(t *testing.T) {
	t.Parallel()
	for _, s := range []Settings{{MaxWait: -1}, {MaxAhead: -1}, {Node: []byte{1, 2, 3}}} {
		if _, err := NewV1(s); !errors.Is(err, ErrSettings) {
			t.Errorf("NewV1(%+v) = %v, want ErrSettings", s, err)
		}
		if _, err := NewV7(s); !errors.Is(err, ErrSettings) {
			t.Errorf("NewV7(%+v) = %v, want ErrSettings", s, err)
		}
	}
	if _, err := NewV1(Settings{Rand: bytes.NewReader(nil)}); !errors.Is(err, io.EOF) {
		t.Errorf("NewV1 with empty Rand = %v", err)
	}
	v4, _ := NewV4(Settings{Rand: bytes.NewReader(nil)})
	if _, err := v4.Next(idtest.Context(t)); !errors.Is(err, io.EOF) {
		t.Errorf("V4.Next with empty Rand = %v", err)
	}
	v7, _ := NewV7(Settings{Clock: fakeAt(time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC))})
	if _, err := v7.Next(idtest.Context(t)); !errors.Is(err, ErrTime) {
		t.Errorf("V7 in 1960 = %v, want ErrTime", err)
	}
	v1, _ := NewV1(Settings{Clock: fakeAt(time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC))})
	if _, err := v1.Next(idtest.Context(t)); !errors.Is(err, ErrTime) {
		t.Errorf("V1 in 1500 = %v, want ErrTime", err)
	}
	// Before the Unix epoch but after 1582 is fine for v1.
	v1, _ = NewV1(Settings{Clock: fakeAt(time.Date(1901, 2, 3, 4, 5, 6, 700, time.UTC))})
	u, err := v1.Next(idtest.Context(t))
	if ts, _ := u.Time(); err != nil || !ts.Equal(time.Date(1901, 2, 3, 4, 5, 6, 700, time.UTC)) {
		t.Errorf("V1 in 1901 = %v, %v", ts, err)
	}
}

func ExampleNewV7() {
	clk := clock.NewFake(time.Date(2022, 2, 22, 19, 22, 22, 0, time.UTC))
	g, err := NewV7(Settings{Clock: clk, Rand: rand.NewChaCha8([32]byte{})}) // deterministic for the example
	if err != nil {
		panic(err)
	}
	a, _ := g.Next(context.Background())
	b, _ := g.Next(context.Background())
	ts, _ := a.Time()
	fmt.Println(ts, a.Compare(b), g.Ahead())
	// Output: 2022-02-22 19:22:22 +0000 UTC -1 0s
}

func BenchmarkV4(b *testing.B) {
	g, _ := NewV4(Settings{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, _ = g.Next(ctx)
	}
}

func BenchmarkV4Parallel(b *testing.B) {
	g, _ := NewV4(Settings{})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = g.Next(ctx)
		}
	})
}

func BenchmarkV7(b *testing.B) {
	g, _ := NewV7(Settings{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, _ = g.Next(ctx)
	}
}

func BenchmarkV7Parallel(b *testing.B) {
	g, _ := NewV7(Settings{})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = g.Next(ctx)
		}
	})
}

func BenchmarkV1(b *testing.B) {
	g, _ := NewV1(Settings{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, _ = g.Next(ctx)
	}
}

func BenchmarkV6(b *testing.B) {
	g, _ := NewV6(Settings{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, _ = g.Next(ctx)
	}
}

func BenchmarkString(b *testing.B) {
	u, _ := Parse(rfcV7)
	b.ReportAllocs()
	for b.Loop() {
		_ = u.String()
	}
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_, _ = Parse(rfcV7)
	}
}

// TestV7CounterGuardBit: with all-ones randomness the counter still seeds
// with its top bit clear (RFC 9562 §6.2 rollover guard), leaving 2^41
// increments before the millisecond is exhausted.
func TestV7CounterGuardBit(t *testing.T) {
	t.Parallel()
	g, _ := NewV7(Settings{Clock: fakeAt(t0), Rand: bytes.NewReader(bytes.Repeat([]byte{0xff}, 4096))})
	a, _ := g.Next(idtest.Context(t))
	b, _ := g.Next(idtest.Context(t))
	if a[6]&0x08 != 0 {
		t.Fatalf("counter guard bit set in %s", a)
	}
	if b.Compare(a) <= 0 || b[6]&0x08 == 0 {
		t.Fatalf("increment from the seed did not carry into the guard bit: %s → %s", a, b)
	}
	if a[12] != 0xff || a[15] != 0xff {
		t.Fatalf("random tail not from Rand: %s", a)
	}
}
