package ordernum

import (
	"fmt"
	"testing"
)

// Published examples: Damm "572" → 4 and Luhn "7992739871" → 3 (both from
// the Wikipedia articles "Damm algorithm" and "Luhn algorithm"); Crockford
// mod 37 computed by hand: "10" in base32 is 32, and 32 mod 37 = 32 → '*'.
func TestCheckKnownValues(t *testing.T) {
	t.Parallel()
	dec := func(s string) []byte {
		v := make([]byte, len(s))
		for i := range s {
			v[i] = s[i] - '0'
		}
		return v
	}
	b32 := func(s string) []byte {
		v := make([]byte, len(s))
		for i := range s {
			v[i] = base32Alpha.valueOf[s[i]]
		}
		return v
	}
	tests := []struct {
		check Check
		vals  []byte
		want  byte
	}{
		{CheckDamm, dec("572"), 4},
		{CheckDamm, dec("5724"), 0},
		{CheckLuhn, dec("7992739871"), 3},
		{CheckLuhn, dec("0"), 0},
		{CheckMod37, b32("10"), 32},
		{CheckMod37, b32("15"), 0}, // 37
		{CheckMod37, b32("Z"), 31},
	}
	for _, tt := range tests {
		if got := tt.check.checkValue(tt.vals); got != tt.want {
			t.Errorf("%s(%v) = %d, want %d", tt.check, tt.vals, got, tt.want)
		}
	}
}

// symbols returns the values a position may hold: the alphabet's, plus
// Crockford's five extra check symbols at a mod-37 check position.
func symbols(c Check, radix int, checkPos bool) int {
	if checkPos && c == CheckMod37 {
		return 37
	}
	return radix
}

// valid reports whether payload+check passes the scheme.
func valid(c Check, s []byte) bool {
	return c.checkValue(s[:len(s)-1]) == s[len(s)-1]
}

// TestCheckDetectsErrors is exhaustive: for every payload of the given
// lengths over the whole alphabet (which reaches every intermediate state of
// each scheme, and both digit parities for Luhn), it makes every single
// substitution and every adjacent transposition, check character included,
// and counts what the scheme misses.
func TestCheckDetectsErrors(t *testing.T) {
	t.Parallel()
	schemes := []struct {
		check   Check
		radix   int
		lengths []int
	}{
		{CheckDamm, 10, []int{1, 2, 3, 4}},
		{CheckLuhn, 10, []int{1, 2, 3, 4}},
		{CheckMod37, 32, []int{1, 2, 3}},
	}
	for _, sc := range schemes {
		t.Run(string(sc.check), func(t *testing.T) {
			t.Parallel()
			missedSub := 0
			missedTrans := map[string]int{}
			strings := 0
			for _, n := range sc.lengths {
				total := 1
				for range n {
					total *= sc.radix
				}
				s := make([]byte, n+1)
				for p := range total {
					x := p
					for i := n - 1; i >= 0; i-- {
						s[i] = byte(x % sc.radix)
						x /= sc.radix
					}
					s[n] = sc.check.checkValue(s[:n])
					strings++
					for i := range s {
						orig := s[i]
						for v := range symbols(sc.check, sc.radix, i == n) {
							if byte(v) == orig {
								continue
							}
							s[i] = byte(v)
							if valid(sc.check, s) {
								missedSub++
							}
						}
						s[i] = orig
					}
					for i := 0; i+1 < len(s); i++ {
						a, b := s[i], s[i+1]
						if a == b {
							continue
						}
						if i+1 == n && int(b) >= sc.radix {
							continue // a check symbol cannot move into the body
						}
						s[i], s[i+1] = b, a
						if valid(sc.check, s) {
							missedTrans[fmt.Sprintf("%d%d", a, b)]++
						}
						s[i], s[i+1] = a, b
					}
				}
			}
			if missedSub != 0 {
				t.Errorf("missed %d single substitutions", missedSub)
			}
			switch sc.check {
			case CheckLuhn:
				// Luhn's one known blind spot: 09 ↔ 90.
				for pair := range missedTrans {
					if pair != "09" && pair != "90" {
						t.Errorf("Luhn missed transposition %s", pair)
					}
				}
				if missedTrans["09"] == 0 || missedTrans["90"] == 0 {
					t.Errorf("expected Luhn to miss 09 ↔ 90, missed %v", missedTrans)
				}
			default:
				if len(missedTrans) != 0 {
					t.Errorf("missed adjacent transpositions %v", missedTrans)
				}
			}
			t.Logf("%s: %d strings checked", sc.check, strings)
		})
	}
}

// TestValidateDetectsErrors runs the same property through Format.Validate
// on a full-size order number: every single substitution (including case
// and look-alike folding) and adjacent transposition of the whole string,
// prefix, version, date and check character included, is rejected.
func TestValidateDetectsErrors(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{
		"alphabet=decimal,length=18,prefix=88,date=yyMMdd,version",
		"alphabet=base32,length=14,prefix=KX,date=yyMMdd,version",
	} {
		f := MustParseFormat(spec)
		c, err := New(f, testKey(t, 1))
		if err != nil {
			t.Fatal(err)
		}
		alphabet := f.a.digits
		if f.cfg.Check == CheckMod37 {
			alphabet = mod37Symbols
		}
		for seq := range uint64(40) {
			s, err := c.Encode(seq*7919, testDay)
			if err != nil {
				t.Fatal(err)
			}
			b := []byte(s)
			for i := range b {
				orig := b[i]
				for j := 0; j < len(alphabet); j++ {
					if alphabet[j] == orig {
						continue
					}
					b[i] = alphabet[j]
					if f.Validate(string(b)) == nil {
						t.Fatalf("%s: %s accepted (from %s)", spec, b, s)
					}
				}
				b[i] = orig
				if i+1 < len(b) && b[i] != b[i+1] {
					b[i], b[i+1] = b[i+1], b[i]
					if f.Validate(string(b)) == nil {
						t.Fatalf("%s: transposition %s accepted (from %s)", spec, b, s)
					}
					b[i], b[i+1] = b[i+1], b[i]
				}
			}
		}
	}
}
