// Package ff1 implements the FF1 format-preserving encryption mode of NIST
// SP 800-38G over AES: a keyed permutation of the numeral strings of a
// given radix and length. Encrypting a string of n digits gives another
// string of n digits; distinct inputs always give distinct outputs, and
// Decrypt inverts Encrypt under the same key and tweak.
//
// References:
//   - NIST SP 800-38G, "Recommendation for Block Cipher Modes of
//     Operation: Methods for Format-Preserving Encryption" (March 2016),
//     §5.1 (NUM, STR) and §6.2 (Algorithms 7 and 8: FF1.Encrypt and
//     FF1.Decrypt), https://doi.org/10.6028/NIST.SP.800-38G.
//   - NIST SP 800-38G Rev. 1 (draft, February 2019), §5.2: FF1 requires
//     radix^minlen ≥ 1,000,000 (raised from 100 in the 2016 edition),
//     https://doi.org/10.6028/NIST.SP.800-38Gr1-draft. This package
//     enforces the Rev. 1 bound: see MinDomain.
//
// Two entry points share one implementation of the Feistel rounds:
//
//   - Cipher.Encrypt and Cipher.Decrypt work on numeral strings ([]uint16)
//     of any radix in [2, 65536] and any supported length. When each half
//     of the string fits in 64 bits (up to 38 decimal digits), they run on
//     machine words without allocating; longer strings use math/big.
//   - Domain fixes the length n and the tweak length and works on the
//     integer value of the string (radix^n ≤ 2^64), which is what an
//     order-number or opaque-ID codec needs: no numeral slices at all.
//
// Every type here is immutable after construction and safe for concurrent
// use by any number of goroutines (the AES block cipher from crypto/aes is
// stateless; per-call scratch space comes from a sync.Pool).
//
// FF1 is deterministic: the same key, tweak and plaintext always give the
// same ciphertext. It hides which plaintext a ciphertext came from, not
// whether two ciphertexts came from the same plaintext.
package ff1

import (
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"fmt"
	"math/bits"
	"sync"
)

// MinDomain is the smallest domain size radix^n this package accepts: NIST
// SP 800-38G Rev. 1 (draft, 2019), §5.2, requires radix^minlen ≥ 1,000,000
// for FF1, because small domains are open to message-recovery attacks.
const MinDomain = 1_000_000

// MaxLen is the longest numeral string Encrypt and Decrypt accept, and
// MaxTweak the longest tweak in bytes. SP 800-38G allows up to 2^32-1; these
// tighter implementation limits keep one call's cost bounded (the long-string
// path is quadratic in n) when the input comes from an untrusted caller.
const (
	MaxLen   = 4096
	MaxTweak = 4096
)

// Errors returned by this package. Each is wrapped with the offending field
// and value; test for them with errors.Is.
var (
	// ErrKeySize means the AES key is not 16, 24 or 32 bytes long.
	ErrKeySize = errors.New("ff1: key must be 16, 24 or 32 bytes (AES-128/192/256)")
	// ErrRadix means the radix is outside [2, 65536].
	ErrRadix = errors.New("ff1: radix out of range [2, 65536]")
	// ErrLength means a numeral string's length is outside what FF1 (or
	// this package) allows for the radix: fewer than 2 numerals, a domain
	// radix^n below MinDomain, more than MaxLen numerals, or (for Domain) a
	// domain larger than 2^64.
	ErrLength = errors.New("ff1: numeral string length out of range")
	// ErrNumeral means a numeral is not below the radix, or an integer is
	// not below the domain size.
	ErrNumeral = errors.New("ff1: numeral out of range")
	// ErrTweak means the tweak is longer than MaxTweak or, for a Domain,
	// not of the length the Domain was built for.
	ErrTweak = errors.New("ff1: bad tweak length")
)

// Cipher is FF1 over AES with one key and one radix. It is safe for
// concurrent use.
type Cipher struct {
	block cipher.Block
	radix uint32
}

// New returns an FF1 cipher for numeral strings of the given radix under an
// AES key of 16, 24 or 32 bytes. The key bytes are not retained (only the
// AES key schedule is) and never appear in an error.
func New(key []byte, radix int) (*Cipher, error) {
	switch len(key) {
	case 16, 24, 32:
	default:
		return nil, fmt.Errorf("%w: key length is %d bytes", ErrKeySize, len(key))
	}
	if radix < 2 || radix > 1<<16 {
		return nil, fmt.Errorf("%w: radix %d", ErrRadix, radix)
	}
	block, err := aes.NewCipher(key)
	if err != nil { // unreachable with the sizes checked above
		return nil, fmt.Errorf("ff1: %w", err)
	}
	return &Cipher{block: block, radix: uint32(radix)}, nil
}

// Radix returns the radix the cipher was built for.
func (c *Cipher) Radix() int { return int(c.radix) }

// statePool holds per-call working memory. Buffers handed to the
// cipher.Block interface escape to the heap, so they are pooled rather than
// allocated on every call (0 allocs in steady state).
var statePool = sync.Pool{New: func() any { return new(wordState) }}

// checkLen validates a numeral-string length n for radix: n ≥ 2,
// radix^n ≥ MinDomain and n ≤ MaxLen.
func checkLen(radix uint32, n int) error {
	if n < 2 || n > MaxLen {
		return fmt.Errorf("%w: length %d, want 2 to %d numerals", ErrLength, n, MaxLen)
	}
	// radix^n ≥ MinDomain, computed without overflow.
	p := uint64(1)
	for i := 0; i < n && p < MinDomain; i++ {
		p *= uint64(radix)
	}
	if p < MinDomain {
		return fmt.Errorf("%w: length %d gives a domain of %d^%d = %d values, below the minimum %d (SP 800-38G Rev. 1)",
			ErrLength, n, radix, n, p, MinDomain)
	}
	return nil
}

// pow returns radix^m and whether it fits in a uint64.
func pow(radix uint32, m int) (uint64, bool) {
	p := uint64(1)
	for i := 0; i < m; i++ {
		hi, lo := bits.Mul64(p, uint64(radix))
		if hi != 0 {
			return 0, false
		}
		p = lo
	}
	return p, true
}

// bytesFor returns b = ⌈⌈log2(radix^v)⌉/8⌉ (SP 800-38G Algorithm 7 step 3)
// for powV = radix^v ≥ 2, exactly: ⌈log2 N⌉ is the bit length of N-1.
func bytesFor(powV uint64) int { return (bits.Len64(powV-1) + 7) / 8 }

// header writes P = [1]^1 || [2]^1 || [1]^1 || [radix]^3 || [10]^1 ||
// [u mod 256]^1 || [n]^4 || [t]^4 (Algorithm 7 step 5).
func header(p *[16]byte, radix uint32, u, n, t int) {
	p[0], p[1], p[2] = 1, 2, 1
	p[3], p[4], p[5] = byte(radix>>16), byte(radix>>8), byte(radix)
	p[6] = 10
	p[7] = byte(u)
	p[8], p[9], p[10], p[11] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	p[12], p[13], p[14], p[15] = byte(t>>24), byte(t>>16), byte(t>>8), byte(t)
}

func xorBlock(dst, a, b *[16]byte) {
	for i := range dst {
		dst[i] = a[i] ^ b[i]
	}
}
