package analyze

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/ordernum"
	"github.com/idmint/idmint/snowflake"
	"github.com/idmint/idmint/uuid"
)

var now = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

func analyseLines(t *testing.T, lines []string, opt Options) *Report {
	t.Helper()
	if opt.Now.IsZero() {
		opt.Now = now
	}
	rep, err := Read(strings.NewReader(strings.Join(lines, "\n")+"\n"), opt)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return rep
}

func kinds(r *Report, sev Severity) []string {
	var out []string
	for _, f := range r.Findings {
		if f.Severity == sev {
			out = append(out, f.Kind)
		}
	}
	return out
}

// randStartLayout starts each tick's sequence at a random value in
// [0, 4096), so IDs are balanced mod N: the clean baseline.
var randStartLayout = snowflake.MustParseLayout("time=41:1ms,worker=10,seq=12:rand,epoch=2020-01-01")

// cleanSnowflake builds the IDs of `workers` generators issuing `perTick`
// IDs in each of `ticks` milliseconds, each tick's sequence starting at a
// random value, listed tick by tick (workers interleaved within a tick).
func cleanSnowflake(t *testing.T, l snowflake.Layout, workers, ticks, perTick int, rng *rand.Rand) []int64 {
	t.Helper()
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var ids []int64
	for tick := range ticks {
		at := start.Add(time.Duration(tick) * time.Millisecond)
		for w := range workers {
			s0 := int64(0)
			if l.SeqStart() > 0 {
				s0 = rng.Int64N(l.SeqStart() - int64(perTick) + 1)
			}
			for s := range perTick {
				id, err := snowflake.Compose(l, snowflake.Parts{Time: at, Node: map[string]int64{l.NodeFields()[0].Name: int64(w)}, Sequence: s0 + int64(s)})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
		}
	}
	return ids
}

func toLines(ids []int64) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strconv.FormatInt(id, 10)
	}
	return out
}

func TestCleanSnowflakeIsClean(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 1))
	ids := cleanSnowflake(t, randStartLayout, 4, 5000, 3, rng)
	rep := analyseLines(t, toLines(ids), Options{Layout: randStartLayout})
	if !rep.Clean() {
		t.Fatalf("clean IDs reported with findings: %+v", rep.Findings)
	}
	if rep.Count != len(ids) || rep.Duplicates.Extra != 0 || rep.Order.Workers != 4 || rep.Order.Worst.Descents != 0 {
		t.Fatalf("count %d dups %d workers %d descents %d", rep.Count, rep.Duplicates.Extra, rep.Order.Workers, rep.Order.Worst.Descents)
	}
	if rep.Mod == nil || rep.Mod.Skewed {
		t.Fatalf("mod: %+v", rep.Mod.Worst)
	}
	tm := rep.Time
	if tm.PeakPerTick != 12 || tm.Span != 5000*time.Millisecond || math.Abs(tm.RatePerSecond-3000*4) > 1e-6 {
		t.Fatalf("time: peak %d span %v rate %v", tm.PeakPerTick, tm.Span, tm.RatePerSecond)
	}
	if rep.End == nil || !rep.End.End.Equal(randStartLayout.End()) || rep.End.Expired {
		t.Fatalf("end: %+v", rep.End)
	}
}

func TestDuplicatesFound(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(2, 2))
	ids := cleanSnowflake(t, randStartLayout, 2, 2000, 2, rng)
	// Repeat three IDs: one twice more, two once more, at known positions.
	dupe := []int64{ids[10], ids[10], ids[500], ids[7000]}
	ids = append(ids, dupe...)
	rep := analyseLines(t, toLines(ids), Options{Layout: randStartLayout})
	d := rep.Duplicates
	if d.Extra != 4 || d.Values != 3 || d.Distinct != 8000 {
		t.Fatalf("duplicates %+v", d)
	}
	found := false
	for _, ex := range d.Examples {
		if ex.ID == strconv.FormatInt(ids[10], 10) {
			found = true
			if ex.Times != 3 || !slices.Equal(ex.Lines, []int{11, 8001, 8002}) {
				t.Fatalf("example %+v", ex)
			}
		}
	}
	if !found || !slices.Contains(kinds(rep, Defect), "duplicates") {
		t.Fatalf("duplicates not reported: %+v", rep.Findings)
	}
}

