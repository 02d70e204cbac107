package flake128

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/testkit/idtest"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func TestPartsAndForms(t *testing.T) {
	t.Parallel()
	id := Make(uint64(t0.UnixMilli()), 0x9f6bdeced846, 0x1234)
	if !id.Time().Equal(t0) || id.Worker() != 0x9f6bdeced846 || id.Seq() != 0x1234 {
		t.Fatalf("parts: %v %x %x", id.Time(), id.Worker(), id.Seq())
	}
	if got := id.Hex(); got != fmt.Sprintf("%016x9f6bdeced8461234", t0.UnixMilli()) {
		t.Fatalf("Hex = %s", got)
	}
	for _, s := range []string{id.Hex(), strings.ToUpper(id.Hex()), id.String(), strings.TrimLeft(id.String(), "0")} {
		back, err := Parse(s)
		if err != nil || back != id {
			t.Errorf("Parse(%q) = %x, %v", s, back, err)
		}
	}
	if len(id.String()) != 22 {
		t.Fatalf("String has %d chars", len(id.String()))
	}
	max := ID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	if s := max.String(); s != "7n42DGM5Tflk9n8mt7Fhc7" {
		t.Fatalf("max = %s", s)
	}
	var u ID
	if err := u.UnmarshalText([]byte(id.String())); err != nil || u != id {
		t.Fatal("UnmarshalText")
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want error
		msg  string
	}{
		{"", ErrLength, "0 characters"},
		{strings.Repeat("0", 23), ErrLength, "23 characters"},
		{strings.Repeat("0", 31) + "g", ErrSyntax, "'g' at position 31"},
		{"7n42DGM5Tflk9n8mt7Fhc8", ErrRange, "exceeds 2^128-1"},
		{"zzzzzzzzzzzzzzzzzzzzzz", ErrRange, "exceeds"},
		{"0000000000-00000000000", ErrSyntax, "'-' at position 10"},
	} {
		_, err := Parse(tc.in)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) || !strings.HasPrefix(err.Error(), "flake128: ") {
			t.Errorf("Parse(%q) = %v; want %v mentioning %q", tc.in, err, tc.want, tc.msg)
		}
	}
	if _, err := ParseHex("abc"); !errors.Is(err, ErrLength) {
		t.Errorf("ParseHex(abc) = %v", err)
	}
	if _, err := New(MaxWorker+1, Settings{}); !errors.Is(err, ErrWorker) {
		t.Errorf("worker 2^48: %v", err)
	}
	if _, err := New(1, Settings{MaxWait: -1}); !errors.Is(err, ErrSettings) {
		t.Errorf("MaxWait -1: %v", err)
	}
	g, _ := New(1, Settings{Clock: clock.NewFake(time.Unix(-1, 0))})
	if _, err := g.Next(idtest.Context(t)); !errors.Is(err, ErrTime) {
		t.Errorf("1969: %v", err)
	}
}

