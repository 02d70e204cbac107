package objectid

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/testkit/idtest"
)

// 507f1f77bcf86cd799439011 is the example ObjectID of the MongoDB manual's
// ObjectId() reference page; its timestamp 0x507f1f77 is 1350508407 s,
// 2012-10-17T21:13:27Z.
func TestParseManualExample(t *testing.T) {
	t.Parallel()
	id, err := Parse("507F1F77BCF86CD799439011")
	if err != nil {
		t.Fatal(err)
	}
	if id.String() != "507f1f77bcf86cd799439011" {
		t.Errorf("String = %s", id)
	}
	if want := time.Date(2012, 10, 17, 21, 13, 27, 0, time.UTC); !id.Time().Equal(want) {
		t.Errorf("Time = %v, want %v", id.Time(), want)
	}
	if id.Machine() != [3]byte{0xbc, 0xf8, 0x6c} || id.PID() != 0xd799 || id.Counter() != 0x439011 {
		t.Errorf("legacy parts = %x %x %x", id.Machine(), id.PID(), id.Counter())
	}
	if id.Random() != [5]byte{0xbc, 0xf8, 0x6c, 0xd7, 0x99} {
		t.Errorf("Random = %x", id.Random())
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
		{"507f1f77bcf86cd79943901", ErrLength, "23 characters"},
		{"507f1f77bcf86cd7994390111", ErrLength, "25 characters"},
		{"507f1f77bcf86cd79943901g", ErrSyntax, "'g' at position 23"},
		{"x07f1f77bcf86cd799439011", ErrSyntax, "'x' at position 0"},
	} {
		_, err := Parse(tc.in)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) || !strings.HasPrefix(err.Error(), "objectid: ") {
			t.Errorf("Parse(%q) = %v; want %v mentioning %q", tc.in, err, tc.want, tc.msg)
		}
	}
	if _, err := FromBytes(make([]byte, 11)); !errors.Is(err, ErrLength) {
		t.Errorf("FromBytes(11) = %v", err)
	}
	if _, err := New(Settings{MaxWait: -1}); !errors.Is(err, ErrSettings) {
		t.Errorf("New(MaxWait -1) = %v", err)
	}
	if _, err := New(Settings{Rand: bytes.NewReader(nil)}); err == nil {
		t.Error("New with empty Rand succeeded")
	}
}

func TestUniqueUnderConcurrency(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	g, err := New(Settings{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := idtest.Context(t)
	out := idtest.Unique(t, 8, 20000, func(_, i int) (ID, error) {
		id, err := g.Next(ctx)
		if i%5000 == 0 {
			clk.Advance(time.Second)
		}
		return id, err
	}, nil)
	for _, ids := range out {
		for _, id := range ids {
			if id.Random() != out[0][0].Random() {
				t.Fatal("random process value changed within one generator")
			}
		}
	}
}

func TestTextRoundTrip(t *testing.T) {
	t.Parallel()
	g, _ := New(Settings{})
	id, err := g.Next(idtest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := id.MarshalText()
	var back ID
	if err := back.UnmarshalText(b); err != nil || back != id {
		t.Fatalf("round trip: %v %s %s", err, back, id)
	}
	if g.Ahead() != 0 {
		t.Fatalf("Ahead = %v on a real clock", g.Ahead())
	}
}

func FuzzParse(f *testing.F) {
	f.Add("507f1f77bcf86cd799439011")
	f.Add("507F1F77BCF86CD79943901g")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrLength) && !errors.Is(err, ErrSyntax) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if !strings.EqualFold(id.String(), s) {
			t.Fatalf("round trip %q → %s", s, id)
		}
		if back, err := FromBytes(id[:]); err != nil || back != id {
			t.Fatal("FromBytes round trip")
		}
	})
}

func ExampleParse() {
	id, _ := Parse("507f1f77bcf86cd799439011")
	fmt.Println(id.Time(), id.Counter())
	// Output: 2012-10-17 21:13:27 +0000 UTC 4427793
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

// capLimit is the per-second budget TestPerSecondCap sets: small, so the
// race detector does not issue 2^24 IDs to prove the cap (capfull_test.go
// issues all 2^24 in builds without it).
const capLimit = 1 << 12

// TestPerSecondCap: a second's whole budget within one frozen second, no
// counter value twice; the next one waits for the next second (here: fails,
// the second being further away than MaxWait) instead of wrapping the
// counter.
func TestPerSecondCap(t *testing.T) {
	t.Parallel()
	testPerSecondCap(t, capLimit)
}

// testPerSecondCap runs the cap check with the budget lowered to limit, or
// at the real 2^24 when limit is 0.
func testPerSecondCap(t *testing.T, limit uint32) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 500_000_000, time.UTC)
	clk := clock.NewFake(at)
	g, err := New(Settings{Clock: clk, MaxWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	n := 1 << 24
	if limit != 0 {
		g.g.SetLimit(limit)
		n = int(limit)
	}
	idtest.PerSecondCap(t, clk, at, n, func(ctx context.Context) ([12]byte, error) {
		id, err := g.Next(ctx)
		return id, err
	}, ErrExhausted)
}