// TestSkewFound: Twitter IDs issued one per millisecond all have sequence
// 0, so every ID is a multiple of 4096: id mod 2^k is always 0 for k <= 12.
// The survey's warning; the report must name a power of two as worst N.
func TestSkewFound(t *testing.T) {
	t.Parallel()
	tw, _ := snowflake.Lookup("twitter")
	ids := cleanSnowflake(t, tw, 1, 20000, 1, nil)
	rep := analyseLines(t, toLines(ids), Options{})
	if rep.LayoutName != "twitter" || !rep.Guessed {
		t.Fatalf("layout %q guessed %v", rep.LayoutName, rep.Guessed)
	}
	m := rep.Mod
	if !m.Skewed || m.Worst.N&(m.Worst.N-1) != 0 || m.Worst.Empty != m.Worst.N-1 {
		t.Fatalf("mod: skewed %v worst %+v", m.Skewed, m.Worst)
	}
	if m.WorstBuckets[0] != len(ids) {
		t.Fatalf("worst buckets: residue 0 holds %d of %d", m.WorstBuckets[0], len(ids))
	}
	// Every power of two up to 1024 is skewed, and N = 3 (coprime) is not.
	for _, r := range m.ByN {
		pow2 := r.N&(r.N-1) == 0
		if pow2 && r.P >= m.Alpha || r.N == 3 && r.P < m.Alpha {
			t.Errorf("N = %d: p = %g", r.N, r.P)
		}
	}
	if !slices.Contains(kinds(rep, Warning), "skew") {
		t.Fatalf("skew not reported: %+v", rep.Findings)
	}
}

// TestDisorderFound: one worker whose clock stepped back 300 ms after its
// 2,000th ID re-stamps 300 ticks: its IDs descend once, and the IDs stamped
// after the step sit up to the length of the overlap away from their
// sorted place.
func TestDisorderFound(t *testing.T) {
	t.Parallel()
	tw, _ := snowflake.Lookup("twitter")
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var ids []int64
	stamp := func(ms int, seq int64) {
		id, err := snowflake.Compose(tw, snowflake.Parts{Time: start.Add(time.Duration(ms) * time.Millisecond), Node: map[string]int64{"worker": 1}, Sequence: seq})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for ms := range 2000 {
		stamp(ms, 0)
	}
	for ms := 1700; ms < 3000; ms++ { // clock back 300 ms; seq 1 keeps IDs distinct
		stamp(ms, 1)
	}
	rep := analyseLines(t, toLines(ids), Options{Layout: tw})
	w := rep.Order.Worst
	if w.Descents != 1 || w.FirstDescentLine != 2001 {
		t.Fatalf("worker order %+v", w)
	}
	// The first re-stamped ID, (1700 ms, seq 1) at input position 2000,
	// sorts right after (1700 ms, seq 0) at 1700: 300 positions back, less
	// the one it sorts after; brute force agrees.
	if want := bruteDisplacement(ids); w.MaxDisplacement != want || rep.Order.Overall.MaxDisplacement != want || want != 299 {
		t.Fatalf("max displacement %d (overall %d), brute force %d", w.MaxDisplacement, rep.Order.Overall.MaxDisplacement, want)
	}
	if rep.Duplicates.Extra != 0 || !slices.Contains(kinds(rep, Defect), "disorder") {
		t.Fatalf("findings %+v", rep.Findings)
	}
}

// bruteDisplacement is the O(n^2) definition: for each element, its sorted
// place is the number of smaller elements plus equal ones before it.
func bruteDisplacement(ids []int64) int {
	worst := 0
	for i, x := range ids {
		place := 0
		for j, y := range ids {
			if y < x || y == x && j < i {
				place++
			}
		}
		worst = max(worst, abs(place-i))
	}
	return worst
}

// TestDisplacementMatchesBruteForce: on random near-sorted sequences with
// duplicates the O(n log n) displacement and descent count equal the
// O(n^2) definitions.
func TestDisplacementMatchesBruteForce(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 3))
	for trial := range 200 {
		n := 2 + rng.IntN(300)
		ids := make([]int64, n)
		for i := range ids {
			ids[i] = int64(i/2*10 + rng.IntN(1+trial%40))
		}
		for range rng.IntN(5) {
			i, j := rng.IntN(n), rng.IntN(n)
			ids[i], ids[j] = ids[j], ids[i]
		}
		rep := analyseLines(t, toLines(ids), Options{Format: Integer, ModSample: -1})
		descents := 0
		for i := 1; i < n; i++ {
			if ids[i] < ids[i-1] {
				descents++
			}
		}
		if got, want := rep.Order.Overall.MaxDisplacement, bruteDisplacement(ids); got != want || rep.Order.Overall.Descents != descents {
			t.Fatalf("trial %d: displacement %d want %d, descents %d want %d (%v)", trial, got, want, rep.Order.Overall.Descents, descents, ids)
		}
	}
}

