package analyze

import (
	"fmt"
	"math"
	"sort"
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

// randomRanks runs the tests on consecutive values that need only their
// ranks (rank[i] is the place of the i-th value in sorted order, ties in
// input order); repeatedSteps adds the last one.
func randomRanks(vals *column, rank []uint32) *Random {
	n := len(rank)
	fn, m := float64(n), float64(n-1)
	res := &Random{}

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
	res.add(RandomTest{Name: "ascending steps", Observed: float64(asc) / m, Expected: 0.5,
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
	res.add(RandomTest{Name: "serial correlation", Observed: rho, Expected: 0, Z: rho * math.Sqrt(fn),
		Detail: fmt.Sprintf("lag-1 correlation of ranks %.4f", rho)}.judge())

	// 3. Close neighbours: how often the next value is among the w values
	// nearest in rank. For two distinct random ranks of n,
	// P(|r1-r2| <= w) = (2wn - w(w+1)) / (n(n-1)).
	w := max(1, n/100)
	close := 0
	for i := 1; i < n; i++ {
		if abs(int(rank[i])-int(rank[i-1])) <= w {
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
	res.add(RandomTest{Name: "close neighbours", Observed: float64(close) / m, Expected: p0, Z: z,
		Detail: fmt.Sprintf("%d of %d next values within %d ranks of the previous", close, n-1, w)}.judge())
	return res
}

func (r *Random) add(t RandomTest) {
	if !t.Pass {
		r.Distinguishable = true
	}
	r.Tests = append(r.Tests, t)
}

// repeatedSteps adds test 4 to res: x[i+1]-x[i] (mod 2^64) over the first
// n values of vals. Values spread over a large range almost never repeat a
// step; an affine "scramble" (a*seq + b mod m) repeats one step
// throughout. The steps overwrite the values in place and are sorted
// there, so this runs last.
func repeatedSteps(res *Random, vals *column, n int) {
	for i := 0; i+1 < n; i++ {
		vals.set(i, vals.at(i+1)-vals.at(i))
	}
	sort.Sort(columnSort{vals, n - 1})
	most, run, mostStep := 0, 0, uint64(0)
	for i := range n - 1 {
		if i > 0 && vals.at(i) == vals.at(i-1) {
			run++
		} else {
			run = 1
		}
		if run > most {
			most, mostStep = run, vals.at(i)
		}
	}
	limit := max(20, (n-1)/100)
	res.add(RandomTest{Name: "repeated steps", Observed: float64(most), Expected: 1, Pass: most <= limit,
		Detail: fmt.Sprintf("the most common step, %d, occurs %d times (limit %d)", int64(mostStep), most, limit)})
}
