package ordernum

import (
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
)

// Key is AES key material (16, 24 or 32 bytes: AES-128/192/256) with the
// version number an order number carries when its format has a version
// character. A Key never reveals its material: String, GoString, every fmt
// verb and slog all print only the version and the AES size.
type Key struct {
	version  int
	material []byte
}

// MaxKeyVersion is the highest key version: a Base32 version character
// carries 0–31, a Decimal one 0–9.
const MaxKeyVersion = 31

// NewKey returns a Key holding a copy of material. It returns a *FieldError
// wrapping ErrKey when material is not 16, 24 or 32 bytes or version is
// outside [0, MaxKeyVersion]; the error gives the length, never the bytes.
func NewKey(version int, material []byte) (Key, error) {
	if version < 0 || version > MaxKeyVersion {
		return Key{}, fieldErr(ErrKey, "version", strconv.Itoa(version), "want 0 to %d", MaxKeyVersion)
	}
	if !validKeySize(len(material)) {
		return Key{}, fieldErr(ErrKey, "key", "(redacted)", "is %d bytes, want 16, 24 or 32 (AES-128/192/256)", len(material))
	}
	return Key{version: version, material: append([]byte(nil), material...)}, nil
}

// ParseKey reads key material written as hex (32, 48 or 64 digits) or as
// base64 (standard or URL alphabet, padded or not) encoding 16, 24 or 32
// bytes; text that reads as both is taken as hex. Surrounding white space is ignored. Errors never quote the text;
// they give its length only. Loading the text from a file or the
// environment is the caller's job.
func ParseKey(version int, text string) (Key, error) {
	text = strings.TrimSpace(text)
	if b, err := hex.DecodeString(text); err == nil && validKeySize(len(b)) {
		return NewKey(version, b)
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(text); err == nil && validKeySize(len(b)) {
			return NewKey(version, b)
		}
	}
	return Key{}, fieldErr(ErrKey, "key", "(redacted)", "%d characters of text are not hex or base64 of 16, 24 or 32 bytes", len(text))
}

// Version returns the key version.
func (k Key) Version() int { return k.version }

// Bits returns the AES key size in bits (128, 192 or 256), or 0 for the
// zero Key.
func (k Key) Bits() int { return 8 * len(k.material) }

// IsZero reports whether k is the zero Key (no material).
func (k Key) IsZero() bool { return len(k.material) == 0 }

// String returns e.g. "ordernum.Key{version: 3, AES-256, material redacted}".
func (k Key) String() string {
	if k.IsZero() {
		return "ordernum.Key{zero}"
	}
	return fmt.Sprintf("ordernum.Key{version: %d, AES-%d, material redacted}", k.version, k.Bits())
}

// GoString is String, so %#v does not print the material either.
func (k Key) GoString() string { return k.String() }

// Format prints String for every fmt verb (%v, %+v, %s, %x, %q, ...).
func (k Key) Format(f fmt.State, verb rune) { _, _ = f.Write([]byte(k.String())) }

// LogValue makes log/slog print String.
func (k Key) LogValue() slog.Value { return slog.StringValue(k.String()) }

func validKeySize(n int) bool { return n == 16 || n == 24 || n == 32 }

// SameMaterial reports whether a and b hold the same AES key material,
// whatever their versions, comparing in constant time. Two keys sharing
// material share one permutation: a server refuses that, because they
// would issue identical order numbers.
func SameMaterial(a, b Key) bool {
	return len(a.material) == len(b.material) && subtle.ConstantTimeCompare(a.material, b.material) == 1
}