// TestMACWorker never skips: on a machine without a MAC address (a
// container, CI) it checks the error and goes on with a random 48-bit
// worker, as a deployment without a MAC would give an explicit one.
func TestMACWorker(t *testing.T) {
	t.Parallel()
	w, err := MACWorker()
	if err != nil {
		if !errors.Is(err, ErrWorker) {
			t.Fatalf("MACWorker error %v is not ErrWorker", err)
		}
		w = rand.Uint64N(MaxWorker + 1)
		t.Logf("no MAC address here (%v); going on with random worker %#x", err, w)
	}
	if w > MaxWorker {
		t.Fatalf("worker %x exceeds 48 bits", w)
	}
	g, err := New(w, Settings{Clock: clock.NewFake(t0)})
	if err != nil {
		t.Fatalf("New(%#x): %v", w, err)
	}
	id, err := g.Next(idtest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if id.Worker() != w {
		t.Fatalf("ID %v carries worker %#x, want %#x", id, id.Worker(), w)
	}
}

// TestSequenceExhaustionAndRollback issues 65,536 IDs in one frozen
// millisecond: the next waits for the clock. Then the clock steps back:
// IDs keep increasing on the held millisecond.
func TestSequenceExhaustionAndRollback(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	g, _ := New(42, Settings{Clock: clk})
	ctx := idtest.Context(t)
	var prev ID
	for i := range 1 << 16 {
		id, err := g.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if int(id.Seq()) != i || id.Worker() != 42 {
			t.Fatalf("ID %d: seq %d worker %d", i, id.Seq(), id.Worker())
		}
		prev = id
	}
	id := idtest.AfterWait(t, clk, time.Millisecond, func() (ID, error) { return g.Next(ctx) })
	if id.Millis() != prev.Millis()+1 || id.Seq() != 0 {
		t.Fatalf("after exhaustion: %d/%d", id.Millis(), id.Seq())
	}
	prev = id
	clk.Step(-time.Second)
	for range 100 {
		id, err := g.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if id.Millis() != prev.Millis() || id.Seq() <= prev.Seq() {
			t.Fatalf("after step back: %d/%d after %d/%d", id.Millis(), id.Seq(), prev.Millis(), prev.Seq())
		}
		prev = id
	}
	if a := g.Ahead(); a != time.Second {
		t.Fatalf("Ahead = %v", a)
	}
	for range 1<<16 - 101 {
		if _, err := g.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.Next(ctx); !errors.Is(err, ErrExhausted) {
		t.Fatalf("exhausted 1 s ahead: %v", err)
	}
}

func TestUniqueUnderConcurrency(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	g, _ := New(7, Settings{Clock: clk})
	ctx := idtest.Context(t)
	idtest.Unique(t, 8, 20000, func(int, int) (ID, error) {
		id, err := g.Next(ctx)
		clk.Advance(time.Microsecond)
		return id, err
	}, func(a, b ID) int { return bytes.Compare(a[:], b[:]) })
}

func FuzzParse(f *testing.F) {
	f.Add("0000000000000000000000")
	f.Add("7n42DGM5Tflk9n8mt7Fhc7")
	f.Add("7n42DGM5Tflk9n8mt7Fhc8")
	f.Add("0123456789abcdef0123456789ABCDEF")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrLength) && !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrRange) {
				t.Fatalf("unclassified error %v", err)
			}
			if errors.Is(err, ErrRange) {
				v := new(big.Int)
				for i := range len(s) {
					v.Mul(v, big.NewInt(62))
					v.Add(v, big.NewInt(int64(digit62(s[i]))))
				}
				if v.BitLen() <= 128 {
					t.Fatalf("Parse(%q) says out of range but it is %v", s, v)
				}
			}
			return
		}
		// Cross-check the 128-bit arithmetic with math/big (whose own
		// base 62 orders a-z before A-Z, so digits are mapped here).
		want := new(big.Int)
		if len(s) == 32 {
			want.SetString(s, 16)
		} else {
			for i := range len(s) {
				want.Mul(want, big.NewInt(62))
				want.Add(want, big.NewInt(int64(digit62(s[i]))))
			}
		}
		if got := new(big.Int).SetBytes(id[:]); got.Cmp(want) != 0 {
			t.Fatalf("Parse(%q) = %x, math/big = %v", s, id[:], want)
		}
		if back, err := Parse(id.String()); err != nil || back != id {
			t.Fatal("base62 round trip")
		}
		if back, err := Parse(id.Hex()); err != nil || back != id {
			t.Fatal("hex round trip")
		}
	})
}

func ExampleGenerator() {
	clk := clock.NewFake(time.Date(2012, 1, 12, 0, 0, 0, 0, time.UTC))
	g, _ := New(0x9f6bdeced846, Settings{Clock: clk})
	id, _ := g.Next(context.Background())
	fmt.Println(id.Hex())
	fmt.Println(id)
	fmt.Println(id.Time(), id.Worker() == 0x9f6bdeced846, id.Seq())
	// Output:
	// 00000134cf36c4009f6bdeced8460000
	// 00008HDbYS99WAyUEMzMcy
	// 2012-01-12 00:00:00 +0000 UTC true 0
}

func BenchmarkNext(b *testing.B) {
	g, _ := New(1, Settings{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, _ = g.Next(ctx)
	}
}

func BenchmarkNextParallel(b *testing.B) {
	g, _ := New(1, Settings{})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = g.Next(ctx)
		}
	})
}
