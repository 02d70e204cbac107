package ordernum

import (
	"math"
	"math/bits"
	"strconv"
	"strings"

	"github.com/idmint/idmint/ordernum/ff1"
)

// Config describes an order-number format. The zero value of each field is
// documented; NewFormat validates all of them together. Its fields are the
// keys of the textual spec ParseFormat reads.
//
// An order number is, left to right:
//
//	prefix | version | date     | body       | check
//	"88"   | "3"     | "250817" | "53637579" | "2"    →  883250817536375792
//
// The body is the FF1 encryption of the sequence number, so distinct
// sequence numbers give distinct bodies and neighbouring sequence numbers
// give unrelated ones.
type Config struct {
	// Alphabet is Decimal or Base32. Empty means Decimal.
	Alphabet Alphabet `json:"alphabet,omitempty" yaml:"alphabet,omitempty"`
	// Length is the total number of characters, prefix and check included
	// (hyphens and spaces are not characters). Required.
	Length int `json:"length" yaml:"length"`
	// Prefix is a fixed business code written in the alphabet's canonical
	// characters (digits for Decimal; upper case without I, L, O, U for
	// Base32). Empty means none.
	Prefix string `json:"prefix,omitempty" yaml:"prefix,omitempty"`
	// Date is "yyMMdd" (years 2000–2099), "yyyyMMdd" (years 1–9999) or
	// empty for no date part. A date part reveals the day, never the
	// volume; capacity is then per day.
	Date string `json:"date,omitempty" yaml:"date,omitempty"`
	// Version adds one key-version character after the prefix, so keys can
	// be rotated and numbers issued under an old key still decode: 10
	// versions for Decimal, 32 for Base32. False means no version
	// character and a single key.
	Version bool `json:"version,omitempty" yaml:"version,omitempty"`
	// Check is the check-character scheme. Empty (CheckDefault) means
	// CheckDamm for Decimal and CheckMod37 for Base32.
	Check Check `json:"check,omitempty" yaml:"check,omitempty"`
}

// Date layouts.
const (
	DateNone     = ""
	DateYYMMDD   = "yyMMdd"
	DateYYYYMMDD = "yyyyMMdd"
)

// UsageWarning is the fraction of a format's capacity at which callers
// should warn (metrics and logs): see Format.NearCapacity.
const UsageWarning = 0.8

// Format is a validated order-number format. It is an immutable value, safe
// to copy and to use concurrently. The zero Format is not valid; build one
// with NewFormat or ParseFormat.
type Format struct {
	cfg      Config
	a        *alpha
	dateLen  int
	verLen   int
	checkLen int
	bodyLen  int
	capacity uint64 // radix^bodyLen, ≤ 2^64-1
	warnFrom uint64 // first seq with (seq+1)/capacity ≥ UsageWarning
}

// maxLength bounds Config.Length; it keeps every order number in a small
// stack buffer.
const maxLength = 64

