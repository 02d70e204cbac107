package ordernum

import (
	"strconv"
	"time"
)

// parsed is an order number split into its parts.
type parsed struct {
	chars   [maxLength]byte // canonical characters
	vals    [maxLength]byte // their values (the check symbol's value last)
	version int
	year    int
	month   time.Month
	day     int
	body    uint64
}

// parse normalises s and checks everything that needs no key: length,
// characters, check character, prefix and date. It allocates only on error.
func (f Format) parse(s string, p *parsed) error {
	if f.a == nil {
		return fieldErr(ErrConfig, "format", "", "zero Format; build one with NewFormat or ParseFormat")
	}
	a, L := f.a, f.cfg.Length
	n := 0
	for i := 0; i < len(s); i++ {
		c := a.fold[s[i]]
		if c == 0 {
			continue
		}
		if n < L {
			p.chars[n] = c
		}
		n++
	}
	if n != L {
		return fieldErr(ErrLength, "number", clip(s), "has %d characters without hyphens and spaces, want %d", n, L)
	}
	last := L - f.checkLen
	for i := range L {
		c := p.chars[i]
		v := a.valueOf[c]
		if i == last && f.cfg.Check == CheckMod37 {
			v = invalid
			for j := 0; j < len(mod37Symbols); j++ {
				if mod37Symbols[j] == c {
					v = byte(j)
				}
			}
		}
		if v == invalid {
			return fieldErr(ErrCharacter, "number", clip(s), "character %q at position %d is not a %s character", c, i+1, a.name)
		}
		p.vals[i] = v
	}
	if f.checkLen == 1 && f.cfg.Check.checkValue(p.vals[:last]) != p.vals[last] {
		return fieldErr(ErrCheck, "number", clip(s), "check character %q does not match (%s): mistyped, or not an order number of this format", p.chars[last], f.cfg.Check)
	}
	pos := len(f.cfg.Prefix)
	if string(p.chars[:pos]) != f.cfg.Prefix {
		return fieldErr(ErrPrefix, "number", clip(s), "starts with %q, want prefix %q", string(p.chars[:pos]), f.cfg.Prefix)
	}
	p.version = 0
	if f.verLen == 1 {
		p.version = int(p.vals[pos])
		pos++
	}
	if f.dateLen > 0 {
		d := p.chars[pos : pos+f.dateLen]
		num := func(b []byte) int {
			v := 0
			for _, c := range b {
				if c < '0' || c > '9' {
					return -1
				}
				v = v*10 + int(c-'0')
			}
			return v
		}
		yl := f.dateLen - 4
		y, m, dd := num(d[:yl]), num(d[yl:yl+2]), num(d[yl+2:])
		if yl == 2 && y >= 0 {
			y += 2000
		}
		if y < 1 || m < 1 || m > 12 || dd < 1 || dd > daysIn(y, time.Month(m)) {
			return fieldErr(ErrDate, "number", clip(s), "date part %q is not a %s calendar date", string(d), f.cfg.Date)
		}
		p.year, p.month, p.day = y, time.Month(m), dd
		pos += f.dateLen
	}
	var body uint64
	for _, v := range p.vals[pos : pos+f.bodyLen] {
		body = body*uint64(a.radix) + uint64(v)
	}
	p.body = body
	return nil
}

func daysIn(y int, m time.Month) int {
	return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// Validate reports whether s is a well-formed order number of this format,
// without the key: after normalisation (case, hyphens and spaces, O read as
// 0 and I, L as 1) it must have the right length, only alphabet characters,
// a matching check character, the prefix and a calendar date. It cannot tell
// an issued number from a well-formed one nobody issued; only Codec.Decode
// with the key can. Errors are *FieldErrors wrapping ErrLength,
// ErrCharacter, ErrCheck, ErrPrefix or ErrDate.
func (f Format) Validate(s string) error {
	var p parsed
	return f.parse(s, &p)
}

// Normalize validates s like Validate and returns its canonical form: upper
// case, no hyphens or spaces, O → 0, I and L → 1. Two spellings of one order
// number normalise to the same string.
func (f Format) Normalize(s string) (string, error) {
	var p parsed
	if err := f.parse(s, &p); err != nil {
		return "", err
	}
	return string(p.chars[:f.cfg.Length]), nil
}

// appendDate writes the date part for (y, m, d), or reports ErrDate.
func (f Format) appendDate(dst []byte, y int, m time.Month, d int) ([]byte, error) {
	switch f.cfg.Date {
	case DateYYMMDD:
		if y < 2000 || y > 2099 {
			return dst, fieldErr(ErrDate, "date", strconv.Itoa(y)+"-"+strconv.Itoa(int(m))+"-"+strconv.Itoa(d), "year %d is outside %s's range 2000–2099", y, f.cfg.Date)
		}
		y -= 2000
		dst = append(dst, byte('0'+y/10), byte('0'+y%10))
	case DateYYYYMMDD:
		if y < 1 || y > 9999 {
			return dst, fieldErr(ErrDate, "date", strconv.Itoa(y)+"-"+strconv.Itoa(int(m))+"-"+strconv.Itoa(d), "year %d is outside %s's range 1–9999", y, f.cfg.Date)
		}
		dst = append(dst, byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10))
	}
	return append(dst, byte('0'+int(m)/10), byte('0'+int(m)%10), byte('0'+d/10), byte('0'+d%10)), nil
}

// dayTweak is the FF1 tweak for a date part: the day number since
// 1970-01-01 as 4 big-endian bytes (two's complement for earlier days). With
// it the same sequence number gives unrelated bodies on different days.
func dayTweak(t *[4]byte, y int, m time.Month, d int) {
	days := uint32(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400)
	t[0], t[1], t[2], t[3] = byte(days>>24), byte(days>>16), byte(days>>8), byte(days)
}
