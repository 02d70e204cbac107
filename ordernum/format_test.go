package ordernum

import (
	"errors"
	"strings"
	"testing"
)

func TestNewFormat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cfg      Config
		body     int
		capacity uint64
		check    Check
	}{
		{Config{Length: 16}, 15, 1_000_000_000_000_000, CheckDamm},
		{Config{Length: 7}, 6, 1_000_000, CheckDamm},
		{Config{Length: 20}, 19, 10_000_000_000_000_000_000, CheckDamm},
		{Config{Length: 16, Check: CheckLuhn, Prefix: "88"}, 13, 10_000_000_000_000, CheckLuhn},
		{Config{Length: 18, Prefix: "88", Date: DateYYMMDD, Version: true}, 8, 100_000_000, CheckDamm},
		{Config{Length: 20, Date: DateYYYYMMDD, Check: CheckNone}, 12, 1_000_000_000_000, CheckNone},
		{Config{Alphabet: Base32, Length: 13}, 12, 1 << 60, CheckMod37},
		{Config{Alphabet: Base32, Length: 5}, 4, 1 << 20, CheckMod37},
	}
	for _, tt := range tests {
		f, err := NewFormat(tt.cfg)
		if err != nil {
			t.Errorf("NewFormat(%+v): %v", tt.cfg, err)
			continue
		}
		if f.BodyLength() != tt.body || f.Capacity() != tt.capacity || f.Config().Check != tt.check {
			t.Errorf("NewFormat(%+v): body %d capacity %d check %s, want %d %d %s", tt.cfg, f.BodyLength(), f.Capacity(), f.Config().Check, tt.body, tt.capacity, tt.check)
		}
		g, err := ParseFormat(f.String())
		if err != nil || g != f {
			t.Errorf("ParseFormat(%q) = %v, %v; want the same format back", f.String(), g, err)
		}
	}
}

func TestFormatErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec  string
		field string
		value string
		says  string
	}{
		{"length=16,alphabet=hex", "alphabet", "hex", `want "decimal" or "base32"`},
		{"alphabet=base32,length=13,check=damm", "check", "damm", "mod37"},
		{"length=16,check=mod37", "check", "mod37", "damm"},
		{"length=16,check=verhoeff", "check", "verhoeff", "damm"},
		{"length=16,prefix=8A", "prefix", "8A", "'A' at index 1"},
		{"alphabet=base32,length=13,prefix=ORD", "prefix", "ORD", "'O' at index 0"},
		{"alphabet=base32,length=13,prefix=ab", "prefix", "ab", "'a' at index 0"},
		{"length=16,date=ddMMyy", "date", "ddMMyy", "yyMMdd"},
		{"length=0", "length", "0", "1 to 64"},
		{"length=65", "length", "65", "1 to 64"},
		{"length=sixteen", "length", "sixteen", "not an integer"},
		{"length=6", "length", "6", "below FF1's minimum of 1000000"},
		{"length=21", "length", "21", "more than 64 bits"},
		{"alphabet=base32,length=14", "length", "14", "more than 64 bits"},
		{"alphabet=base32,length=4", "length", "4", "below FF1's minimum"},
		{"alphabet=base32,length=12,prefix=K,date=yyMMdd,version", "length", "12", "3 base32 characters, a domain of 32768 values"},
		{"length=9,date=yyyyMMdd", "length", "9", "no room for a body"},
		{"length=16,version=maybe", "version", "maybe", "true or false"},
		{"length=16,colour=red", "colour", "red", "unknown spec key"},
		{"length=16,length=17", "length", "17", "given twice"},
		{"alphabet=decimal", "length", "", "missing"},
	}
	for _, tt := range tests {
		_, err := ParseFormat(tt.spec)
		var fe *FieldError
		if !errors.As(err, &fe) || !errors.Is(err, ErrConfig) {
			t.Errorf("ParseFormat(%q) = %v, want a *FieldError wrapping ErrConfig", tt.spec, err)
			continue
		}
		if fe.Field != tt.field || fe.Value != tt.value || !strings.Contains(err.Error(), tt.says) || !strings.HasPrefix(err.Error(), "ordernum: ") {
			t.Errorf("ParseFormat(%q) = %q (field %q value %q), want field %q value %q saying %q", tt.spec, err, fe.Field, fe.Value, tt.field, tt.value, tt.says)
		}
	}
}