// NewFormat validates cfg and returns the Format. Every error is a
// *FieldError wrapping ErrConfig that names the field and its value: an
// unknown alphabet, check or date layout, a check scheme that does not fit
// the alphabet, a prefix outside the alphabet, or a length that leaves a body
// whose domain is below FF1's minimum of 1,000,000 values (NIST SP 800-38G
// Rev. 1, §5.2) or above 2^64-1.
func NewFormat(cfg Config) (Format, error) {
	if cfg.Alphabet == "" {
		cfg.Alphabet = Decimal
	}
	a := alphaOf(cfg.Alphabet)
	if a == nil {
		return Format{}, fieldErr(ErrConfig, "alphabet", string(cfg.Alphabet), "want %q or %q", Decimal, Base32)
	}
	switch {
	case cfg.Check == CheckDefault && a == decimalAlpha:
		cfg.Check = CheckDamm
	case cfg.Check == CheckDefault:
		cfg.Check = CheckMod37
	case cfg.Check == CheckNone:
	case a == decimalAlpha && (cfg.Check == CheckDamm || cfg.Check == CheckLuhn):
	case a == base32Alpha && cfg.Check == CheckMod37:
	case a == decimalAlpha:
		return Format{}, fieldErr(ErrConfig, "check", string(cfg.Check), "want %q, %q or %q for alphabet %s", CheckDamm, CheckLuhn, CheckNone, a.name)
	default:
		return Format{}, fieldErr(ErrConfig, "check", string(cfg.Check), "want %q or %q for alphabet %s", CheckMod37, CheckNone, a.name)
	}
	for i := 0; i < len(cfg.Prefix); i++ {
		if a.valueOf[cfg.Prefix[i]] == invalid {
			return Format{}, fieldErr(ErrConfig, "prefix", clip(cfg.Prefix), "character %q at index %d is not a canonical %s character (%s)", cfg.Prefix[i], i, a.name, a.digits)
		}
	}
	f := Format{cfg: cfg, a: a}
	switch cfg.Date {
	case DateNone:
	case DateYYMMDD, DateYYYYMMDD:
		f.dateLen = len(cfg.Date)
	default:
		return Format{}, fieldErr(ErrConfig, "date", clip(cfg.Date), "want %q, %q or empty", DateYYMMDD, DateYYYYMMDD)
	}
	if cfg.Version {
		f.verLen = 1
	}
	if cfg.Check != CheckNone {
		f.checkLen = 1
	}
	if cfg.Length <= 0 || cfg.Length > maxLength {
		return Format{}, fieldErr(ErrConfig, "length", strconv.Itoa(cfg.Length), "want 1 to %d characters", maxLength)
	}
	fixed := len(cfg.Prefix) + f.verLen + f.dateLen + f.checkLen
	f.bodyLen = cfg.Length - fixed
	if f.bodyLen <= 0 {
		return Format{}, fieldErr(ErrConfig, "length", strconv.Itoa(cfg.Length), "leaves no room for a body after %d prefix, version, date and check characters", fixed)
	}
	capacity, ok := uint64(1), true
	for range f.bodyLen {
		hi, lo := bits.Mul64(capacity, uint64(a.radix))
		if hi != 0 {
			ok = false
			break
		}
		capacity = lo
	}
	if !ok {
		return Format{}, fieldErr(ErrConfig, "length", strconv.Itoa(cfg.Length),
			"leaves a body of %d %s characters, a domain of %d^%d values, more than 64 bits; shorten it to at most %d body characters",
			f.bodyLen, a.name, a.radix, f.bodyLen, maxBody(a.radix))
	}
	if capacity < ff1.MinDomain {
		return Format{}, fieldErr(ErrConfig, "length", strconv.Itoa(cfg.Length),
			"leaves a body of %d %s characters, a domain of %d values, below FF1's minimum of %d (NIST SP 800-38G Rev. 1); lengthen it by %d",
			f.bodyLen, a.name, capacity, ff1.MinDomain, minBody(a.radix)-f.bodyLen)
	}
	f.capacity = capacity
	f.warnFrom = capacity - capacity/5 - 1 // ceil(0.8·capacity) - 1
	return f, nil
}

func maxBody(radix int) int {
	n := 0
	for p := uint64(1); ; n++ {
		hi, lo := bits.Mul64(p, uint64(radix))
		if hi != 0 {
			return n
		}
		p = lo
	}
}

func minBody(radix int) int {
	n := 0
	for p := uint64(1); p < ff1.MinDomain; n++ {
		p *= uint64(radix)
	}
	return n
}