// TestCapacityExceeded: two generators sharing worker 5 in the same
// milliseconds stamp more IDs per tick than one sequence holds (and
// duplicates).
func TestCapacityExceeded(t *testing.T) {
	t.Parallel()
	l := snowflake.MustParseLayout("time=41:1ms,worker=10,seq=4,epoch=2020-01-01")
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var ids []int64
	for ms := range 100 {
		for g := range 2 {
			for s := range 10 {
				id, _ := snowflake.Compose(l, snowflake.Parts{Time: start.Add(time.Duration(ms) * time.Millisecond), Node: map[string]int64{"worker": 5}, Sequence: int64(s + 6*g)})
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	rep := analyseLines(t, toLines(ids), Options{Layout: l})
	if got := kinds(rep, Defect); !slices.Contains(got, "capacity") || !slices.Contains(got, "duplicates") {
		t.Fatalf("findings %+v", rep.Findings)
	}
	if rep.Order.PerWorker[0].PeakPerTick != 20 || rep.Time.CapacityPerTick != 16 {
		t.Fatalf("peak %d capacity %d", rep.Order.PerWorker[0].PeakPerTick, rep.Time.CapacityPerTick)
	}
}

func TestExpiredLayout(t *testing.T) {
	t.Parallel()
	baidu, _ := snowflake.Lookup("baidu")
	id, _ := snowflake.Compose(baidu, snowflake.Parts{Time: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), Node: map[string]int64{"worker": 1}})
	rep := analyseLines(t, []string{fmt.Sprint(id), fmt.Sprint(id + 1)}, Options{Layout: baidu})
	if rep.End == nil || !rep.End.Expired || !slices.Contains(kinds(rep, Defect), "end") {
		t.Fatalf("end %+v findings %+v", rep.End, rep.Findings)
	}
}

// TestRandomness: order numbers from the real FF1 codec and opaque IDs are
// indistinguishable from random; a counter, a XOR "scramble" and an affine
// one are caught.
func TestRandomness(t *testing.T) {
	t.Parallel()
	key, err := ordernum.NewKey(1, []byte("0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	f := ordernum.MustParseFormat("length=16,date=yyMMdd,version")
	codec, err := ordernum.New(f, key)
	if err != nil {
		t.Fatal(err)
	}
	var orders []string
	for day := range 3 { // three days: the date part rises, the body must not show it
		for seq := range 3000 {
			s, err := codec.Encode(uint64(seq), time.Date(2026, 5, 1+day, 0, 0, 0, 0, time.UTC))
			if err != nil {
				t.Fatal(err)
			}
			orders = append(orders, s)
		}
	}
	rep := analyseLines(t, orders, Options{Format: OrderNum, OrderFormat: f})
	if !rep.ExpectRandom || rep.Random.Distinguishable || !rep.Clean() {
		t.Fatalf("FF1 order numbers: %+v findings %+v", rep.Random, rep.Findings)
	}
	if rep.Time == nil || rep.Time.Tick != 24*time.Hour || rep.Time.PeakPerTick != 3000 {
		t.Fatalf("order-number days: %+v", rep.Time)
	}

	op, err := ordernum.NewOpaque(key, 63, "test")
	if err != nil {
		t.Fatal(err)
	}
	var opaque, counter, xored, affine []string
	for seq := range int64(20000) {
		v, err := op.EncodeInt64(seq + 1)
		if err != nil {
			t.Fatal(err)
		}
		opaque = append(opaque, fmt.Sprint(v))
		counter = append(counter, fmt.Sprint(seq+1))
		xored = append(xored, fmt.Sprint((seq+1)^0x5a5a5a5a5a5a))
		affine = append(affine, fmt.Sprint(uint64(seq)*0x9E3779B97F4A7C15>>1))
	}
	if rep := analyseLines(t, opaque, Options{Format: Integer, Random: true}); rep.Random.Distinguishable || !rep.Clean() {
		t.Fatalf("opaque IDs: %+v findings %+v", rep.Random, rep.Findings)
	}
	for name, lines := range map[string][]string{"counter": counter, "xor": xored, "affine": affine} {
		rep := analyseLines(t, lines, Options{Format: Integer, Random: true})
		if !rep.Random.Distinguishable || !slices.Contains(kinds(rep, Defect), "pattern") {
			t.Errorf("%s: not caught: %+v", name, rep.Random)
		}
	}
}

func TestTextFormats(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(4, 4))
	var lines []string
	for i := range 3000 {
		u := uuid.FromV7(start.Add(time.Duration(i/3)*time.Millisecond).UnixMilli(), uint16(rng.Uint32()), rng.Uint64())
		lines = append(lines, u.String())
	}
	lines = append(lines, "not-a-uuid", lines[5])
	rep := analyseLines(t, lines, Options{})
	if rep.Format != "uuid" || !rep.Guessed || rep.Invalid.Count != 1 || rep.Duplicates.Extra != 1 {
		t.Fatalf("format %s invalid %d dups %d", rep.Format, rep.Invalid.Count, rep.Duplicates.Extra)
	}
	if rep.Time == nil || rep.Time.Tick != time.Millisecond || rep.Time.PeakPerTick != 4 || !rep.Time.First.Equal(start) {
		t.Fatalf("time %+v", rep.Time)
	}
	if rep.Mod.Skewed {
		t.Fatalf("uuid v7 skewed: %+v", rep.Mod.Worst)
	}
}

func TestIntegersGuessed(t *testing.T) {
	t.Parallel()
	var lines []string
	for i := range 5000 {
		lines = append(lines, fmt.Sprint(1000+i))
	}
	rep := analyseLines(t, lines, Options{})
	if rep.Format != Integer || rep.Time != nil || !rep.Clean() {
		t.Fatalf("format %s findings %+v", rep.Format, rep.Findings)
	}
	// A counter swapped in places is out of order.
	lines[100], lines[4000] = lines[4000], lines[100]
	rep = analyseLines(t, lines, Options{})
	if rep.Order.Overall.MaxDisplacement != 3900 || !slices.Contains(kinds(rep, Warning), "disorder") {
		t.Fatalf("order %+v findings %+v", rep.Order.Overall, rep.Findings)
	}
}

func TestDiscordGuessedOverTwitter(t *testing.T) {
	t.Parallel()
	dc, _ := snowflake.Lookup("discord")
	ids := cleanSnowflake(t, dc, 2, 100, 1, nil)
	rep := analyseLines(t, toLines(ids), Options{})
	if rep.LayoutName != "discord" {
		t.Fatalf("guessed %s: %s", rep.LayoutName, rep.GuessNote)
	}
}

func TestReadErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		opt  Options
		want error
	}{
		{"\n# only a comment\n\n", Options{Now: now}, ErrNoIDs},
		{"1\n", Options{}, ErrOptions},
		{"1\n", Options{Now: now, Format: "nosuch"}, ErrOptions},
		{"1\n", Options{Now: now, Format: OrderNum}, ErrOptions},
		{"hello\nworld\n", Options{Now: now}, ErrFormat},
		{"abc\n", Options{Now: now, Format: Integer}, ErrFormat},
	} {
		if _, err := Read(strings.NewReader(c.in), c.opt); !errors.Is(err, c.want) {
			t.Errorf("Read(%q, %+v) = %v, want %v", c.in, c.opt.Format, err, c.want)
		}
	}
	if _, err := Read(strings.NewReader(strings.Repeat("1", 5000)), Options{Now: now}); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("long line: %v", err)
	}
}

