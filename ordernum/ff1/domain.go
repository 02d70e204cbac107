package ff1

import (
	"fmt"
	"math/bits"
)

// Domain is FF1 on the integers [0, radix^n) for one length n and one tweak
// length, with radix^n ≤ 2^64: Encrypt(x) is the value of the FF1
// encryption of STR^n_radix(x), so it agrees exactly with Cipher.Encrypt on
// the same numeral string. It precomputes the tweak-independent part of the
// PRF, works on machine words only and never allocates in steady state. It
// is safe for concurrent use.
type Domain struct {
	c    *Cipher
	n    int
	pl   plan
	encP [16]byte // CIPH(P)
	max  uint64
}

// Domain returns the FF1 permutation of [0, radix^n) for tweaks of exactly
// tweakLen bytes. It returns ErrLength if radix^n is below MinDomain or
// above 2^64, and ErrTweak if tweakLen is negative or above MaxTweak.
func (c *Cipher) Domain(n, tweakLen int) (*Domain, error) {
	if err := checkLen(c.radix, n); err != nil {
		return nil, err
	}
	if tweakLen < 0 || tweakLen > MaxTweak {
		return nil, fmt.Errorf("%w: tweak length %d, want 0 to %d", ErrTweak, tweakLen, MaxTweak)
	}
	pl, ok := newPlan(c.radix, n, tweakLen)
	var hi, lo uint64
	if ok {
		hi, lo = bits.Mul64(pl.powU, pl.powV)
	}
	if !ok || hi > 1 || (hi == 1 && lo != 0) {
		return nil, fmt.Errorf("%w: length %d gives a domain of %d^%d values, more than 2^64", ErrLength, n, c.radix, n)
	}
	d := &Domain{c: c, n: n, pl: pl, max: lo - 1} // radix^n = 2^64 wraps to max = 2^64-1
	s := statePool.Get().(*wordState)
	d.encP = c.encP(&d.pl, n, s)
	statePool.Put(s)
	return d, nil
}

// Len returns the numeral-string length n of the domain.
func (d *Domain) Len() int { return d.n }

// Max returns radix^n - 1, the largest value Encrypt and Decrypt accept.
func (d *Domain) Max() uint64 { return d.max }

// Encrypt returns the FF1 encryption of x under tweak. It returns ErrNumeral
// if x > Max() and ErrTweak if len(tweak) differs from the Domain's tweak
// length. For a fixed tweak, Encrypt is a bijection on [0, Max()].
func (d *Domain) Encrypt(x uint64, tweak []byte) (uint64, error) {
	return d.crypt(x, tweak, false)
}

// Decrypt inverts Encrypt: Decrypt(Encrypt(x, t), t) == x for every x ≤
// Max(). Its errors are those of Encrypt.
func (d *Domain) Decrypt(x uint64, tweak []byte) (uint64, error) {
	return d.crypt(x, tweak, true)
}

func (d *Domain) crypt(x uint64, tweak []byte, decrypt bool) (uint64, error) {
	pl := &d.pl
	if len(tweak) != pl.t {
		return 0, fmt.Errorf("%w: tweak is %d bytes, this domain takes %d", ErrTweak, len(tweak), pl.t)
	}
	a, b := x/pl.powV, x%pl.powV
	if a >= pl.powU {
		return 0, fmt.Errorf("%w: value %d exceeds the domain maximum %d", ErrNumeral, x, d.max)
	}
	s := statePool.Get().(*wordState)
	d.c.absorb(pl, &d.encP, tweak, s)
	if decrypt {
		a, b = d.c.decryptWords(pl, s, a, b)
	} else {
		a, b = d.c.encryptWords(pl, s, a, b)
	}
	statePool.Put(s)
	return a*pl.powV + b, nil
}
