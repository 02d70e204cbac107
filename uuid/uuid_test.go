package uuid

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	guuid "github.com/google/uuid"

	"github.com/idmint/idmint/testkit/idtest"
)

// RFC 9562 Appendix A example values (A.1 v1, A.3 v4, A.5 v6, A.6 v7).
// A.1 and A.5 encode 2022-02-22 14:22:22 -05:00 as 0x1EC9414C232AB00
// 100-ns ticks, clock sequence 0x33C8, node 0x9F6BDECED846; A.6 encodes the
// same instant as unix_ts_ms 0x017F22E279B0, rand_a 0xCC3, rand_b
// 0x18C4DC0C0C07398F.
const (
	rfcV1 = "C232AB00-9414-11EC-B3C8-9F6BDECED846"
	rfcV4 = "919108f7-52d1-4320-9bac-f847db4148a8"
	rfcV6 = "1EC9414C-232A-6B00-B3C8-9F6BDECED846"
	rfcV7 = "017F22E2-79B0-7CC3-98C4-DC0C0C07398F"

	rfcTicks = 0x1EC9414C232AB00
	rfcSeq   = 0x33C8
)

var (
	rfcNode = [6]byte{0x9F, 0x6B, 0xDE, 0xCE, 0xD8, 0x46}
	rfcTime = time.Date(2022, 2, 22, 19, 22, 22, 0, time.UTC)
)

func TestRFC9562Vectors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		version int
		built   UUID
	}{
		{rfcV1, 1, FromV1(rfcTicks, rfcSeq, rfcNode)},
		{rfcV4, 4, Nil},
		{rfcV6, 6, FromV6(rfcTicks, rfcSeq, rfcNode)},
		{rfcV7, 7, FromV7(0x017F22E279B0, 0xCC3, 0x18C4DC0C0C07398F)},
	} {
		t.Run(fmt.Sprintf("v%d", tc.version), func(t *testing.T) {
			u, err := ParseVersion(tc.in, tc.version)
			if err != nil {
				t.Fatal(err)
			}
			if got := u.String(); got != strings.ToLower(tc.in) {
				t.Errorf("String = %s", got)
			}
			if u.Variant() != VariantRFC9562 {
				t.Errorf("Variant = %v", u.Variant())
			}
			if tc.built != Nil && tc.built != u {
				t.Errorf("built from fields = %s, want %s", tc.built, u)
			}
			ts, ok := u.Time()
			if tc.version == 4 {
				if ok {
					t.Error("v4 reports a time")
				}
				return
			}
			if !ok || !ts.Equal(rfcTime) {
				t.Errorf("Time = %v, %v; want %v", ts, ok, rfcTime)
			}
			if tc.version == 7 {
				return
			}
			if ticks, _ := u.Ticks(); ticks != rfcTicks {
				t.Errorf("Ticks = %#x", ticks)
			}
			if seq, _ := u.ClockSeq(); seq != rfcSeq {
				t.Errorf("ClockSeq = %#x", seq)
			}
			if node, _ := u.Node(); node != rfcNode {
				t.Errorf("Node = %x", node)
			}
		})
	}
}

// rfcReader feeds the generators the random bits that reproduce the RFC
// examples: for V1/V6 the first two bytes become the clock sequence.
func rfcReader(first []byte) *bytes.Reader {
	return bytes.NewReader(append(first, make([]byte, 1024)...))
}

func TestGeneratorsReproduceRFCExamples(t *testing.T) {
	t.Parallel()
	ctx := idtest.Context(t)
	clk := fakeAt(rfcTime)
	v1, err := NewV1(Settings{Clock: clk, Rand: rfcReader([]byte{0x33, 0xC8}), Node: rfcNode[:]})
	if err != nil {
		t.Fatal(err)
	}
	if u, err := v1.Next(ctx); err != nil || u.String() != strings.ToLower(rfcV1) {
		t.Errorf("V1.Next = %s, %v; want %s", u, err, rfcV1)
	}
	v6, _ := NewV6(Settings{Clock: clk, Rand: rfcReader([]byte{0x33, 0xC8}), Node: rfcNode[:]})
	if u, err := v6.Next(ctx); err != nil || u.String() != strings.ToLower(rfcV6) {
		t.Errorf("V6.Next = %s, %v; want %s", u, err, rfcV6)
	}
	want4, _ := Parse(rfcV4)
	v4, _ := NewV4(Settings{Rand: rfcReader(bytes.Clone(want4[:]))})
	if u, err := v4.Next(ctx); err != nil || u != want4 {
		t.Errorf("V4.Next = %s, %v; want %s", u, err, rfcV4)
	}
}

