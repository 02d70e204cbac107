package ordernum

import (
	"math"
	"strconv"

	"github.com/idmint/idmint/ordernum/ff1"
)

// Opaque is a keyed permutation of the integers [0, 2^Bits): FF1 with radix
// 2 on Bits-bit strings. It turns Snowflake or segment IDs into IDs that
// reveal neither volume nor order, for APIs that must not expose them, and
// turns them back with the key.
//
// Guarantees:
//   - Bijective: distinct IDs give distinct opaque IDs, and Decode(Encode(x))
//     == x, so uniqueness carries over and no lookup table is needed.
//   - Range-preserving: outputs stay below 2^Bits; with Bits = 63 they are
//     non-negative int64s (EncodeInt64).
//   - Unguessable without the key: FF1's security (NIST SP 800-38G) makes
//     the outputs of consecutive IDs look like a random permutation's, so
//     they reveal neither count nor creation order.
//   - Deterministic: the same ID always maps to the same opaque ID; equality
//     is therefore visible, as it must be for IDs.
//
// It is not authenticated: any value below 2^Bits decodes to some ID.
// Rotating the key changes every opaque ID; keep the old Opaque to decode
// IDs handed out under it. Opaque is immutable and safe for concurrent use.
type Opaque struct {
	dom   *ff1.Domain
	bits  int
	tweak []byte
}

// NewOpaque returns the permutation of [0, 2^bits) under key (its version
// is ignored), for bits in [20, 64] (2^20 is the smallest domain FF1 allows,
// NIST SP 800-38G Rev. 1). label is the FF1 tweak: different labels (say
// "user" and "order") give unrelated permutations under one key; labels of
// up to 11 bytes cost nothing extra, each further 16 bytes one AES block per
// call. Bits below 32 are allowed but weaker: published distinguishers for
// FF1 on short binary strings (e.g. IACR ePrint 2020/1311) need far less
// data there. Errors are
// *FieldErrors wrapping ErrKey or ErrConfig.
func NewOpaque(key Key, bits int, label string) (*Opaque, error) {
	if key.IsZero() {
		return nil, fieldErr(ErrKey, "key", "(zero)", "no key material")
	}
	if bits < 20 || bits > 64 {
		return nil, fieldErr(ErrConfig, "bits", strconv.Itoa(bits), "want 20 to 64 (2^20 is FF1's minimum domain)")
	}
	if len(label) > ff1.MaxTweak {
		return nil, fieldErr(ErrConfig, "label", clip(label), "is %d bytes, at most %d", len(label), ff1.MaxTweak)
	}
	c, err := ff1.New(key.material, 2)
	if err != nil {
		return nil, fieldErr(ErrKey, "key", "(redacted)", "%v", err)
	}
	dom, err := c.Domain(bits, len(label))
	if err != nil { // unreachable with bits in range
		return nil, fieldErr(ErrConfig, "bits", strconv.Itoa(bits), "%v", err)
	}
	return &Opaque{dom: dom, bits: bits, tweak: []byte(label)}, nil
}

// Bits returns the width of the domain.
func (o *Opaque) Bits() int { return o.bits }

// Encode returns the opaque ID for id. It returns a *FieldError wrapping
// ErrRange when id ≥ 2^Bits.
func (o *Opaque) Encode(id uint64) (uint64, error) { return o.crypt(id, false) }

// Decode inverts Encode. It returns a *FieldError wrapping ErrRange when id
// ≥ 2^Bits.
func (o *Opaque) Decode(id uint64) (uint64, error) { return o.crypt(id, true) }

func (o *Opaque) crypt(id uint64, decrypt bool) (uint64, error) {
	if id > o.dom.Max() {
		return 0, fieldErr(ErrRange, "id", strconv.FormatUint(id, 10), "not below 2^%d", o.bits)
	}
	if decrypt {
		return o.dom.Decrypt(id, o.tweak)
	}
	return o.dom.Encrypt(id, o.tweak)
}

// EncodeInt64 is Encode for the non-negative int64 IDs the generators
// return; with Bits ≤ 63 the result is a non-negative int64 too. It returns
// ErrRange for a negative id or one ≥ 2^Bits, and ErrConfig when Bits is 64
// (the result might not fit an int64).
func (o *Opaque) EncodeInt64(id int64) (int64, error) { return o.cryptInt64(id, false) }

// DecodeInt64 inverts EncodeInt64, with the same errors.
func (o *Opaque) DecodeInt64(id int64) (int64, error) { return o.cryptInt64(id, true) }

func (o *Opaque) cryptInt64(id int64, decrypt bool) (int64, error) {
	if o.bits > 63 {
		return 0, fieldErr(ErrConfig, "bits", strconv.Itoa(o.bits), "int64 IDs need bits ≤ 63")
	}
	if id < 0 {
		return 0, fieldErr(ErrRange, "id", strconv.FormatInt(id, 10), "negative")
	}
	x, err := o.crypt(uint64(id), decrypt)
	if x > math.MaxInt64 { // unreachable with bits ≤ 63
		return 0, fieldErr(ErrRange, "id", strconv.FormatInt(id, 10), "result exceeds int64")
	}
	return int64(x), err
}
