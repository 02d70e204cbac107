package ulid

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	oklog "github.com/oklog/ulid/v2"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/testkit/idtest"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func TestParse(t *testing.T) {
	t.Parallel()
	// The example of the ULID specification's README; its timestamp
	// 01ARZ3NDEK is 1469922850259 ms (2016-07-30T23:54:10.259Z).
	id, err := Parse("01ARZ3NDEKTSV4RRFFQ69G5FAV")
	if err != nil {
		t.Fatal(err)
	}
	if id.Time() != 1469922850259 {
		t.Errorf("Time = %d", id.Time())
	}
	if low, _ := Parse("01arz3ndektsv4rrffq69g5fav"); low != id {
		t.Error("lowercase differs")
	}
	for _, tc := range []struct {
		in   string
		want error
		msg  string
	}{
		{"", ErrLength, "0 characters"},
		{"01ARZ3NDEKTSV4RRFFQ69G5FA", ErrLength, "25 characters"},
		{"01ARZ3NDEKTSV4RRFFQ69G5FAU", ErrSyntax, "'U' at position 25"},
		{"01ARZ3NDEKTSV4RRFFQ69G5FIV", ErrSyntax, "'I' at position 24"},
		{"01ARZ3NDEKTSV4RRFFQ69G5F-V", ErrSyntax, "'-' at position 24"},
		{"81ARZ3NDEKTSV4RRFFQ69G5FAV", ErrRange, "'8' exceeds '7'"},
	} {
		_, err := Parse(tc.in)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) || !strings.HasPrefix(err.Error(), "ulid: ") {
			t.Errorf("Parse(%q) = %v; want %v mentioning %q", tc.in, err, tc.want, tc.msg)
		}
	}
}

func TestMonotonicAcrossRollbackAndUnique(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	g, _ := New(Settings{Clock: clk})
	ctx := idtest.Context(t)
	var prev ULID
	for i := range 30000 {
		switch i {
		case 10000:
			clk.Advance(2 * time.Millisecond)
		case 20000:
			clk.Step(-time.Minute)
		}
		id, err := g.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if id.Compare(prev) <= 0 {
			t.Fatalf("ULID %d %s not after %s", i, id, prev)
		}
		prev = id
	}
	if a := g.Ahead(); a < 59*time.Second {
		t.Fatalf("Ahead = %v after a 1-minute step back", a)
	}
}

// TestEntropyOverflowWaits starts the entropy at its maximum: the next ULID
// in that millisecond must wait for the clock.
func TestEntropyOverflowWaits(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	g, _ := New(Settings{Clock: clk, Rand: bytes.NewReader(bytes.Repeat([]byte{0xff}, 4096))})
	ctx := idtest.Context(t)
	first, err := g.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if id := idtest.AfterWait(t, clk, time.Millisecond, func() (ULID, error) { return g.Next(ctx) }); id.Time() != first.Time()+1 {
		t.Fatalf("after overflow: %s at %d, want ms %d", id, id.Time(), first.Time()+1)
	}
	clk.Step(-10 * time.Second)
	if _, err := g.Next(ctx); !errors.Is(err, ErrExhausted) {
		t.Fatalf("overflow with the clock 10 s behind: %v", err)
	}
}

func TestSettingsAndErrors(t *testing.T) {
	t.Parallel()
	if _, err := New(Settings{MaxWait: -1}); !errors.Is(err, ErrSettings) {
		t.Errorf("MaxWait -1: %v", err)
	}
	g, _ := New(Settings{Rand: bytes.NewReader(nil)})
	if _, err := g.Next(idtest.Context(t)); err == nil {
		t.Error("empty Rand accepted")
	}
	g, _ = New(Settings{Clock: clock.NewFake(time.Unix(-5, 0))})
	if _, err := g.Next(idtest.Context(t)); !errors.Is(err, ErrTime) {
		t.Errorf("1969: %v", err)
	}
}

func TestUniqueUnderConcurrency(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	g, _ := New(Settings{Clock: clk})
	ctx := idtest.Context(t)
	idtest.Unique(t, 8, 20000, func(int, int) (ULID, error) {
		id, err := g.Next(ctx)
		clk.Advance(time.Microsecond)
		return id, err
	}, ULID.Compare)
}

func FuzzParse(f *testing.F) {
	f.Add("01ARZ3NDEKTSV4RRFFQ69G5FAV")
	f.Add("7ZZZZZZZZZZZZZZZZZZZZZZZZZ")
	f.Add("8ZZZZZZZZZZZZZZZZZZZZZZZZZ")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrLength) && !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrRange) {
				t.Fatalf("unclassified error %v", err)
			}
			if _, oerr := oklog.ParseStrict(s); oerr == nil {
				t.Fatalf("Parse rejects %q that oklog accepts: %v", s, err)
			}
			return
		}
		if !strings.EqualFold(id.String(), s) {
			t.Fatalf("round trip %q → %s", s, id)
		}
	})
}

func ExampleGenerator() {
	clk := clock.NewFake(time.UnixMilli(1469922850259))
	g, _ := New(Settings{Clock: clk, Rand: bytes.NewReader(make([]byte, 512))})
	a, _ := g.Next(context.Background())
	b, _ := g.Next(context.Background())
	fmt.Println(a)
	fmt.Println(b)
	// Output:
	// 01ARZ3NDEK0000000000000000
	// 01ARZ3NDEK0000000000000001
}

func BenchmarkNext(b *testing.B) {
	g, _ := New(Settings{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, _ = g.Next(ctx)
	}
}

func BenchmarkNextParallel(b *testing.B) {
	g, _ := New(Settings{})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = g.Next(ctx)
		}
	})
}