// TestGammaQ checks the chi-square survival function against table
// values (the 5 % and 1 % critical values of the chi-square distribution).
func TestGammaQ(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ df, x, p float64 }{
		{1, 3.841459, 0.05}, {1, 6.634897, 0.01}, {10, 18.307038, 0.05}, {100, 124.342113, 0.05}, {1000, 1074.679, 0.05},
	} {
		if got := gammaQ(c.df/2, c.x/2); math.Abs(got-c.p) > c.p*0.02 {
			t.Errorf("Q(df %v, x %v) = %v, want %v", c.df, c.x, got, c.p)
		}
	}
}

// FuzzRead: no input makes Read panic, and what it reports adds up.
func FuzzRead(f *testing.F) {
	f.Add("1\n2\n3\n")
	f.Add("2127601472265924608\n2127601472265924609\n2127601472265924608\n")
	f.Add("0190f6a8-0000-7000-8000-000000000000\n0190f6a8-0000-7000-8000-000000000001\n")
	f.Add("01ARZ3NDEKTSV4RRFFQ69G5FAV\n")
	f.Fuzz(func(t *testing.T, in string) {
		rep, err := Read(strings.NewReader(in), Options{Now: now, ModSample: 64, Bins: 7})
		if err != nil {
			return
		}
		if rep.Count+rep.Invalid.Count != rep.Lines || rep.Duplicates.Distinct+rep.Duplicates.Extra != rep.Count {
			t.Fatalf("counts do not add up: %+v", rep)
		}
	})
}

