package ordernum

import (
	"strconv"
	"time"

	"github.com/idmint/idmint/ordernum/ff1"
)

// Codec turns sequence numbers into order numbers of one Format and back,
// with FF1 under the Format's keys. It is immutable and safe for concurrent
// use; Encode does not allocate beyond its result string, and AppendEncode
// not at all.
//
// Guarantees:
//   - Never repeating: for one key and (with a date part) one day, distinct
//     sequence numbers give distinct order numbers, because FF1 is a
//     permutation of the body's domain. Sequence numbers at or beyond
//     Capacity are refused with ErrCapacity, never wrapped.
//   - Unguessable: without the key, the body of sequence n+1 is unrelated
//     to that of n; it reveals neither volume nor neighbours. A date part
//     reveals the day only (the day also tweaks FF1, so the same sequence
//     number on two days gives unrelated bodies).
//   - Checkable without the key (Format.Validate), decodable with it
//     (Decode), including numbers issued under an older key version.
//
// The sequence numbers must themselves be unique (per day, with a date
// part): take them from a segment or ticket generator, never from a
// counter that can restart.
type Codec struct {
	f       Format
	current *versionKey
	byVer   [MaxKeyVersion + 1]*versionKey
}

type versionKey struct {
	version int
	dom     *ff1.Domain
}

// Parts is a decoded order number.
type Parts struct {
	// Seq is the sequence number the order number was issued for.
	Seq uint64
	// Date is the date part at midnight UTC, or the zero Time when the
	// format has none.
	Date time.Time
	// Version is the key version (0 when the format has no version
	// character).
	Version int
}

// New returns a Codec for f that issues with current and decodes numbers
// issued under current or any of previous. With a version character in the
// format each key's version must fit it (0–9 Decimal, 0–31 Base32) and be
// distinct; without one, only a single key is allowed. Errors are
// *FieldErrors wrapping ErrKey or ErrConfig; they never contain key
// material.
func New(f Format, current Key, previous ...Key) (*Codec, error) {
	if f.a == nil {
		return nil, fieldErr(ErrConfig, "format", "", "zero Format; build one with NewFormat or ParseFormat")
	}
	if f.verLen == 0 && len(previous) > 0 {
		return nil, fieldErr(ErrKey, "version", "false", "the format has no version character, so it can hold only one key; got %d", 1+len(previous))
	}
	c := &Codec{f: f}
	for i, k := range append([]Key{current}, previous...) {
		if k.IsZero() {
			return nil, fieldErr(ErrKey, "key", "(zero)", "key %d of %d has no material", i+1, 1+len(previous))
		}
		v := k.version
		if f.verLen == 0 {
			v = 0
		} else if v >= f.a.radix {
			return nil, fieldErr(ErrKey, "version", strconv.Itoa(v), "a %s version character holds 0 to %d", f.a.name, f.a.radix-1)
		}
		if c.byVer[v] != nil {
			return nil, fieldErr(ErrKey, "version", strconv.Itoa(v), "two keys have this version")
		}
		cipher, err := ff1.New(k.material, f.a.radix)
		if err != nil {
			return nil, fieldErr(ErrKey, "key", "(redacted)", "%v", err)
		}
		tweakLen := 0
		if f.dateLen > 0 {
			tweakLen = 4
		}
		dom, err := cipher.Domain(f.bodyLen, tweakLen)
		if err != nil { // unreachable: NewFormat checked the domain
			return nil, fieldErr(ErrConfig, "length", strconv.Itoa(f.cfg.Length), "%v", err)
		}
		c.byVer[v] = &versionKey{version: v, dom: dom}
		if i == 0 {
			c.current = c.byVer[v]
		}
	}
	return c, nil
}

// Format returns the Codec's format.
func (c *Codec) Format() Format { return c.f }

// Version returns the version of the key Encode issues with.
func (c *Codec) Version() int { return c.current.version }

