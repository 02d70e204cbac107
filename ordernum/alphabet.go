package ordernum

// Alphabet is the character set of an order number.
type Alphabet string

// The alphabets.
const (
	// Decimal is the digits 0–9 (radix 10).
	Decimal Alphabet = "decimal"
	// Base32 is Douglas Crockford's base32, 0–9 and A–Z without I, L, O
	// and U (radix 32; https://www.crockford.com/base32.html). Output is
	// upper case; input is read case-insensitively with O as 0 and I, L as
	// 1, so the characters people confuse cannot produce a wrong number.
	Base32 Alphabet = "base32"
)

const (
	decimalDigits = "0123456789"
	base32Digits  = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
)

// invalid marks a byte that is not a numeral in valueOf tables.
const invalid = 0xFF

// alpha is an alphabet's tables.
type alpha struct {
	name    Alphabet
	radix   int
	digits  string
	valueOf [256]byte // canonical character → value, or invalid
	fold    [256]byte // input character → canonical character, 0 to drop, invalid to reject
}

var (
	decimalAlpha = newAlpha(Decimal, decimalDigits)
	base32Alpha  = newAlpha(Base32, base32Digits)
)

func newAlpha(name Alphabet, digits string) *alpha {
	a := &alpha{name: name, radix: len(digits), digits: digits}
	for i := range a.valueOf {
		a.valueOf[i] = invalid
		a.fold[i] = invalid
	}
	for i := 0; i < len(digits); i++ {
		a.valueOf[digits[i]] = byte(i)
	}
	// Normalisation (both alphabets): upper-case letters, read O as 0 and
	// I, L as 1, drop hyphens and spaces. Every other byte passes through
	// unchanged and is then judged by position (check symbols may be *, ~,
	// $, = or U).
	for c := 0; c < 256; c++ {
		b := byte(c)
		if b >= 'a' && b <= 'z' {
			b -= 'a' - 'A'
		}
		switch b {
		case 'O':
			b = '0'
		case 'I', 'L':
			b = '1'
		case '-', ' ':
			b = 0
		}
		a.fold[c] = b
	}
	return a
}

func alphaOf(name Alphabet) *alpha {
	switch name {
	case Decimal:
		return decimalAlpha
	case Base32:
		return base32Alpha
	}
	return nil
}
