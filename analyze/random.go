package analyze

import (
	"fmt"
	"math"
	"slices"
)

// Random tells whether consecutive IDs can be told apart from values drawn
// at random: what an order number or an opaque ID must not allow, since a
// visible pattern lets anyone guess the next number or the volume.
type Random struct {
	// Distinguishable is true when any test fails.
	Distinguishable bool         `json:"distinguishable"`
	Tests           []RandomTest `json:"tests"`
}

// RandomTest is one test on consecutive values. Z is the statistic's
// distance from its mean under randomness in standard deviations (0 for
// "repeated steps", which fails on a count limit); a test fails when
// |Z| > ZLimit (two-sided p ≈ 6e-5, so four tests on random
// values fail together with probability under 0.03 %).
type RandomTest struct {
	Name     string  `json:"name"`
	Observed float64 `json:"observed"`
	Expected float64 `json:"expected"`
	Z        float64 `json:"z"`
	Pass     bool    `json:"pass"`
	Detail   string  `json:"detail"`
}

func (t RandomTest) judge() RandomTest {
	t.Pass = math.Abs(t.Z) <= ZLimit
	return t
}

// ZLimit is the |z| above which a randomness test fails.
const ZLimit = 4.0

// randomness runs the tests on vals in input order. rank[i] is vals[i]'s
// place in sorted order; nil computes it from vals.
func randomness(vals []uint64, rank []int32) *Random {
	n := len(vals)
	if rank == nil {
		idx := make([]int32, n)
		for i := range idx {
			idx[i] = int32(i)
		}
		slices.SortFunc(idx, func(a, b int32) int {
			if vals[a] != vals[b] {
				if vals[a] < vals[b] {
					return -1
				}
				return 1
			}
			return int(a - b)
		})
		rank = make([]int32, n)
		for r, i := range idx {
			rank[i] = int32(r)
		}
	}
	fn, m := float64(n), float64(n-1)
	res := &Random{}
	add := func(t RandomTest) {
		if !t.Pass {
			res.Distinguishable = true
		}
		res.Tests = append(res.Tests, t)
	}

	// 1. Ascending steps. In a random order the number of i with
	// x[i] > x[i-1] has mean (n-1)/2 and variance (n+1)/12 (the Eulerian
	// numbers' moments). A counter ascends every step; a time-ordered ID
	// nearly every step.
	asc := 0
	for i := 1; i < n; i++ {
		if rank[i] > rank[i-1] {
			asc++
		}
	}
	add(RandomTest{Name: "ascending steps", Observed: float64(asc) / m, Expected: 0.5,
		Z:      (float64(asc) - m/2) / math.Sqrt((fn+1)/12),
		Detail: fmt.Sprintf("%d of %d consecutive pairs go up", asc, n-1)}.judge())

	// 2. Lag-1 serial correlation of the ranks: about N(0, 1/n) for a
	// random order; near 1 when neighbours are close in value.
	mean := (fn - 1) / 2
	var num, den float64
	for i := range n {
		d := float64(rank[i]) - mean
		den += d * d
		if i > 0 {
			num += d * (float64(rank[i-1]) - mean)
		}
	}
	rho := 0.0
	if den > 0 {
		rho = num / den
	}
	add(RandomTest{Name: "serial correlation", Observed: rho, Expected: 0, Z: rho * math.Sqrt(fn),
		Detail: fmt.Sprintf("lag-1 correlation of ranks %.4f", rho)}.judge())

	// 3. Close neighbours: how often the next value is among the w values
	// nearest in rank. For two distinct random ranks of n,
	// P(|r1-r2| <= w) = (2wn - w(w+1)) / (n(n-1)).
	w := max(1, n/100)
	close := 0
	for i := 1; i < n; i++ {
		d := rank[i] - rank[i-1]
		if d < 0 {
			d = -d
		}
		if int(d) <= w {
			close++
		}
	}
	fw := float64(w)
	p0 := (2*fw*fn - fw*(fw+1)) / (fn * m)
	p0 = min(p0, 1)
	z := 0.0
	if sd := math.Sqrt(m * p0 * (1 - p0)); sd > 0 {
		z = (float64(close) - m*p0) / sd
	}
	add(RandomTest{Name: "close neighbours", Observed: float64(close) / m, Expected: p0, Z: z,
		Detail: fmt.Sprintf("%d of %d next values within %d ranks of the previous", close, n-1, w)}.judge())

	// 4. Repeated steps: x[i+1]-x[i] (mod 2^64). Values spread over a
	// large range almost never repeat a step; an affine "scramble"
	// (a*seq + b mod m) repeats one step throughout.
	steps := make([]uint64, n-1)
	for i := 1; i < n; i++ {
		steps[i-1] = vals[i] - vals[i-1]
	}
	slices.Sort(steps)
	most, run, mostStep := 0, 0, uint64(0)
	for i := range steps {
		if i > 0 && steps[i] == steps[i-1] {
			run++
		} else {
			run = 1
		}
		if run > most {
			most, mostStep = run, steps[i]
		}
	}
	limit := max(20, (n-1)/100)
	add(RandomTest{Name: "repeated steps", Observed: float64(most), Expected: 1, Pass: most <= limit,
		Detail: fmt.Sprintf("the most common step, %d, occurs %d times (limit %d)", int64(mostStep), most, limit)})
	return res
}