// Encode returns the order number for seq on day (whose calendar date in
// its own location is used; pass day.In(loc) to choose the zone). day is
// ignored when the format has no date part. It returns a *FieldError
// wrapping ErrCapacity when seq ≥ Capacity() and ErrDate when the day is
// outside the date layout's range.
func (c *Codec) Encode(seq uint64, day time.Time) (string, error) {
	var buf [maxLength]byte
	b, err := c.AppendEncode(buf[:0], seq, day)
	return string(b), err
}

// AppendEncode appends the order number for seq on day to dst, as Encode
// does, and returns the extended slice; on error it returns dst unchanged.
// It does not allocate when dst has room.
func (c *Codec) AppendEncode(dst []byte, seq uint64, day time.Time) ([]byte, error) {
	f := &c.f
	if seq >= f.capacity {
		per := ""
		if f.dateLen > 0 {
			per = " per day"
		}
		return dst, fieldErr(ErrCapacity, "seq", strconv.FormatUint(seq, 10), "the format %s has room for %d order numbers%s (sequence 0 to %d)", f, f.capacity, per, f.capacity-1)
	}
	start := len(dst)
	dst = append(dst, f.cfg.Prefix...)
	if f.verLen == 1 {
		dst = append(dst, f.a.digits[c.current.version])
	}
	var tweak [4]byte
	tw := tweak[:0]
	if f.dateLen > 0 {
		y, m, d := day.Date()
		var err error
		if dst, err = f.appendDate(dst, y, m, d); err != nil {
			return dst[:start], err
		}
		dayTweak(&tweak, y, m, d)
		tw = tweak[:]
	}
	body, err := c.current.dom.Encrypt(seq, tw)
	if err != nil { // unreachable: seq and tweak are in range
		return dst[:start], fieldErr(ErrCapacity, "seq", strconv.FormatUint(seq, 10), "%v", err)
	}
	n := len(dst)
	for range f.bodyLen {
		dst = append(dst, 0)
	}
	if f.a.radix == 10 { // constant divisors compile to multiplications
		for i := len(dst) - 1; i >= n; i-- {
			dst[i] = byte('0' + body%10)
			body /= 10
		}
	} else {
		for i := len(dst) - 1; i >= n; i-- {
			dst[i] = base32Digits[body&31]
			body >>= 5
		}
	}
	if f.checkLen == 1 {
		var vals [maxLength]byte
		for i, ch := range dst[start:] {
			vals[i] = f.a.valueOf[ch]
		}
		cv := f.cfg.Check.checkValue(vals[:len(dst)-start])
		if f.cfg.Check == CheckMod37 {
			dst = append(dst, mod37Symbols[cv])
		} else {
			dst = append(dst, decimalDigits[cv])
		}
	}
	return dst, nil
}

// Decode returns the sequence number, date and key version of order number
// s, after the checks of Format.Validate. It returns a *FieldError wrapping
// ErrLength, ErrCharacter, ErrCheck, ErrPrefix, ErrDate or ErrVersion (a
// version this Codec holds no key for). A well-formed number decodes to some
// sequence number even if it was never issued; compare against the
// sequence's high-water mark to tell.
func (c *Codec) Decode(s string) (Parts, error) {
	var p parsed
	if err := c.f.parse(s, &p); err != nil {
		return Parts{}, err
	}
	k := c.byVer[p.version]
	if k == nil {
		return Parts{}, fieldErr(ErrVersion, "number", clip(s), "key version %d is not configured", p.version)
	}
	var tweak [4]byte
	tw := tweak[:0]
	var date time.Time
	if c.f.dateLen > 0 {
		dayTweak(&tweak, p.year, p.month, p.day)
		tw = tweak[:]
		date = time.Date(p.year, p.month, p.day, 0, 0, 0, 0, time.UTC)
	}
	seq, err := k.dom.Decrypt(p.body, tw)
	if err != nil { // unreachable: the body is below radix^bodyLen
		return Parts{}, fieldErr(ErrCharacter, "number", clip(s), "%v", err)
	}
	return Parts{Seq: seq, Date: date, Version: p.version}, nil
}
