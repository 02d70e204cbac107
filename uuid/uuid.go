package uuid

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/idmint/idmint/internal/idtext"
)

// UUID is a 128-bit universally unique identifier in network byte order.
// Its layout depends on the version (RFC 9562 §4):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                   version-specific (48 bits)                  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|      ...      |  ver  |       version-specific (12 bits)      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|var|                version-specific (62 bits)                 |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                              ...                              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type UUID [16]byte

// Nil is the all-zero UUID (RFC 9562 §5.9).
var Nil UUID

// Max is the all-ones UUID (RFC 9562 §5.10).
var Max = UUID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// Variant is the layout family named by the top bits of octet 8.
type Variant int

// The variants of RFC 9562 §4.1.
const (
	VariantNCS       Variant = iota // 0xx: reserved, NCS backward compatibility
	VariantRFC9562                  // 10x: this RFC (and RFC 4122)
	VariantMicrosoft                // 110: reserved, Microsoft backward compatibility
	VariantFuture                   // 111: reserved for future definition
)

// String names the variant.
func (v Variant) String() string {
	switch v {
	case VariantNCS:
		return "NCS"
	case VariantRFC9562:
		return "RFC 9562"
	case VariantMicrosoft:
		return "Microsoft"
	default:
		return "future"
	}
}

// Errors returned by the parsers. They are wrapped with the offending input
// and position; test for them with errors.Is.
var (
	// ErrLength means the input has a length no UUID form has.
	ErrLength = errors.New("uuid: wrong length")
	// ErrSyntax means a character is not a hex digit, or a hyphen, brace or
	// urn:uuid: prefix is missing or misplaced.
	ErrSyntax = errors.New("uuid: invalid character")
	// ErrVersion means the version nibble is not the one required.
	ErrVersion = errors.New("uuid: wrong version")
	// ErrVariant means the variant bits are not 10 (RFC 9562).
	ErrVariant = errors.New("uuid: wrong variant")
)

// Version returns the version nibble (octet 6, high 4 bits). It is only
// meaningful for the RFC 9562 variant.
func (u UUID) Version() int { return int(u[6] >> 4) }

// Variant returns the variant named by the top bits of octet 8.
func (u UUID) Variant() Variant {
	switch {
	case u[8]&0x80 == 0:
		return VariantNCS
	case u[8]&0xc0 == 0x80:
		return VariantRFC9562
	case u[8]&0xe0 == 0xc0:
		return VariantMicrosoft
	default:
		return VariantFuture
	}
}

// gregorianOffset is the number of 100-ns intervals from the Gregorian
// reform (1582-10-15T00:00:00Z) to the Unix epoch (RFC 9562 §5.1).
const gregorianOffset = 0x01B21DD213814000

// Time returns the time stamped in a v1, v6 or v7 UUID (100-ns precision for
// v1/v6, millisecond for v7), and false for other versions or variants.
func (u UUID) Time() (time.Time, bool) {
	if u.Variant() != VariantRFC9562 {
		return time.Time{}, false
	}
	switch u.Version() {
	case 1, 6:
		return gregorianTime(u.ticks()), true
	case 7:
		ms := int64(binary.BigEndian.Uint64(u[0:8]) >> 16)
		return time.UnixMilli(ms).UTC(), true
	}
	return time.Time{}, false
}

// ticks returns the 60-bit count of 100-ns intervals of a v1 or v6 UUID.
func (u UUID) ticks() uint64 {
	if u.Version() == 6 {
		hi := binary.BigEndian.Uint64(u[0:8])
		return (hi>>16)<<12 | hi&0x0fff
	}
	low := uint64(binary.BigEndian.Uint32(u[0:4]))
	mid := uint64(binary.BigEndian.Uint16(u[4:6]))
	high := uint64(binary.BigEndian.Uint16(u[6:8]) & 0x0fff)
	return high<<48 | mid<<32 | low
}

func gregorianTime(ticks uint64) time.Time {
	t := int64(ticks) - gregorianOffset
	return time.Unix(t/1e7, t%1e7*100).UTC()
}

// ClockSeq returns the 14-bit clock sequence of a v1 or v6 UUID, and false
// for other versions.
func (u UUID) ClockSeq() (uint16, bool) {
	if v := u.Version(); u.Variant() != VariantRFC9562 || (v != 1 && v != 6) {
		return 0, false
	}
	return binary.BigEndian.Uint16(u[8:10]) & 0x3fff, true
}

// Node returns the 48-bit node of a v1 or v6 UUID, and false for other
// versions.
func (u UUID) Node() ([6]byte, bool) {
	var n [6]byte
	if v := u.Version(); u.Variant() != VariantRFC9562 || (v != 1 && v != 6) {
		return n, false
	}
	copy(n[:], u[10:])
	return n, true
}