func TestParseForms(t *testing.T) {
	t.Parallel()
	want, _ := Parse(rfcV7)
	for _, in := range []string{
		"017f22e2-79b0-7cc3-98c4-dc0c0c07398f",
		"017F22E279B07CC398C4DC0C0C07398F",
		"{017f22e2-79b0-7cc3-98c4-dc0c0c07398f}",
		"urn:uuid:017f22e2-79b0-7cc3-98c4-dc0c0c07398f",
		"URN:UUID:017f22e2-79b0-7cc3-98c4-dc0c0c07398f",
	} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %s, %v", in, got, err)
		}
	}
	var u UUID
	if err := u.UnmarshalText([]byte(rfcV1)); err != nil || u.Version() != 1 {
		t.Errorf("UnmarshalText = %v, %s", err, u)
	}
	if b, _ := u.MarshalText(); string(b) != strings.ToLower(rfcV1) {
		t.Errorf("MarshalText = %s", b)
	}
	if _, err := FromBytes(u[:15]); !errors.Is(err, ErrLength) {
		t.Errorf("FromBytes(15) = %v", err)
	}
	if v, err := FromBytes(u[:]); err != nil || v != u {
		t.Errorf("FromBytes(16) = %v", err)
	}
	if Max.Variant() != VariantFuture || Nil.Variant() != VariantNCS {
		t.Error("Nil/Max variants")
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		version int // 0: plain Parse
		want    error
		msg     string // substring of the error message
	}{
		{"", 0, ErrLength, "0 characters"},
		{"017f22e2-79b0-7cc3-98c4-dc0c0c07398", 0, ErrLength, "35 characters"},
		{"017f22e2-79b0-7cc3-98c4-dc0c0c07398ff", 0, ErrLength, "37 characters"},
		{"017f22e2-79b0-7cc3-98c4-dc0c0c07398g", 0, ErrSyntax, `'g' at position 35`},
		{"017f22e2x79b0-7cc3-98c4-dc0c0c07398f", 0, ErrSyntax, "want '-' at position 8"},
		{"017f22e2-79b0-7cc3-98c4-dc0c0c0739-f", 0, ErrSyntax, `'-' at position 34`},
		{"017F22E279B07CC398C4DC0C0C07398Z", 0, ErrSyntax, `'Z' at position 31`},
		{"(017f22e2-79b0-7cc3-98c4-dc0c0c07398f)", 0, ErrSyntax, "braces"},
		{"{017f22e2-79b0-7cc3-98c4-dc0c0c07398g}", 0, ErrSyntax, "position 36"},
		{"urx:uuid:017f22e2-79b0-7cc3-98c4-dc0c0c07398f", 0, ErrSyntax, "urn:uuid:"},
		{rfcV7, 4, ErrVersion, "version nibble is 7, want 4"},
		{"017f22e2-79b0-7cc3-c8c4-dc0c0c07398f", 7, ErrVariant, "Microsoft"},
		{"017f22e2-79b0-7cc3-08c4-dc0c0c07398f", 7, ErrVariant, "NCS"},
	} {
		var err error
		if tc.version == 0 {
			_, err = Parse(tc.in)
		} else {
			_, err = ParseVersion(tc.in, tc.version)
		}
		if !errors.Is(err, tc.want) || !strings.Contains(fmt.Sprint(err), tc.msg) {
			t.Errorf("parse %q = %v; want %v mentioning %q", tc.in, err, tc.want, tc.msg)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "uuid: ") {
			t.Errorf("error %q lacks the package prefix", err)
		}
	}
}

