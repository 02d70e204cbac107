package analyze

import (
	"math"
	"math/rand/v2"
)

// MaxMod is the largest N of the mod-N test; N runs from 2 to MaxMod.
const MaxMod = 1024

// Mod is the mod-N balance of the IDs' values: how evenly `id % N` would
// spread them over N shards, for every N in 2…MaxMod.
type Mod struct {
	// Sample is how many IDs were counted; Sampled is true when that is a
	// fixed-seed uniform sample rather than all of them.
	Sample  int  `json:"sample"`
	Sampled bool `json:"sampled"`
	// ByN holds N = 2…MaxMod, in order.
	ByN []ModN `json:"by_n"`
	// Worst is the N whose buckets are least likely to be uniform (the
	// largest Wilson–Hilferty z of its chi-square).
	Worst ModN `json:"worst"`
	// WorstBuckets counts the IDs in each residue 0…N-1 of Worst.N.
	WorstBuckets []int `json:"worst_buckets"`
	// Alpha is the per-N p-value below which an N's imbalance is more than
	// chance: 0.001 divided by the 1,023 Ns tested (Bonferroni), so uniform
	// IDs are reported skewed with probability under 0.1 %.
	Alpha float64 `json:"alpha"`
	// MinShare is how far over its share the fullest residue must be for
	// an N to count as skewed (besides p < Alpha): 1.25, a shard a quarter
	// over its share. It keeps tiny real effects out of the findings, such
	// as a random sequence start in [0, 4096) being 7 % rarer for some
	// residues mod 294, which a large sample makes significant.
	MinShare float64 `json:"min_share"`
	Skewed   bool    `json:"skewed"`
	// SkewedNs counts the Ns with p < Alpha and MaxShare >= MinShare.
	SkewedNs int `json:"skewed_ns"`
}

// ModN is the chi-square goodness of fit of id mod N to uniform.
type ModN struct {
	N    int     `json:"n"`
	Chi2 float64 `json:"chi2"`
	// P is the probability of a chi-square at least this large with N-1
	// degrees of freedom if the residues were uniform.
	P float64 `json:"p"`
	// Z is the Wilson–Hilferty normal approximation of the chi-square: a
	// score that does not underflow, used to rank Ns.
	Z float64 `json:"z"`
	// MaxShare and MinShare are the largest and smallest bucket over the
	// expected count (1 is perfect); Empty counts empty buckets.
	MaxShare float64 `json:"max_share"`
	MinShare float64 `json:"min_share"`
	Empty    int     `json:"empty"`
}

func (c *collector) modStats(scratch []uint32) *Mod {
	n := c.n
	sample := min(n, c.opt.ModSample)
	m := &Mod{Sample: sample, Sampled: sample < n, Alpha: 0.001 / (MaxMod - 1), MinShare: 1.25}
	// Pick the sample: Knuth's selection sampling (TAOCP vol. 2, 3.4.2,
	// Algorithm S) keeps input order and takes each ID with equal chance.
	// The picks go in scratch; all IDs are counted in place.
	pick := scratch[:0]
	if sample < n {
		rng := rand.New(rand.NewPCG(0x1d, 0x6d))
		for i := 0; i < n && len(pick) < sample; i++ {
			if rng.IntN(n-i) < sample-len(pick) {
				pick = append(pick, uint32(i))
			}
		}
	}
	col := &c.lo
	if c.isOrder {
		col = &c.modvs
	}
	narrow := c.isOrder || !c.wide
	// vals are the sampled values; nil counts every value of col.
	var vals []uint64
	var wide []key
	switch {
	case narrow && sample < n:
		vals = make([]uint64, len(pick))
		for j, i := range pick {
			vals[j] = col.at(int(i))
		}
	case !narrow:
		wide = make([]key, sample)
		for j := range wide {
			i := j
			if sample < n {
				i = int(pick[j])
			}
			wide[j] = c.key(i)
		}
	}
	counts := make([]int, MaxMod)
	m.ByN = make([]ModN, 0, MaxMod-1)
	for N := 2; N <= MaxMod; N++ {
		cnt := counts[:N]
		clear(cnt)
		u := uint64(N)
		switch {
		case vals != nil:
			for _, v := range vals {
				cnt[v%u]++
			}
		case narrow:
			left := n
			for _, ch := range col.chunks {
				for _, v := range ch[:min(len(ch), left)] {
					cnt[v%u]++
				}
				left -= len(ch)
			}
		default:
			c1 := (math.MaxUint64%u + 1) % u // 2^64 mod N
			c2 := c1 * c1 % u                // 2^128 mod N
			for _, k := range wide {
				cnt[(k[0]%u*c2+k[1]%u*c1+k[2]%u)%u]++
			}
		}
		r := chiSquare(cnt, sample)
		r.N = N
		m.ByN = append(m.ByN, r)
		if N == 2 || r.Z > m.Worst.Z {
			m.Worst = r
			m.WorstBuckets = append(m.WorstBuckets[:0], cnt...)
		}
		if m.IsSkewed(r) {
			m.SkewedNs++
		}
	}
	m.Skewed = m.SkewedNs > 0
	return m
}

// IsSkewed reports whether r counts as skewed: p < Alpha and the fullest
// residue at least MinShare times its share.
func (m *Mod) IsSkewed(r ModN) bool { return r.P < m.Alpha && r.MaxShare >= m.MinShare }

func chiSquare(cnt []int, total int) ModN {
	exp := float64(total) / float64(len(cnt))
	var chi float64
	r := ModN{MinShare: math.Inf(1)}
	for _, o := range cnt {
		d := float64(o) - exp
		chi += d * d / exp
		share := float64(o) / exp
		r.MaxShare = max(r.MaxShare, share)
		r.MinShare = min(r.MinShare, share)
		if o == 0 {
			r.Empty++
		}
	}
	df := float64(len(cnt) - 1)
	r.Chi2 = chi
	r.P = gammaQ(df/2, chi/2)
	// Wilson and Hilferty (1931): (X/k)^(1/3) is close to normal with mean
	// 1 - 2/(9k) and variance 2/(9k).
	v := 2 / (9 * df)
	r.Z = (math.Cbrt(chi/df) - (1 - v)) / math.Sqrt(v)
	return r
}

// gammaQ is the regularised upper incomplete gamma function Q(a, x), so the
// chi-square survival function for k degrees of freedom is Q(k/2, x/2). It
// uses the power series of P(a, x) below x = a+1 and the continued fraction
// of Q(a, x) (evaluated by the modified Lentz method) above, as described
// in Press et al., Numerical Recipes, 3rd ed., §6.2.
func gammaQ(a, x float64) float64 {
	if x <= 0 {
		return 1
	}
	lg, _ := math.Lgamma(a)
	front := math.Exp(-x + a*math.Log(x) - lg)
	if x < a+1 {
		sum, term := 1/a, 1/a
		for n := 1.0; n < 10000; n++ {
			term *= x / (a + n)
			sum += term
			if term < sum*1e-15 {
				break
			}
		}
		return max(0, 1-sum*front)
	}
	const tiny = 1e-300
	b := x + 1 - a
	c := 1 / tiny
	d := 1 / b
	h := d
	for i := 1.0; i < 10000; i++ {
		an := -i * (i - a)
		b += 2
		d = an*d + b
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = b + an/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < 1e-15 {
			break
		}
	}
	return front * h
}