// Compare returns -1, 0 or +1 as u sorts before, equal to or after v in
// byte order, which for v6 and v7 is time order.
func (u UUID) Compare(v UUID) int {
	a, b := binary.BigEndian.Uint64(u[:8]), binary.BigEndian.Uint64(v[:8])
	if a == b {
		a, b = binary.BigEndian.Uint64(u[8:]), binary.BigEndian.Uint64(v[8:])
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

const hexDigits = "0123456789abcdef"

// String returns the canonical 36-character lowercase form
// xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx (RFC 9562 §4).
func (u UUID) String() string {
	var b [36]byte
	u.encode(b[:])
	return string(b[:])
}

func (u UUID) encode(dst []byte) {
	j := 0
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst[j] = '-'
			j++
		}
		dst[j] = hexDigits[c>>4]
		dst[j+1] = hexDigits[c&0xf]
		j += 2
	}
}

// AppendText appends the canonical form to b.
func (u UUID) AppendText(b []byte) ([]byte, error) {
	n := len(b)
	b = append(b, make([]byte, 36)...)
	u.encode(b[n:])
	return b, nil
}

// MarshalText returns the canonical form.
func (u UUID) MarshalText() ([]byte, error) { return u.AppendText(nil) }

// UnmarshalText parses any form Parse accepts.
func (u *UUID) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*u = v
	return nil
}

// FromBytes returns the UUID held in a 16-byte slice.
func FromBytes(b []byte) (UUID, error) {
	var u UUID
	if len(b) != 16 {
		return u, fmt.Errorf("%w: %d bytes, want 16", ErrLength, len(b))
	}
	copy(u[:], b)
	return u, nil
}

// Parse decodes a UUID of any version and variant from its canonical form
// (36 characters), the bare 32 hex digits, {braced} (38) or urn:uuid:
// (45) forms, in either case. Errors wrap ErrLength or ErrSyntax and name the
// position and character at fault.
func Parse(s string) (UUID, error) {
	var u UUID
	in := s
	switch len(s) {
	case 36:
	case 32:
		for i := range 16 {
			b, ok := hexByte(s[2*i], s[2*i+1])
			if !ok {
				return Nil, badChar(in, 2*i, s[2*i:2*i+2])
			}
			u[i] = b
		}
		return u, nil
	case 38:
		if s[0] != '{' || s[37] != '}' {
			return Nil, fmt.Errorf("%w: %s: 38-character form must be enclosed in {braces}", ErrSyntax, idtext.Quote(in))
		}
		s = s[1:37]
	case 45:
		if !hasPrefixFold(s, "urn:uuid:") {
			return Nil, fmt.Errorf("%w: %s: 45-character form must start with urn:uuid:", ErrSyntax, idtext.Quote(in))
		}
		s = s[9:]
	default:
		return Nil, fmt.Errorf("%w: %s has %d characters, want 36 (canonical), 32 (hex), 38 ({braced}) or 45 (urn:uuid:)", ErrLength, idtext.Quote(in), len(in))
	}
	off := len(in) - len(s) // 0, 1 or 9: for positions in messages
	if len(in) == 38 {
		off = 1
	}
	for _, p := range [...]int{8, 13, 18, 23} {
		if s[p] != '-' {
			return Nil, fmt.Errorf("%w: %s: want '-' at position %d, got %q", ErrSyntax, idtext.Quote(in), off+p, s[p])
		}
	}
	for j, i := range canonicalPairs {
		b, ok := hexByte(s[i], s[i+1])
		if !ok {
			return Nil, badChar(in, off+i, s[i:i+2])
		}
		u[j] = b
	}
	return u, nil
}

// canonicalPairs are the offsets of the 16 hex pairs in the canonical form.
var canonicalPairs = [16]int{0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34}

// ParseVersion parses s as Parse does and then requires the RFC 9562
// variant and the given version, so "a v7 UUID" means exactly that. Errors
// wrap ErrVersion or ErrVariant and name the nibble found.
func ParseVersion(s string, version int) (UUID, error) {
	u, err := Parse(s)
	if err != nil {
		return Nil, err
	}
	if err := u.Check(version); err != nil {
		return Nil, fmt.Errorf("%w (in %s)", err, idtext.Quote(s))
	}
	return u, nil
}

// Check reports whether u has the RFC 9562 variant and the given version.
func (u UUID) Check(version int) error {
	if v := u.Variant(); v != VariantRFC9562 {
		return fmt.Errorf("%w: variant bits of octet 8 (%#02x) are %s, want RFC 9562 (10x)", ErrVariant, u[8], v)
	}
	if v := u.Version(); v != version {
		return fmt.Errorf("%w: version nibble is %x, want %d", ErrVersion, v, version)
	}
	return nil
}

func badChar(in string, pos int, pair string) error {
	if _, ok := idtext.Unhex(pair[0]); ok {
		pos++
	}
	return idtext.NotHex(ErrSyntax, in, pos)
}

func hexByte(a, b byte) (byte, bool) {
	x, ok1 := idtext.Unhex(a)
	y, ok2 := idtext.Unhex(b)
	return x<<4 | y, ok1 && ok2
}

func hasPrefixFold(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := range len(prefix) {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}

// quote renders untrusted input for an error message, cut to 64 bytes.