// ParseFormat reads a format from its compact textual spec: comma-separated
// key=value pairs using Config's field names, in any order, for example
//
//	length=16
//	alphabet=base32,length=12,prefix=K,date=yyMMdd,version=true
//	alphabet=decimal,length=16,prefix=88,check=luhn
//
// "version" alone means version=true. Omitted keys take Config's zero-value
// defaults. Errors are *FieldErrors wrapping ErrConfig naming the key and
// value; Format.String returns a spec that ParseFormat reads back to an
// equal Format.
func ParseFormat(spec string) (Format, error) {
	var cfg Config
	seen := map[string]bool{}
	for item := range strings.SplitSeq(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, value, hasValue := strings.Cut(item, "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if seen[key] {
			return Format{}, fieldErr(ErrConfig, key, clip(value), "given twice in spec")
		}
		seen[key] = true
		switch key {
		case "alphabet":
			cfg.Alphabet = Alphabet(value)
		case "length":
			n, err := strconv.Atoi(value)
			if err != nil {
				return Format{}, fieldErr(ErrConfig, "length", clip(value), "not an integer")
			}
			cfg.Length = n
		case "prefix":
			cfg.Prefix = value
		case "date":
			cfg.Date = value
		case "version":
			if !hasValue {
				value = "true"
			}
			b, err := strconv.ParseBool(value)
			if err != nil {
				return Format{}, fieldErr(ErrConfig, "version", clip(value), "want true or false")
			}
			cfg.Version = b
		case "check":
			cfg.Check = Check(value)
		default:
			return Format{}, fieldErr(ErrConfig, clip(key), clip(value), "unknown spec key; want alphabet, length, prefix, date, version or check")
		}
	}
	if !seen["length"] {
		return Format{}, fieldErr(ErrConfig, "length", "", "missing from spec %q", clip(spec))
	}
	return NewFormat(cfg)
}

// MustParseFormat is ParseFormat for constant specs; it panics on error.
func MustParseFormat(spec string) Format {
	f, err := ParseFormat(spec)
	if err != nil {
		panic(err)
	}
	return f
}

// String returns the format's spec with defaults filled in, e.g.
// "alphabet=decimal,length=16,prefix=88,date=yyMMdd,version=true,check=damm".
func (f Format) String() string {
	if f.a == nil {
		return "ordernum.Format(invalid)"
	}
	var b strings.Builder
	b.WriteString("alphabet=" + string(f.cfg.Alphabet))
	b.WriteString(",length=" + strconv.Itoa(f.cfg.Length))
	if f.cfg.Prefix != "" {
		b.WriteString(",prefix=" + f.cfg.Prefix)
	}
	if f.cfg.Date != "" {
		b.WriteString(",date=" + f.cfg.Date)
	}
	if f.cfg.Version {
		b.WriteString(",version=true")
	}
	b.WriteString(",check=" + string(f.cfg.Check))
	return b.String()
}

// Config returns the format's configuration with defaults filled in.
func (f Format) Config() Config { return f.cfg }

// Length returns the number of characters in an order number.
func (f Format) Length() int { return f.cfg.Length }

// BodyLength returns the number of characters the encrypted sequence takes.
func (f Format) BodyLength() int { return f.bodyLen }

// Radix returns 10 for Decimal and 32 for Base32.
func (f Format) Radix() int {
	if f.a == nil {
		return 0
	}
	return f.a.radix
}

// Versions returns how many key versions the format can carry: 10 or 32
// with a version character, 1 without.
func (f Format) Versions() int {
	if f.verLen == 0 || f.a == nil {
		return 1
	}
	return f.a.radix
}

// HasDate reports whether the format has a date part (capacity per day).
func (f Format) HasDate() bool { return f.dateLen > 0 }

// Capacity returns how many distinct order numbers the format can issue:
// radix^BodyLength, per day when the format has a date part. Sequence
// numbers run from 0 to Capacity()-1; Encode refuses anything beyond with
// ErrCapacity, never wrapping around.
func (f Format) Capacity() uint64 { return f.capacity }

// Usage returns the fraction of the capacity used once sequence numbers 0
// to seq have been issued: (seq+1)/Capacity(). It exceeds 1 for a seq
// Encode would refuse.
func (f Format) Usage(seq uint64) float64 {
	if f.capacity == 0 {
		return math.Inf(1)
	}
	return (float64(seq) + 1) / float64(f.capacity)
}

// NearCapacity reports whether issuing seq brings usage to UsageWarning
// (80 %) or more: the caller's cue to raise a metric and log a warning
// before the format runs out (for a date format: before the day runs out).
func (f Format) NearCapacity(seq uint64) bool { return seq >= f.warnFrom }
