package ff1

import (
	"encoding/binary"
	"math/bits"
)

// plan is the shape of one FF1 computation whose halves fit in machine
// words: radix^v < 2^64, so NUM(A), NUM(B) and every modulus are uint64.
//
// In Algorithm 7, Q = T || [0]^((-t-b-1) mod 16) || [i]^1 || [NUM(B)]^b.
// Since 1+b ≤ 9 < 16, the round number and NUM(B) always fall in the last
// 16-byte block of Q; the blocks before it hold only tweak and zero padding
// and are the same in all ten rounds. The CBC-MAC over P and those blocks
// is therefore computed once per call (once per Domain when there are none),
// and each round costs exactly one AES block.
type plan struct {
	u, v       int
	powU, powV uint64 // radix^u, radix^v
	recU, recV uint64 // ⌊(2^64-1)/powU⌋, ⌊(2^64-1)/powV⌋ for Barrett reduction
	b, d       int    // Algorithm 7 steps 3 and 4
	t          int    // tweak length in bytes
	blocks     int    // full tweak/padding blocks of Q before its last block
}

// newPlan returns the word plan for radix, length n and tweak length t, and
// false when radix^v does not fit in a uint64.
func newPlan(radix uint32, n, t int) (plan, bool) {
	u := n / 2
	v := n - u
	powV, ok := pow(radix, v)
	if !ok {
		return plan{}, false
	}
	powU, _ := pow(radix, u) // u ≤ v, so it fits too
	b := bytesFor(powV)      // ≤ 8
	d := 4*((b+3)/4) + 4     // ≤ 12
	qlen := t + 1 + b
	qlen += (16 - qlen%16) % 16
	return plan{
		u: u, v: v, powU: powU, powV: powV,
		recU: ^uint64(0) / powU, recV: ^uint64(0) / powV,
		b: b, d: d, t: t, blocks: qlen/16 - 1,
	}, true
}

// wordState is the per-call working memory of the word path. The CBC-MAC
// chaining value and Q's last block are kept as 128-bit big-endian numbers
// in two words each, so a round is two XORs, one AES block and a reduction.
type wordState struct {
	stateHi, stateLo uint64 // CBC-MAC chaining value after P and Q's leading blocks
	lastHi, lastLo   uint64 // Q's last block with the round byte and NUM(B) zeroed
	x                [16]byte
}

// encP returns CIPH(P) for the plan's header, the first CBC-MAC block.
func (c *Cipher) encP(pl *plan, n int, s *wordState) [16]byte {
	header(&s.x, c.radix, pl.u, n, pl.t)
	c.block.Encrypt(s.x[:], s.x[:])
	return s.x
}

// absorb runs the CBC-MAC from CIPH(P) over Q's leading tweak/padding
// blocks and lays out the constant part of Q's last block.
func (c *Cipher) absorb(pl *plan, encP *[16]byte, tweak []byte, s *wordState) {
	s.x = *encP
	for j := 0; j < pl.blocks; j++ {
		for i := range s.x {
			if k := 16*j + i; k < len(tweak) {
				s.x[i] ^= tweak[k]
			}
		}
		c.block.Encrypt(s.x[:], s.x[:])
	}
	s.stateHi = binary.BigEndian.Uint64(s.x[0:8])
	s.stateLo = binary.BigEndian.Uint64(s.x[8:16])
	s.lastHi, s.lastLo = 0, 0
	if off := 16 * pl.blocks; off < len(tweak) {
		// Tweak bytes in the last block occupy its first 15-b bytes.
		clear(s.x[:])
		copy(s.x[:15-pl.b], tweak[off:])
		s.lastHi = binary.BigEndian.Uint64(s.x[0:8])
		s.lastLo = binary.BigEndian.Uint64(s.x[8:16])
	}
}

// prf returns NUM(S) mod m for round i with NUM(B) = num (Algorithm 7
// steps 6.i–6.iv, reduced mod radix^m as step 6.vi needs). With d ≤ 16, S
// is a prefix of R itself.
func (c *Cipher) prf(pl *plan, s *wordState, i int, num, m, rec uint64) uint64 {
	// Q's last block = tweak tail | zeros | [i]^1 | [num]^b, big-endian.
	hi, lo := s.lastHi, s.lastLo|num
	if pl.b == 8 {
		hi |= uint64(i)
	} else {
		lo |= uint64(i) << (8 * pl.b)
	}
	binary.BigEndian.PutUint64(s.x[0:8], s.stateHi^hi)
	binary.BigEndian.PutUint64(s.x[8:16], s.stateLo^lo)
	c.block.Encrypt(s.x[:], s.x[:])
	rHi := binary.BigEndian.Uint64(s.x[0:8])
	switch pl.d {
	case 8:
		return barrett(rHi, m, rec)
	case 12:
		rLo := binary.BigEndian.Uint64(s.x[8:16])
		return bits.Rem64(rHi>>32, rHi<<32|rLo>>32, m)
	default: // 16
		return bits.Rem64(rHi, binary.BigEndian.Uint64(s.x[8:16]), m)
	}
}

// barrett returns x mod m given rec = ⌊(2^64-1)/m⌋, without a division
// instruction. The estimate q = ⌊x·rec/2^64⌋ is at most 2 below ⌊x/m⌋
// (rec > (2^64-1)/m - 1), so x - q·m < 3m and at most two corrections follow.
func barrett(x, m, rec uint64) uint64 {
	q, _ := bits.Mul64(x, rec)
	r := x - q*m
	for r >= m {
		r -= m
	}
	return r
}

// encryptWords runs the ten rounds of Algorithm 7 on a = NUM(A) < radix^u
// and b = NUM(B) < radix^v.
func (c *Cipher) encryptWords(pl *plan, s *wordState, a, b uint64) (uint64, uint64) {
	for i := 0; i < 10; i++ {
		m, rec := pl.powU, pl.recU
		if i&1 == 1 {
			m, rec = pl.powV, pl.recV
		}
		y := c.prf(pl, s, i, b, m, rec)
		sum, carry := bits.Add64(a, y, 0)
		if carry != 0 || sum >= m {
			sum -= m
		}
		a, b = b, sum
	}
	return a, b
}

// decryptWords runs the ten rounds of Algorithm 8 on a = NUM(A) < radix^u
// and b = NUM(B) < radix^v.
func (c *Cipher) decryptWords(pl *plan, s *wordState, a, b uint64) (uint64, uint64) {
	for i := 9; i >= 0; i-- {
		m, rec := pl.powU, pl.recU
		if i&1 == 1 {
			m, rec = pl.powV, pl.recV
		}
		y := c.prf(pl, s, i, a, m, rec)
		var diff uint64
		if b >= y {
			diff = b - y
		} else {
			diff = m - (y - b)
		}
		a, b = diff, a
	}
	return a, b
}
