package ff1

import (
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// nistSamples are the nine FF1 examples of NIST's "FF1samples.pdf"
// (Cryptographic Standards and Guidelines, Examples with Intermediate
// Values, https://csrc.nist.gov/CSRC/media/Projects/Cryptographic-Standards-and-Guidelines/documents/examples/FF1samples.pdf):
// samples 1–3 AES-128, 4–6 AES-192, 7–9 AES-256; radix 10 with an empty and
// a 10-byte tweak, radix 36 with an 11-byte tweak.
var nistSamples = []struct {
	name, key, tweak string
	radix            int
	pt, ct           string
}{
	{"sample1", "2B7E151628AED2A6ABF7158809CF4F3C", "", 10, "0123456789", "2433477484"},
	{"sample2", "2B7E151628AED2A6ABF7158809CF4F3C", "39383736353433323130", 10, "0123456789", "6124200773"},
	{"sample3", "2B7E151628AED2A6ABF7158809CF4F3C", "3737373770717273373737", 36, "0123456789abcdefghi", "a9tv40mll9kdu509eum"},
	{"sample4", "2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F", "", 10, "0123456789", "2830668132"},
	{"sample5", "2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F", "39383736353433323130", 10, "0123456789", "2496655549"},
	{"sample6", "2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F", "3737373770717273373737", 36, "0123456789abcdefghi", "xbj3kv35jrawxv32ysr"},
	{"sample7", "2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F7F036D6F04FC6A94", "", 10, "0123456789", "6657667009"},
	{"sample8", "2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F7F036D6F04FC6A94", "39383736353433323130", 10, "0123456789", "1001623463"},
	{"sample9", "2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F7F036D6F04FC6A94", "3737373770717273373737", 36, "0123456789abcdefghi", "xs8a0azh2avyalyzuwd"},
}

const digits36 = "0123456789abcdefghijklmnopqrstuvwxyz"

func numerals(s string) []uint16 {
	x := make([]uint16, len(s))
	for i := range s {
		x[i] = uint16(strings.IndexByte(digits36, s[i]))
	}
	return x
}

func text(x []uint16) string {
	var b strings.Builder
	for _, d := range x {
		b.WriteByte(digits36[d])
	}
	return b.String()
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNISTSamples(t *testing.T) {
	t.Parallel()
	for _, s := range nistSamples {
		t.Run(s.name, func(t *testing.T) {
			c, err := New(mustHex(t, s.key), s.radix)
			if err != nil {
				t.Fatal(err)
			}
			tweak := mustHex(t, s.tweak)
			pt := numerals(s.pt)

			got := make([]uint16, len(pt))
			if err := c.Encrypt(got, pt, tweak); err != nil {
				t.Fatal(err)
			}
			if text(got) != s.ct {
				t.Errorf("Encrypt = %s, want %s", text(got), s.ct)
			}
			back := make([]uint16, len(pt))
			if err := c.Decrypt(back, got, tweak); err != nil {
				t.Fatal(err)
			}
			if text(back) != s.pt {
				t.Errorf("Decrypt = %s, want %s", text(back), s.pt)
			}

			// The math/big path must agree on every sample, including the
			// ones the word path serves.
			c.cryptBig(got, pt, tweak, false)
			if text(got) != s.ct {
				t.Errorf("cryptBig encrypt = %s, want %s", text(got), s.ct)
			}
			c.cryptBig(back, got, tweak, true)
			if text(back) != s.pt {
				t.Errorf("cryptBig decrypt = %s, want %s", text(back), s.pt)
			}

			// Domain serves the samples whose domain fits in 64 bits.
			if s.radix == 10 {
				d, err := c.Domain(len(pt), len(tweak))
				if err != nil {
					t.Fatal(err)
				}
				x, err := d.Encrypt(123456789, tweak)
				if err != nil {
					t.Fatal(err)
				}
				if want := numWord(10, numerals(s.ct)); x != want {
					t.Errorf("Domain.Encrypt = %d, want %d", x, want)
				}
			}
		})
	}
}

// TestWordsAgreeWithBig cross-checks the word path against the math/big
// transcription of the standard over random radices, lengths and tweaks
// (tweak lengths chosen to put the round byte in the first and later blocks).
func TestWordsAgreeWithBig(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	key := make([]byte, 16)
	for _, radix := range []int{2, 3, 10, 16, 26, 32, 36, 62, 255, 256, 1000, 65535, 65536} {
		c, err := New(key, radix)
		if err != nil {
			t.Fatal(err)
		}
		for n := 2; n <= 130; n++ {
			if checkLen(uint32(radix), n) != nil {
				continue
			}
			if _, ok := newPlan(uint32(radix), n, 0); !ok {
				break
			}
			for _, tl := range []int{0, 7, 9, 16, 40} {
				src := make([]uint16, n)
				for i := range src {
					src[i] = uint16(rng.IntN(radix))
				}
				tweak := make([]byte, tl)
				for i := range tweak {
					tweak[i] = byte(rng.Uint32())
				}
				got := make([]uint16, n)
				want := make([]uint16, n)
				if err := c.Encrypt(got, src, tweak); err != nil {
					t.Fatal(err)
				}
				c.cryptBig(want, src, tweak, false)
				if !slices.Equal(got, want) {
					t.Fatalf("radix %d n %d tweak %d: words %v, big %v", radix, n, tl, got, want)
				}
				if err := c.Decrypt(got, got, tweak); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, src) {
					t.Fatalf("radix %d n %d tweak %d: round trip %v, want %v", radix, n, tl, got, src)
				}
			}
		}
	}
}

func TestDomainAgreesWithCipher(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	key := mustHex(t, "2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F")
	cases := []struct{ radix, n, tweak int }{
		{10, 6, 0}, {10, 16, 0}, {10, 19, 4}, {32, 12, 4}, {32, 4, 0}, {2, 20, 0}, {2, 63, 0}, {2, 64, 0}, {2, 64, 20}, {36, 12, 11},
	}
	for _, tc := range cases {
		c, _ := New(key, tc.radix)
		d, err := c.Domain(tc.n, tc.tweak)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		tweak := make([]byte, tc.tweak)
		for range 200 {
			x := rng.Uint64()
			if d.Max() != ^uint64(0) {
				x %= d.Max() + 1
			}
			y, err := d.Encrypt(x, tweak)
			if err != nil {
				t.Fatal(err)
			}
			src := make([]uint16, tc.n)
			strWord(uint32(tc.radix), x, src)
			if err := c.Encrypt(src, src, tweak); err != nil {
				t.Fatal(err)
			}
			if want := numWord(uint32(tc.radix), src); y != want {
				t.Fatalf("%+v: Domain.Encrypt(%d) = %d, Cipher.Encrypt gives %d", tc, x, y, want)
			}
			back, err := d.Decrypt(y, tweak)
			if err != nil || back != x {
				t.Fatalf("%+v: Decrypt(%d) = %d, %v; want %d", tc, y, back, err, x)
			}
		}
	}
}

func TestDomainBijection(t *testing.T) {
	t.Parallel()
	c, _ := New(make([]byte, 32), 2)
	d, err := c.Domain(20, 0) // 2^20 = 1,048,576 values, the smallest binary domain allowed
	if err != nil {
		t.Fatal(err)
	}
	n := d.Max() + 1
	out := make([]uint32, n)
	workers := uint64(runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for x := w * n / workers; x < (w+1)*n/workers; x++ {
				y, err := d.Encrypt(x, nil)
				if err != nil {
					t.Errorf("Encrypt(%d): %v", x, err)
					return
				}
				out[x] = uint32(y)
			}
		}()
	}
	wg.Wait()
	seen := make([]bool, n)
	for x, y := range out {
		if seen[y] {
			t.Fatalf("Encrypt(%d) = %d, already produced", x, y)
		}
		seen[y] = true
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	key := make([]byte, 16)
	for _, n := range []int{0, 15, 17, 31, 33, 64} {
		if _, err := New(make([]byte, n), 10); !errors.Is(err, ErrKeySize) || !strings.Contains(err.Error(), "length is") {
			t.Errorf("New(%d-byte key) = %v, want ErrKeySize", n, err)
		}
	}
	for _, r := range []int{-1, 0, 1, 65537} {
		if _, err := New(key, r); !errors.Is(err, ErrRadix) {
			t.Errorf("New(radix %d) = %v, want ErrRadix", r, err)
		}
	}
	c10, _ := New(key, 10)
	c2, _ := New(key, 2)
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"too short", c10.Encrypt(make([]uint16, 1), make([]uint16, 1), nil), ErrLength},
		{"domain below 10^6", c10.Encrypt(make([]uint16, 5), make([]uint16, 5), nil), ErrLength},
		{"binary below 10^6", c2.Encrypt(make([]uint16, 19), make([]uint16, 19), nil), ErrLength},
		{"too long", c10.Encrypt(make([]uint16, MaxLen+1), make([]uint16, MaxLen+1), nil), ErrLength},
		{"dst length", c10.Encrypt(make([]uint16, 7), make([]uint16, 8), nil), ErrLength},
		{"numeral", c10.Encrypt(make([]uint16, 8), []uint16{1, 2, 3, 4, 5, 6, 7, 10}, nil), ErrNumeral},
		{"tweak", c10.Encrypt(make([]uint16, 8), make([]uint16, 8), make([]byte, MaxTweak+1)), ErrTweak},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, tt.err, tt.want)
		}
	}
	if _, err := c10.Domain(20, 0); !errors.Is(err, ErrLength) {
		t.Errorf("Domain(20 digits) = %v, want ErrLength (10^20 > 2^64)", err)
	}
	if _, err := c2.Domain(65, 0); !errors.Is(err, ErrLength) {
		t.Errorf("Domain(65 bits) = %v, want ErrLength", err)
	}
	if _, err := c10.Domain(10, -1); !errors.Is(err, ErrTweak) {
		t.Errorf("Domain(tweak -1) = %v, want ErrTweak", err)
	}
	d, _ := c10.Domain(6, 2)
	if _, err := d.Encrypt(1_000_000, []byte{1, 2}); !errors.Is(err, ErrNumeral) {
		t.Errorf("Domain.Encrypt(10^6) = %v, want ErrNumeral", err)
	}
	if _, err := d.Encrypt(5, nil); !errors.Is(err, ErrTweak) {
		t.Errorf("Domain.Encrypt(no tweak) = %v, want ErrTweak", err)
	}
}

