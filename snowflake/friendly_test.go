package snowflake

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestFriendlyExamples(t *testing.T) {
	t.Parallel()
	tw, _ := Lookup("twitter")
	js, _ := Lookup("jssafe")
	sf, _ := Lookup("simpleflake")
	at := time.Date(2026, 12, 1, 9, 59, 59, 123_000_000, time.UTC)
	for _, c := range []struct {
		l       Layout
		node    map[string]int64
		seq     int64
		at      time.Time
		want    string
		pattern string
	}{
		{tw, map[string]int64{"datacenter": 1, "worker": 3}, 17, at, "20261201095959123-1-3-17", "YYYYMMDDhhmmssSSS-datacenter-worker-seq"},
		{js, map[string]int64{"worker": 3}, 17, at.Add(-3 * time.Millisecond), "20261201095959120-3-17", "YYYYMMDDhhmmssSSS-worker-seq"},
		{sf, nil, 4194303, at, "20261201095959123-4194303", "YYYYMMDDhhmmssSSS-seq"},
		{MustParseLayout("time=50:1us,worker=3,seq=10,epoch=2020-01-01"), map[string]int64{"worker": 7}, 0, at.Add(456 * time.Microsecond),
			"20261201095959123456-7-0", "YYYYMMDDhhmmssSSSSSS-worker-seq"},
	} {
		id, err := Compose(c.l, Parts{Time: c.at, Node: c.node, Sequence: c.seq})
		if err != nil {
			t.Fatal(err)
		}
		got, err := FormatFriendly(c.l, id)
		if err != nil || got != c.want {
			t.Errorf("%s: FormatFriendly(%d) = %q, %v; want %q", c.l.Name(), id, got, err, c.want)
		}
		back, err := ParseFriendly(c.l, c.want)
		if err != nil || back != id {
			t.Errorf("%s: ParseFriendly(%q) = %d, %v; want %d", c.l.Name(), c.want, back, err, id)
		}
		if p := FriendlyPattern(c.l); p != c.pattern {
			t.Errorf("%s: FriendlyPattern = %q, want %q", c.l.Name(), p, c.pattern)
		}
		if !IsFriendly(c.want) {
			t.Errorf("IsFriendly(%q) = false", c.want)
		}
	}
}

// TestFriendlyRoundTrip: for random IDs of every built-in layout (and a
// layout with nanosecond ticks), FormatFriendly then ParseFriendly gives the
// same ID back.
func TestFriendlyRoundTrip(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	layouts := append(Layouts(), MustParseLayout("time=50:7ns,shard=4,seq=8,epoch=2001-02-03T04:05:06.000000789Z"))
	for _, l := range layouts {
		for range 2000 {
			id := int64(rng.Uint64() >> uint(64-l.Bits()))
			s, err := FormatFriendly(l, id)
			if err != nil {
				t.Fatalf("%s: FormatFriendly(%d): %v", l.Name(), id, err)
			}
			back, err := ParseFriendly(l, s)
			if err != nil || back != id {
				t.Fatalf("%s: ParseFriendly(%q) = %d, %v; want %d", l.Name(), s, back, err, id)
			}
		}
	}
}

func TestParseFriendlyErrors(t *testing.T) {
	t.Parallel()
	tw, _ := Lookup("twitter")
	js, _ := Lookup("jssafe")
	for _, c := range []struct {
		l          Layout
		in, field  string
		wantReason string
	}{
		{tw, "20261201095959123-3-17", "friendly id", "has 3 dash-separated parts"},
		{tw, "20261201095959123-1-3-17-5", "friendly id", "has 5"},
		{tw, "2026120109595912-1-3-17", "time", "must be 17 digits"},
		{tw, "20261301095959123-1-3-17", "time", "not a valid date"},
		{tw, "20001201095959123-1-3-17", "time", "outside layout twitter's range"},
		{js, "20261201095959123-3-17", "time", "not the start of a tick"},
		{tw, "20261201095959123-01-3-17", "datacenter", "leading zeros"},
		{tw, "20261201095959123-1-+3-17", "worker", "without sign"},
		{tw, "20261201095959123-1-3-", "seq", "without sign"},
		{tw, "20261201095959123-1-3-4096", "seq", "does not fit 12 bits"},
		{tw, "20261201095959123-32-3-1", "datacenter", "does not fit 5 bits"},
		{tw, "20261201095959123-1-3-99999999999999999999", "seq", "out of range"},
	} {
		_, err := ParseFriendly(c.l, c.in)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(fe.Reason, c.wantReason) {
			t.Errorf("ParseFriendly(%s, %q) = %v; want field %q, reason containing %q", c.l.Name(), c.in, err, c.field, c.wantReason)
			continue
		}
		if !errors.Is(err, ErrInvalidID) && !errors.Is(err, ErrInvalidNode) {
			t.Errorf("ParseFriendly(%q) error %v wraps neither ErrInvalidID nor ErrInvalidNode", c.in, err)
		}
	}
	if _, err := ParseFriendly(Layout{}, "20261201095959123-1"); !errors.Is(err, ErrInvalidLayout) {
		t.Errorf("zero layout: %v", err)
	}
	for _, s := range []string{"1234567890123456", "0190f6a8-0000-7000-8000-000000000000", "20261201095959123", "2026120109595912a-1-2"} {
		if IsFriendly(s) {
			t.Errorf("IsFriendly(%q) = true", s)
		}
	}
}

// FuzzParseFriendly: ParseFriendly never panics, and whatever it accepts
// formats back to the same text (the form is one to one).
func FuzzParseFriendly(f *testing.F) {
	f.Add("20261201095959123-1-3-17")
	f.Add("20261201095959123-1-3-4095")
	f.Add("99991231235959999-31-31-0")
	f.Add("2026120109595912-1")
	tw, _ := Lookup("twitter")
	js, _ := Lookup("jssafe")
	f.Fuzz(func(t *testing.T, s string) {
		for _, l := range []Layout{tw, js} {
			id, err := ParseFriendly(l, s)
			if err != nil {
				continue
			}
			back, err := FormatFriendly(l, id)
			if err != nil || back != s {
				t.Fatalf("%s: ParseFriendly(%q) = %d, formats back as %q, %v", l.Name(), s, id, back, err)
			}
		}
	})
}