// TestMySQLSwap checks the example of the MySQL 8.0 manual for
// UUID_TO_BIN(@uuid, 1) and that swapped v1 IDs sort in time order.
func TestMySQLSwap(t *testing.T) {
	t.Parallel()
	u, _ := Parse("6ccd780c-baba-1026-9564-5b8c656024db")
	b := ToSwapped(u)
	if got := fmt.Sprintf("%X", b); got != "1026BABA6CCD780C95645B8C656024DB" {
		t.Fatalf("ToSwapped = %s", got)
	}
	if FromSwapped(b) != u {
		t.Fatal("FromSwapped does not invert ToSwapped")
	}
	clk := fakeAt(rfcTime)
	g, _ := NewV1(Settings{Clock: clk})
	var prev [16]byte
	ctx := idtest.Context(t)
	for i := range 2000 {
		// Cross a time_low wrap (2^32 ticks ≈ 7 minutes) half way.
		if i == 1000 {
			clk.Advance(10 * time.Minute)
		}
		clk.Advance(time.Microsecond)
		id, err := g.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s := ToSwapped(id)
		if i > 0 && bytes.Compare(prev[:], s[:]) >= 0 {
			t.Fatalf("swapped v1 IDs out of order at %d", i)
		}
		prev = s
	}
}

func TestCompare(t *testing.T) {
	t.Parallel()
	a := FromV7(1, 0, 0)
	b := FromV7(1, 0, 1)
	c := FromV7(2, 0, 0)
	if a.Compare(b) != -1 || b.Compare(a) != 1 || a.Compare(a) != 0 || b.Compare(c) != -1 {
		t.Fatal("Compare disagrees with byte order")
	}
}

// FuzzParse checks that Parse never panics, that what it accepts it formats
// back canonically, and that github.com/google/uuid agrees on every input it
// accepts.
func FuzzParse(f *testing.F) {
	for _, s := range []string{rfcV1, rfcV4, rfcV6, rfcV7, "{" + rfcV7 + "}", "urn:uuid:" + rfcV1, strings.ReplaceAll(rfcV4, "-", ""), "", "zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrLength) && !errors.Is(err, ErrSyntax) {
				t.Fatalf("Parse(%q) error %v wraps no sentinel", s, err)
			}
			return
		}
		g, gerr := guuid.Parse(s)
		if gerr != nil || [16]byte(g) != [16]byte(u) {
			t.Fatalf("Parse(%q) = %s but google/uuid = %v, %v", s, u, g, gerr)
		}
		back, err := Parse(u.String())
		if err != nil || back != u || u.String() != g.String() {
			t.Fatalf("round trip of %q: %s, %v", s, back, err)
		}
		if FromSwapped(ToSwapped(u)) != u {
			t.Fatal("swap round trip")
		}
	})
}

func ExampleParse() {
	u, err := Parse("017F22E2-79B0-7CC3-98C4-DC0C0C07398F") // RFC 9562 A.6
	if err != nil {
		panic(err)
	}
	ts, _ := u.Time()
	fmt.Println(u, u.Version(), u.Variant(), ts)
	// Output: 017f22e2-79b0-7cc3-98c4-dc0c0c07398f 7 RFC 9562 2022-02-22 19:22:22 +0000 UTC
}

func ExampleParseVersion() {
	_, err := ParseVersion("919108f7-52d1-4320-9bac-f847db4148a8", 7)
	fmt.Println(err)
	// Output: uuid: wrong version: version nibble is 4, want 7 (in "919108f7-52d1-4320-9bac-f847db4148a8")
}

func ExampleToSwapped() {
	u, _ := Parse("6ccd780c-baba-1026-9564-5b8c656024db")
	b := ToSwapped(u) // MySQL UUID_TO_BIN(u, 1)
	fmt.Printf("%X\n%s\n", b, FromSwapped(b))
	// Output:
	// 1026BABA6CCD780C95645B8C656024DB
	// 6ccd780c-baba-1026-9564-5b8c656024db
}