func TestConcurrent(t *testing.T) {
	t.Parallel()
	c, _ := New(make([]byte, 16), 10)
	d, _ := c.Domain(16, 0)
	want := make([]uint64, 500)
	for i := range want {
		want[i], _ = d.Encrypt(uint64(i), nil)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]uint16, 16)
			for i := range want {
				j := (i + g*61) % len(want)
				y, _ := d.Encrypt(uint64(j), nil)
				strWord(10, uint64(j), buf)
				_ = c.Encrypt(buf, buf, nil)
				if y != want[j] || numWord(10, buf) != want[j] {
					errs <- "concurrent result differs"
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{0}, uint16(10), []byte("0123456789"), []byte{})
	f.Add([]byte{1}, uint16(36), []byte("0123456789abcdefghi"), []byte("777pqrs777"))
	f.Fuzz(func(t *testing.T, key []byte, radix uint16, in, tweak []byte) {
		k := make([]byte, 16)
		copy(k, key)
		r := int(radix)%65535 + 2
		c, err := New(k, r)
		if err != nil {
			t.Fatal(err)
		}
		if len(in) > 200 {
			in = in[:200]
		}
		src := make([]uint16, len(in))
		for i, b := range in {
			src[i] = uint16(int(b) % r)
		}
		dst := make([]uint16, len(src))
		if err := c.Encrypt(dst, src, tweak); err != nil {
			if checkLen(uint32(r), len(src)) == nil && len(tweak) <= MaxTweak {
				t.Fatalf("Encrypt rejected valid input: %v", err)
			}
			return
		}
		back := make([]uint16, len(src))
		if err := c.Decrypt(back, dst, tweak); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(back, src) {
			t.Fatalf("round trip %v -> %v -> %v", src, dst, back)
		}
	})
}

func TestBarrett(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	mods := []uint64{1, 2, 3, 10, 1000, 1 << 32, 100_000_000, 99_999_999_999, 1<<63 - 1, 1 << 63, ^uint64(0) - 1, ^uint64(0)}
	for range 200 {
		mods = append(mods, rng.Uint64()>>rng.IntN(64)|1)
	}
	for _, m := range mods {
		rec := ^uint64(0) / m
		for _, x := range []uint64{0, 1, m - 1, m, m + 1, ^uint64(0), ^uint64(0) - 1, rng.Uint64(), rng.Uint64(), rng.Uint64()} {
			if got, want := barrett(x, m, rec), x%m; got != want {
				t.Fatalf("barrett(%d, %d) = %d, want %d", x, m, got, want)
			}
		}
	}
}
