package ordernum

import (
	"bytes"
	"errors"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

var testDay = time.Date(2025, 8, 17, 15, 4, 5, 0, time.UTC)

// testKey derives a fixed AES-128 key from a version number.
func testKey(t testing.TB, version int) Key {
	t.Helper()
	m := make([]byte, 16)
	for i := range m {
		m[i] = byte(version*31 + i*7 + 1)
	}
	k, err := NewKey(version, m)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestEncodeLayout(t *testing.T) {
	t.Parallel()
	f := MustParseFormat("length=18,prefix=88,date=yyMMdd,version")
	c, err := New(f, testKey(t, 3))
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Encode(42, testDay)
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 18 || !strings.HasPrefix(s, "883250817") {
		t.Fatalf("Encode = %q, want 18 digits starting 88 (prefix) 3 (version) 250817 (date)", s)
	}
	p, err := c.Decode(s)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Parts{Seq: 42, Date: time.Date(2025, 8, 17, 0, 0, 0, 0, time.UTC), Version: 3}); p != want {
		t.Errorf("Decode = %+v, want %+v", p, want)
	}
	// The calendar date is the one in day's own location.
	tokyo := time.FixedZone("JST", 9*3600)
	s2, _ := c.Encode(42, time.Date(2025, 8, 17, 23, 0, 0, 0, time.UTC).In(tokyo))
	if s2[3:9] != "250818" {
		t.Errorf("Encode in JST = %q, want date 250818", s2)
	}
	// The day tweaks FF1: the same sequence gives unrelated bodies on two days.
	if s[9:17] == s2[9:17] {
		t.Errorf("same body %q on two days", s[9:17])
	}
}

// TestBijectionWholeDomain encodes every sequence number of a 6-digit body
// (10^6 values), checks that all order numbers are distinct and that each
// decodes back. Workers split the domain; every order number is collected
// and checked for duplicates in one place.
func TestBijectionWholeDomain(t *testing.T) {
	t.Parallel()
	f := MustParseFormat("length=7") // 6-digit body + Damm check
	c, err := New(f, testKey(t, 0))
	if err != nil {
		t.Fatal(err)
	}
	n := f.Capacity()
	issued := make([]uint32, n) // issued[seq] = the 7-digit order number as an integer
	workers := uint64(runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 0, 8)
			for seq := w * n / workers; seq < (w+1)*n/workers; seq++ {
				b, err := c.AppendEncode(buf[:0], seq, time.Time{})
				if err != nil {
					t.Errorf("Encode(%d): %v", seq, err)
					return
				}
				v := uint32(0)
				for _, ch := range b {
					v = v*10 + uint32(ch-'0')
				}
				issued[seq] = v
				p, err := c.Decode(string(b))
				if err != nil || p.Seq != seq {
					t.Errorf("Decode(%s) = %+v, %v; want seq %d", b, p, err, seq)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	seen := make([]bool, 10_000_000)
	for seq, v := range issued {
		if seen[v] {
			t.Fatalf("seq %d gives %07d, already issued", seq, v)
		}
		seen[v] = true
	}
	if _, err := c.Encode(n, time.Time{}); !errors.Is(err, ErrCapacity) {
		t.Fatalf("Encode(capacity) = %v, want ErrCapacity", err)
	}
}

// TestUnguessable measures what an outsider sees from consecutive sequence
// numbers: every body position's digit is uniform (chi-square), consecutive
// numbers are ordered half of the time, and neighbouring values are
// uncorrelated.
func TestUnguessable(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{"length=13", "alphabet=base32,length=11,date=yyMMdd"} {
		f := MustParseFormat(spec)
		c, err := New(f, testKey(t, 5))
		if err != nil {
			t.Fatal(err)
		}
		const N = 20000
		radix := f.Radix()
		body := f.BodyLength()
		off := f.Length() - f.checkLen - body
		counts := make([][]int, body)
		for i := range counts {
			counts[i] = make([]int, radix)
		}
		var prev string
		ordered := 0
		vals := make([]float64, N)
		for seq := range uint64(N) {
			s, err := c.Encode(seq, testDay)
			if err != nil {
				t.Fatal(err)
			}
			b := s[off : off+body]
			v := 0.0
			for i := 0; i < body; i++ {
				d := int(f.a.valueOf[b[i]])
				counts[i][d]++
				v = v*float64(radix) + float64(d)
			}
			vals[seq] = v / float64(f.Capacity())
			if seq > 0 && b > prev {
				ordered++
			}
			prev = b
		}
		// Chi-square with radix-1 degrees of freedom; critical value at
		// p = 0.0001 by the Wilson–Hilferty approximation.
		df := float64(radix - 1)
		crit := df * math.Pow(1-2/(9*df)+3.719*math.Sqrt(2/(9*df)), 3)
		expect := float64(N) / float64(radix)
		for i, cs := range counts {
			chi := 0.0
			for _, n := range cs {
				chi += (float64(n) - expect) * (float64(n) - expect) / expect
			}
			if chi > crit {
				t.Errorf("%s: body position %d: chi-square %.1f > %.1f (counts %v)", spec, i, chi, crit, cs)
			}
		}
		// Ordered pairs: binomial(N-1, 1/2); allow 4.5 standard deviations.
		frac := float64(ordered) / (N - 1)
		if sd := 0.5 / math.Sqrt(N-1); math.Abs(frac-0.5) > 4.5*sd {
			t.Errorf("%s: consecutive numbers increase %.4f of the time, want 0.5 ± %.4f", spec, frac, 4.5*sd)
		}
		// Lag-1 correlation of the bodies as fractions of the domain.
		var mean float64
		for _, v := range vals {
			mean += v
		}
		mean /= N
		var num, den float64
		for i := range vals {
			den += (vals[i] - mean) * (vals[i] - mean)
			if i > 0 {
				num += (vals[i] - mean) * (vals[i-1] - mean)
			}
		}
		if r := num / den; math.Abs(r) > 4.5/math.Sqrt(N) {
			t.Errorf("%s: lag-1 correlation %.4f, want |r| < %.4f", spec, r, 4.5/math.Sqrt(N))
		}
		t.Logf("%s: increasing %.4f of the time", spec, frac)
	}
}

func TestKeyRotation(t *testing.T) {
	t.Parallel()
	f := MustParseFormat("alphabet=base32,length=13,version")
	old, err := New(f, testKey(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	cur, err := New(f, testKey(t, 2), testKey(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	for seq := range uint64(200) {
		a, _ := old.Encode(seq, testDay)
		b, _ := cur.Encode(seq, testDay)
		if a == b {
			t.Fatalf("seq %d: same number %s under two keys", seq, a)
		}
		for _, s := range []string{a, b} {
			p, err := cur.Decode(s)
			if err != nil || p.Seq != seq {
				t.Fatalf("Decode(%s) = %+v, %v; want seq %d", s, p, err, seq)
			}
		}
		if p, _ := cur.Decode(a); p.Version != 1 {
			t.Fatalf("old number decoded as version %d", p.Version)
		}
		if _, err := old.Decode(b); !errors.Is(err, ErrVersion) {
			t.Fatalf("old codec decoding new number: %v, want ErrVersion", err)
		}
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	dec := MustParseFormat("length=16,version")
	plain := MustParseFormat("length=16")
	tests := []struct {
		name  string
		f     Format
		keys  []Key
		want  error
		field string
	}{
		{"zero format", Format{}, []Key{testKey(t, 0)}, ErrConfig, "format"},
		{"zero key", dec, []Key{{}}, ErrKey, "key"},
		{"version too big for decimal", dec, []Key{testKey(t, 10)}, ErrKey, "version"},
		{"duplicate version", dec, []Key{testKey(t, 1), testKey(t, 1)}, ErrKey, "version"},
		{"two keys, no version char", plain, []Key{testKey(t, 1), testKey(t, 2)}, ErrKey, "version"},
	}
	for _, tt := range tests {
		_, err := New(tt.f, tt.keys[0], tt.keys[1:]...)
		var fe *FieldError
		if !errors.Is(err, tt.want) || !errors.As(err, &fe) || fe.Field != tt.field {
			t.Errorf("%s: New = %v, want %v naming %q", tt.name, err, tt.want, tt.field)
		}
	}
}

func TestDateRange(t *testing.T) {
	t.Parallel()
	c, _ := New(MustParseFormat("length=16,date=yyMMdd"), testKey(t, 0))
	for _, d := range []time.Time{time.Date(1999, 12, 31, 0, 0, 0, 0, time.UTC), time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC), {}} {
		if _, err := c.Encode(1, d); !errors.Is(err, ErrDate) {
			t.Errorf("Encode(%v) = %v, want ErrDate", d, err)
		}
	}
	buf := []byte("keep")
	if b, err := c.AppendEncode(buf, 1, time.Time{}); err == nil || string(b) != "keep" {
		t.Errorf("AppendEncode on error = %q, %v; want dst unchanged", b, err)
	}
	c8, _ := New(MustParseFormat("length=20,date=yyyyMMdd"), testKey(t, 0))
	for _, d := range []time.Time{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)} {
		s, err := c8.Encode(77, d)
		if err != nil {
			t.Fatalf("Encode(%v): %v", d, err)
		}
		p, err := c8.Decode(s)
		if err != nil || p.Seq != 77 || !p.Date.Equal(d) {
			t.Errorf("Decode(%s) = %+v, %v", s, p, err)
		}
	}
}

// fuzzFormats are full-size formats for the round-trip fuzz target.
var fuzzFormats = []string{
	"length=16",
	"length=20",
	"length=16,check=luhn,prefix=88",
	"length=20,prefix=9,date=yyMMdd,version",
	"length=22,date=yyyyMMdd,version,check=none",
	"alphabet=base32,length=13",
	"alphabet=base32,length=16,prefix=KX,date=yyMMdd,version",
	"alphabet=base32,length=12,check=none",
}

func FuzzRoundTrip(f *testing.F) {
	f.Add(uint8(0), uint64(0), int64(0), uint8(0))
	f.Add(uint8(3), uint64(1)<<62, int64(1755400000), uint8(7))
	f.Add(uint8(6), ^uint64(0), int64(-1), uint8(31))
	codecs := make([]*Codec, len(fuzzFormats))
	for i, spec := range fuzzFormats {
		fm := MustParseFormat(spec)
		var err error
		if codecs[i], err = New(fm, testKey(f, 1), testKey(f, 0)); err != nil && fm.Versions() > 1 {
			f.Fatal(err)
		}
		if codecs[i] == nil {
			codecs[i], _ = New(fm, testKey(f, 1))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, seq uint64, unix int64, sep uint8) {
		c := codecs[int(which)%len(codecs)]
		fm := c.Format()
		seq %= fm.Capacity()
		day := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(uint64(unix)%(36500*86400)) * time.Second) // 2000–2099
		s, err := c.Encode(seq, day)
		if err != nil {
			t.Fatalf("%s: Encode(%d, %v): %v", fm, seq, day, err)
		}
		if len(s) != fm.Length() {
			t.Fatalf("%s: %q has length %d", fm, s, len(s))
		}
		if err := fm.Validate(s); err != nil {
			t.Fatalf("%s: Validate(%q): %v", fm, s, err)
		}
		typed := strings.ToLower(s)
		if k := int(sep) % len(s); k > 0 {
			typed = typed[:k] + "-" + typed[k:]
		}
		p, err := c.Decode(typed)
		if err != nil || p.Seq != seq {
			t.Fatalf("%s: Decode(%q) = %+v, %v; want seq %d", fm, typed, p, err, seq)
		}
		if fm.HasDate() {
			y, m, d := day.Date()
			if p.Date != time.Date(y, m, d, 0, 0, 0, 0, time.UTC) {
				t.Fatalf("%s: date %v, want %v", fm, p.Date, day)
			}
		}
		b, err := c.AppendEncode(nil, seq, day)
		if err != nil || !bytes.Equal(b, []byte(s)) {
			t.Fatalf("AppendEncode = %q, %v; Encode gave %q", b, err, s)
		}
	})
}

// FuzzDecode feeds arbitrary text to Decode: it never panics, errors are
// *FieldErrors, and whatever decodes re-encodes to the normalised input.
func FuzzDecode(f *testing.F) {
	c, err := New(MustParseFormat("alphabet=base32,length=16,prefix=KX,date=yyMMdd,version"), testKey(f, 1), testKey(f, 0))
	if err != nil {
		f.Fatal(err)
	}
	good, _ := c.Encode(12345, testDay)
	f.Add(good)
	f.Add(strings.ToLower(good))
	f.Add("KX1-250817-ABCDEFG-*")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := c.Decode(s)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Decode(%q) error %v is not a *FieldError", s, err)
			}
			if c.Format().Validate(s) == nil && !errors.Is(err, ErrVersion) {
				t.Fatalf("Validate accepts %q but Decode says %v", s, err)
			}
			return
		}
		n, err := c.Format().Normalize(s)
		if err != nil {
			t.Fatalf("Decode accepts %q but Normalize says %v", s, err)
		}
		k := testKey(t, p.Version)
		re, err := New(c.Format(), k)
		if err != nil {
			t.Fatal(err)
		}
		back, err := re.Encode(p.Seq, p.Date)
		if err != nil || back != n {
			t.Fatalf("Decode(%q) = %+v re-encodes to %q, %v; want %q", s, p, back, err, n)
		}
	})
}
