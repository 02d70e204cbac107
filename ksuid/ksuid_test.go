package ksuid

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	sk "github.com/segmentio/ksuid"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/testkit/idtest"
)

// 0ujtsYcgvSTl8PAuAdqWYSMnLOv is the example of segmentio/ksuid's README.
const readme = "0ujtsYcgvSTl8PAuAdqWYSMnLOv"

func TestParse(t *testing.T) {
	t.Parallel()
	id, err := Parse(readme)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := sk.Parse(readme)
	if id != want || id.String() != readme {
		t.Fatalf("Parse = %s, segmentio = %s", id, want)
	}
	if _, err := Parse(maxValue); err != nil {
		t.Errorf("max value: %v", err)
	}
	for _, tc := range []struct {
		in   string
		want error
		msg  string
	}{
		{"", ErrLength, "0 characters"},
		{readme[:26], ErrLength, "26 characters"},
		{"0ujtsYcgvSTl8PAuAdqWYSMnLO-", ErrSyntax, "'-' at position 26"},
		{"aWgEPTl1tmebfsQzFP4bxwgy80W", ErrRange, "exceeds"},
		{"zzzzzzzzzzzzzzzzzzzzzzzzzzz", ErrRange, "exceeds"},
	} {
		_, err := Parse(tc.in)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) || !strings.HasPrefix(err.Error(), "ksuid: ") {
			t.Errorf("Parse(%q) = %v; want %v mentioning %q", tc.in, err, tc.want, tc.msg)
		}
	}
}

func TestNextStampsAndErrors(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	g, _ := New(Settings{Clock: clock.NewFake(at), Rand: bytes.NewReader(bytes.Repeat([]byte{7}, 512))})
	id, err := g.Next(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !id.Time().Equal(at) || !bytes.Equal(id.Payload(), bytes.Repeat([]byte{7}, 16)) {
		t.Fatalf("id %s: time %v payload %x", id, id.Time(), id.Payload())
	}
	g, _ = New(Settings{Clock: clock.NewFake(time.Date(2010, 1, 1, 0, 0, 0, 0, time.UTC))})
	if _, err := g.Next(t.Context()); !errors.Is(err, ErrTime) {
		t.Errorf("2010: %v", err)
	}
	g, _ = New(Settings{Rand: bytes.NewReader(nil)})
	if _, err := g.Next(t.Context()); err == nil {
		t.Error("empty Rand accepted")
	}
}

func TestUniqueUnderConcurrency(t *testing.T) {
	t.Parallel()
	g, _ := New(Settings{Clock: clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))})
	idtest.Unique(t, 8, 20000, func(int, int) (KSUID, error) { return g.Next(t.Context()) }, nil)
}

func FuzzParse(f *testing.F) {
	f.Add(readme)
	f.Add(maxValue)
	f.Add("000000000000000000000000000")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrLength) && !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrRange) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if id.String() != s {
			t.Fatalf("round trip %q → %s", s, id)
		}
	})
}

func ExampleParse() {
	id, _ := Parse("0ujtsYcgvSTl8PAuAdqWYSMnLOv")
	fmt.Println(id.Time().UTC())
	// Output: 2017-10-10 04:00:47 +0000 UTC
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