func TestCapacityAndUsage(t *testing.T) {
	t.Parallel()
	f := MustParseFormat("length=7") // 10^6 bodies
	if f.Capacity() != 1_000_000 {
		t.Fatalf("Capacity = %d", f.Capacity())
	}
	if f.NearCapacity(799_998) || !f.NearCapacity(799_999) || !f.NearCapacity(999_999) {
		t.Errorf("NearCapacity should turn true exactly when 800,000 numbers are used")
	}
	if u := f.Usage(799_999); u != 0.8 {
		t.Errorf("Usage(799999) = %v, want 0.8", u)
	}
	if u := f.Usage(999_999); u != 1 {
		t.Errorf("Usage(999999) = %v, want 1", u)
	}
	c, err := New(f, testKey(t, 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Encode(999_999, testDay); err != nil {
		t.Errorf("Encode(last) = %v", err)
	}
	for _, seq := range []uint64{1_000_000, 1 << 63, ^uint64(0)} {
		_, err := c.Encode(seq, testDay)
		var fe *FieldError
		if !errors.Is(err, ErrCapacity) || !errors.As(err, &fe) || fe.Field != "seq" || !strings.Contains(err.Error(), "room for 1000000") {
			t.Errorf("Encode(%d) = %v, want ErrCapacity naming seq", seq, err)
		}
	}
	big := MustParseFormat("length=20") // 10^19: the warning threshold must not overflow
	if big.NearCapacity(7_999_999_999_999_999_998) || !big.NearCapacity(7_999_999_999_999_999_999) {
		t.Errorf("NearCapacity wrong for 10^19")
	}
}

func TestValidateErrors(t *testing.T) {
	t.Parallel()
	f := MustParseFormat("length=18,prefix=88,date=yyMMdd,version")
	c, _ := New(f, testKey(t, 3))
	good, _ := c.Encode(12345, testDay)
	mod := func(i int, ch byte) string { b := []byte(good); b[i] = ch; return string(b) }
	withCheck := func(s string) string { // fix up the check digit after a deliberate change
		vals := make([]byte, len(s)-1)
		for i := range vals {
			vals[i] = s[i] - '0'
		}
		return s[:len(s)-1] + string(rune('0'+CheckDamm.checkValue(vals)))
	}
	tests := []struct {
		in   string
		want error
		says string
	}{
		{good[:17], ErrLength, "has 17 characters"},
		{good + "1", ErrLength, "has 19 characters"},
		{"", ErrLength, "has 0 characters"},
		{mod(5, 'x'), ErrCharacter, "'X' at position 6"},
		{mod(5, '*'), ErrCharacter, "'*' at position 6"},
		{mod(17, ((good[17]-'0'+1)%10)+'0'), ErrCheck, "does not match"},
		{withCheck("77" + good[2:]), ErrPrefix, `want prefix "88"`},
		{withCheck(good[:3] + "251340" + good[9:]), ErrDate, `"251340" is not a yyMMdd calendar date`},
		{withCheck(good[:3] + "250229" + good[9:]), ErrDate, "calendar date"},
	}
	for _, tt := range tests {
		err := f.Validate(tt.in)
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("Validate(%q) = %v, want %v saying %q", tt.in, err, tt.want, tt.says)
		}
		if _, err := c.Decode(tt.in); !errors.Is(err, tt.want) {
			t.Errorf("Decode(%q) = %v, want %v", tt.in, err, tt.want)
		}
	}
	// 2024-02-29 exists.
	if err := f.Validate(withCheck(good[:3] + "240229" + good[9:])); err != nil {
		t.Errorf("leap day rejected: %v", err)
	}
	if err := (Format{}).Validate(good); !errors.Is(err, ErrConfig) {
		t.Errorf("zero Format Validate = %v, want ErrConfig", err)
	}
}

func TestNormalize(t *testing.T) {
	t.Parallel()
	f := MustParseFormat("alphabet=base32,length=13,prefix=K1")
	c, _ := New(f, testKey(t, 0))
	for seq := range uint64(300) {
		s, err := c.Encode(seq, testDay)
		if err != nil {
			t.Fatal(err)
		}
		// Lower case, hyphen groups, spaces, and the look-alikes people type.
		typed := strings.ToLower(s[:4]) + "-" + s[4:8] + " " + s[8:]
		typed = strings.NewReplacer("0", "o", "1", "l").Replace(typed)
		n, err := f.Normalize(typed)
		if err != nil || n != s {
			t.Fatalf("Normalize(%q) = %q, %v; want %q", typed, n, err, s)
		}
		p, err := c.Decode(typed)
		if err != nil || p.Seq != seq {
			t.Fatalf("Decode(%q) = %+v, %v; want seq %d", typed, p, err, seq)
		}
	}
}

func FuzzParseFormat(f *testing.F) {
	for _, s := range []string{"length=16", "alphabet=base32,length=12,prefix=K,date=yyMMdd,version", "length=18,prefix=88,date=yyyyMMdd,check=luhn", "length=,", "version,length=9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		fm, err := ParseFormat(spec)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || !errors.Is(err, ErrConfig) {
				t.Fatalf("ParseFormat(%q) error %v is not a *FieldError wrapping ErrConfig", spec, err)
			}
			return
		}
		back, err := ParseFormat(fm.String())
		if err != nil || back != fm {
			t.Fatalf("ParseFormat(%q).String() = %q does not read back: %v", spec, fm.String(), err)
		}
		if fm.Capacity() < 1_000_000 {
			t.Fatalf("%q: capacity %d below FF1's minimum", spec, fm.Capacity())
		}
	})
}