// TestPerWorkerOrderMatchesBruteForce: three workers' IDs interleaved, each
// worker's own sequence disturbed differently; the per-worker descents and
// displacements equal the O(n^2) definitions on each worker's subsequence.
func TestPerWorkerOrderMatchesBruteForce(t *testing.T) {
	t.Parallel()
	tw, _ := snowflake.Lookup("twitter")
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(6, 6))
	per := map[int64][]int64{}
	var ids []int64
	for i := range 1500 {
		w := int64(rng.IntN(3))
		id, _ := snowflake.Compose(tw, snowflake.Parts{Time: start.Add(time.Duration(i) * time.Millisecond), Node: map[string]int64{"worker": w}})
		per[w] = append(per[w], id)
	}
	// Worker 0 untouched, worker 1 with swaps 5 apart, worker 2 with one ID
	// moved 40 places back.
	for i := 0; i+5 < len(per[1]); i += 37 {
		per[1][i], per[1][i+5] = per[1][i+5], per[1][i]
	}
	w2 := per[2]
	moved := w2[100]
	w2 = append(w2[:100], w2[101:]...)
	w2 = append(w2[:60], append([]int64{moved}, w2[60:]...)...)
	per[2] = w2
	// Interleave the workers round-robin, keeping each worker's order.
	pos := map[int64]int{}
	for len(ids) < 1500 {
		for w := int64(0); w < 3; w++ {
			if pos[w] < len(per[w]) {
				ids = append(ids, per[w][pos[w]])
				pos[w]++
			}
		}
	}
	rep := analyseLines(t, toLines(ids), Options{Layout: tw})
	if rep.Order.Workers != 3 {
		t.Fatalf("workers %d", rep.Order.Workers)
	}
	got := map[string]WorkerOrder{}
	for _, w := range rep.Order.PerWorker {
		got[w.Worker] = w
	}
	for w := int64(0); w < 3; w++ {
		seq := per[w]
		descents := 0
		for i := 1; i < len(seq); i++ {
			if seq[i] < seq[i-1] {
				descents++
			}
		}
		g := got[fmt.Sprintf("datacenter=0 worker=%d", w)]
		if want := bruteDisplacement(seq); g.Count != len(seq) || g.MaxDisplacement != want || g.Descents != descents {
			t.Errorf("worker %d: count %d displacement %d descents %d; want %d, %d, %d", w, g.Count, g.MaxDisplacement, g.Descents, len(seq), want, descents)
		}
	}
	if want := bruteDisplacement(ids); rep.Order.Overall.MaxDisplacement != want {
		t.Errorf("overall displacement %d, want %d", rep.Order.Overall.MaxDisplacement, want)
	}
}

// TestLeafStartSkew: Leaf's random sequence start in [0, 100) balances id
// mod 100 but not mod 32 (residues 0-3 take 4 of the 100 starts, the
// others 3).
func TestLeafStartSkew(t *testing.T) {
	t.Parallel()
	leaf, _ := snowflake.Lookup("leaf")
	rng := rand.New(rand.NewPCG(7, 7))
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var ids []int64
	for i := range 50000 {
		id, _ := snowflake.Compose(leaf, snowflake.Parts{Time: start.Add(time.Duration(i*7) * time.Millisecond), Node: map[string]int64{"worker": 5}, Sequence: rng.Int64N(100)})
		ids = append(ids, id)
	}
	m := analyseLines(t, toLines(ids), Options{Layout: leaf}).Mod
	if r := m.ByN[32-2]; !m.IsSkewed(r) || math.Abs(r.MaxShare-4.0/3) > 0.1 {
		t.Errorf("N = 32: %+v", r)
	}
	if r := m.ByN[100-2]; m.IsSkewed(r) {
		t.Errorf("N = 100: %+v", r)
	}
}
