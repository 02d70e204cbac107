package ff1

import (
	"fmt"
	"math/big"
)

// Encrypt enciphers the numeral string src under tweak into dst (FF1.Encrypt,
// SP 800-38G Algorithm 7). Numerals are most significant first, each below
// the radix. dst must have the same length as src and may be src itself.
// Tweaks may be empty and up to MaxTweak bytes long.
//
// It returns ErrLength, ErrNumeral or ErrTweak (wrapped, naming the value)
// for input it cannot encipher, leaving dst unchanged. When each half of the
// string fits in 64 bits (radix^⌈n/2⌉ < 2^64: up to 38 decimal digits) it
// does not allocate.
func (c *Cipher) Encrypt(dst, src []uint16, tweak []byte) error {
	return c.crypt(dst, src, tweak, false)
}

// Decrypt inverts Encrypt (FF1.Decrypt, SP 800-38G Algorithm 8): for every
// key, tweak and valid src, Decrypt(Encrypt(src)) == src. Its contract is
// otherwise that of Encrypt.
func (c *Cipher) Decrypt(dst, src []uint16, tweak []byte) error {
	return c.crypt(dst, src, tweak, true)
}

func (c *Cipher) crypt(dst, src []uint16, tweak []byte, decrypt bool) error {
	n := len(src)
	if len(dst) != n {
		return fmt.Errorf("%w: dst has %d numerals, src %d", ErrLength, len(dst), n)
	}
	if err := checkLen(c.radix, n); err != nil {
		return err
	}
	if len(tweak) > MaxTweak {
		return fmt.Errorf("%w: tweak is %d bytes, maximum %d", ErrTweak, len(tweak), MaxTweak)
	}
	for i, x := range src {
		if uint32(x) >= c.radix {
			return fmt.Errorf("%w: numeral %d at index %d is not below radix %d", ErrNumeral, x, i, c.radix)
		}
	}
	pl, ok := newPlan(c.radix, n, len(tweak))
	if !ok {
		c.cryptBig(dst, src, tweak, decrypt)
		return nil
	}
	a := numWord(c.radix, src[:pl.u])
	b := numWord(c.radix, src[pl.u:])
	s := statePool.Get().(*wordState)
	encP := c.encP(&pl, n, s)
	c.absorb(&pl, &encP, tweak, s)
	if decrypt {
		a, b = c.decryptWords(&pl, s, a, b)
	} else {
		a, b = c.encryptWords(&pl, s, a, b)
	}
	statePool.Put(s)
	strWord(c.radix, a, dst[:pl.u])
	strWord(c.radix, b, dst[pl.u:])
	return nil
}

// numWord is NUM_radix(x) (SP 800-38G §5.1) for a string whose value fits
// in a uint64.
func numWord(radix uint32, x []uint16) uint64 {
	var v uint64
	for _, d := range x {
		v = v*uint64(radix) + uint64(d)
	}
	return v
}

// strWord is STR^m_radix(v) (SP 800-38G §5.1) with m = len(dst).
func strWord(radix uint32, v uint64, dst []uint16) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = uint16(v % uint64(radix))
		v /= uint64(radix)
	}
}

// cryptBig is Algorithms 7 and 8 verbatim on math/big integers, for strings
// whose halves exceed 64 bits. Inputs are already validated.
func (c *Cipher) cryptBig(dst, src []uint16, tweak []byte, decrypt bool) {
	n := len(src)
	u := n / 2
	v := n - u
	t := len(tweak)
	radix := big.NewInt(int64(c.radix))
	num := func(x []uint16) *big.Int {
		z := new(big.Int)
		d := new(big.Int)
		for _, x := range x {
			z.Mul(z, radix)
			z.Add(z, d.SetUint64(uint64(x)))
		}
		return z
	}
	A, B := num(src[:u]), num(src[u:])
	powU := new(big.Int).Exp(radix, big.NewInt(int64(u)), nil)
	powV := new(big.Int).Exp(radix, big.NewInt(int64(v)), nil)
	b := (new(big.Int).Sub(powV, big.NewInt(1)).BitLen() + 7) / 8 // step 3
	d := 4*((b+3)/4) + 4                                          // step 4

	var P [16]byte
	header(&P, c.radix, u, n, t) // step 5
	pad := (16 - (t+b+1)%16) % 16
	Q := make([]byte, t+pad+1+b)
	copy(Q, tweak)
	S := make([]byte, (d+15)/16*16)
	var R, x [16]byte
	y := new(big.Int)
	for r := 0; r < 10; r++ {
		i := r
		if decrypt {
			i = 9 - r
		}
		// step 6.i: Q = T || [0]^pad || [i]^1 || [NUM(B)]^b (NUM(A) when decrypting)
		Q[t+pad] = byte(i)
		if decrypt {
			A.FillBytes(Q[t+pad+1:])
		} else {
			B.FillBytes(Q[t+pad+1:])
		}
		// step 6.ii: R = PRF(P || Q), the CBC-MAC of AES with a zero IV.
		c.block.Encrypt(R[:], P[:])
		for j := 0; j < len(Q); j += 16 {
			xorBlock(&x, &R, (*[16]byte)(Q[j:j+16]))
			c.block.Encrypt(R[:], x[:])
		}
		// step 6.iii: S = R || CIPH(R ⊕ [1]^16) || CIPH(R ⊕ [2]^16) ..., first d bytes.
		copy(S, R[:])
		for j := 1; j < len(S)/16; j++ {
			x = R
			x[15] ^= byte(j)
			x[14] ^= byte(j >> 8)
			c.block.Encrypt(S[16*j:16*j+16], x[:])
		}
		y.SetBytes(S[:d]) // step 6.iv
		mod := powU       // step 6.v
		if i&1 == 1 {
			mod = powV
		}
		if decrypt {
			// Algorithm 8 steps 6.vi–6.ix.
			cc := new(big.Int).Sub(B, y)
			cc.Mod(cc, mod)
			A, B = cc, A
		} else {
			// Algorithm 7 steps 6.vi–6.ix.
			cc := new(big.Int).Add(A, y)
			cc.Mod(cc, mod)
			A, B = B, cc
		}
	}
	strBig(c.radix, A, dst[:u])
	strBig(c.radix, B, dst[u:])
}

// strBig is STR^m_radix(x) with m = len(dst); it consumes x.
func strBig(radix uint32, x *big.Int, dst []uint16) {
	r := big.NewInt(int64(radix))
	m := new(big.Int)
	for i := len(dst) - 1; i >= 0; i-- {
		x.QuoRem(x, r, m)
		dst[i] = uint16(m.Uint64())
	}
}
