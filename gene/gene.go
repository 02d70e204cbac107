// Package gene derives a member's sharding "gene": k bits that a keyed hash
// computes from the member ID.
//
// The sharding gene method puts the same k bits in every ID issued for one
// member, so ID mod 2^k (or ID's gene field) routes all of that member's
// rows to one shard, and a lookup by member ID routes to the same shard
// without a mapping table. Embedding the raw low bits of the member ID
// would do the same but leaks them; here the bits come from SipHash-2-4 under
// a secret 128-bit key, a pseudorandom function, so without the key an ID's
// gene reveals nothing about which member it belongs to beyond what the
// shard itself reveals (1 in 2^k members share it).
//
// Changing the key (or k) re-shards everything: treat both as part of the
// schema.
package gene

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// KeySize is the length in bytes of a gene key.
const KeySize = 16

// MaxBits is the widest gene a Hasher produces.
const MaxBits = 32

var (
	// ErrKeySize is returned by New when the key is not KeySize bytes.
	ErrKeySize = errors.New("gene: key must be 16 bytes")
	// ErrBits is returned by New when the gene width is outside 1..MaxBits.
	ErrBits = errors.New("gene: bits out of range")
)

// Hasher computes k-bit genes under one key. It is immutable and safe for
// concurrent use. The zero value is not usable; call New.
type Hasher struct {
	k0, k1 uint64
	bits   int
}

// New returns a Hasher for genes of the given width (1..MaxBits bits) under a
// 16-byte secret key. Keep the key secret: anyone holding it can test which
// member an ID's gene belongs to.
func New(key []byte, bits int) (*Hasher, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("%w: got %d bytes", ErrKeySize, len(key))
	}
	if bits < 1 || bits > MaxBits {
		return nil, fmt.Errorf("%w: bits = %d, want 1..%d", ErrBits, bits, MaxBits)
	}
	return &Hasher{
		k0:   binary.LittleEndian.Uint64(key[0:8]),
		k1:   binary.LittleEndian.Uint64(key[8:16]),
		bits: bits,
	}, nil
}

// Bits returns the gene width k.
func (h *Hasher) Bits() int { return h.bits }

// Of returns the gene of a member ID given as bytes: a value in [0, 2^k).
// Equal inputs always give equal genes.
func (h *Hasher) Of(member []byte) uint64 {
	return sip24(h.k0, h.k1, member) & (1<<h.bits - 1)
}

// OfString returns the gene of a member ID given as text, equal to
// Of([]byte(member)).
func (h *Hasher) OfString(member string) uint64 {
	return h.Of([]byte(member))
}

// OfUint64 returns the gene of a numeric member ID, hashed as its 8-byte
// big-endian form.
func (h *Hasher) OfUint64(member uint64) uint64 {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], member)
	return h.Of(b[:])
}

// Sum64 returns SipHash-2-4 of msg under a 16-byte key (Aumasson and
// Bernstein, "SipHash: a fast short-input PRF", 2012). The key is read as two
// little-endian words, as in the reference implementation.
func Sum64(key [KeySize]byte, msg []byte) uint64 {
	return sip24(binary.LittleEndian.Uint64(key[0:8]), binary.LittleEndian.Uint64(key[8:16]), msg)
}

func sip24(k0, k1 uint64, m []byte) uint64 {
	v0 := k0 ^ 0x736f6d6570736575
	v1 := k1 ^ 0x646f72616e646f6d
	v2 := k0 ^ 0x6c7967656e657261
	v3 := k1 ^ 0x7465646279746573
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13)
		v1 ^= v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16)
		v3 ^= v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21)
		v3 ^= v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17)
		v1 ^= v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	n := len(m)
	for len(m) >= 8 {
		w := binary.LittleEndian.Uint64(m)
		v3 ^= w
		round()
		round()
		v0 ^= w
		m = m[8:]
	}
	last := uint64(n) << 56
	for i, c := range m {
		last |= uint64(c) << (8 * i)
	}
	v3 ^= last
	round()
	round()
	v0 ^= last
	v2 ^= 0xff
	round()
	round()
	round()
	round()
	return v0 ^ v1 ^ v2 ^ v3
}
