package analyze

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
	"strings"
	"time"
)

// column is an append-only sequence of uint64 values kept in chunks of
// fixed size: growing it never copies, so it costs 8 bytes per value and at
// most one partly filled chunk more.
type column struct {
	chunks [][]uint64
	n      int
}

const (
	chunkBits = 13 // 8,192 values, 64 KiB per chunk
	chunkLen  = 1 << chunkBits
)

func (c *column) add(v uint64) {
	if c.n&(chunkLen-1) == 0 {
		c.chunks = append(c.chunks, make([]uint64, chunkLen))
	}
	c.chunks[c.n>>chunkBits][c.n&(chunkLen-1)] = v
	c.n++
}

func (c *column) at(i int) uint64     { return c.chunks[i>>chunkBits][i&(chunkLen-1)] }
func (c *column) set(i int, v uint64) { c.chunks[i>>chunkBits][i&(chunkLen-1)] = v }

// columnSort sorts the first n values of a column in place.
type columnSort struct {
	c *column
	n int
}

func (s columnSort) Len() int           { return s.n }
func (s columnSort) Less(i, j int) bool { return s.c.at(i) < s.c.at(j) }
func (s columnSort) Swap(i, j int) {
	a, b := s.c.at(i), s.c.at(j)
	s.c.set(i, b)
	s.c.set(j, a)
}

// maxIDs bounds the IDs one Read analyses: positions are 31-bit (the top
// bit of a position marks it while a permutation is inverted in place).
const maxIDs = 1<<31 - 1

// skip records that the ID at index at and the ones after it sit cum lines
// further down the input than their index says (blank lines, comments and
// lines that are not IDs came before them).
type skip struct{ at, cum int }

// collector holds the parsed IDs in columns, without a map of IDs: a
// snowflake or integer ID costs 8 bytes (its value; time and worker are
// bits of it, and an ID's line is its index plus the non-ID lines before
// it). The analysis adds one 4-byte position per ID, used in turn as the
// sorted order, the ranks and the order within each worker. Wider formats
// (128-bit UUIDs, order numbers) add a column per 64 bits and their time
// and worker.
type collector struct {
	p       parser
	opt     Options
	lines   int
	invalid Invalid

	n           int
	lo, mid, hi column // the key's words; mid and hi once a wider key appears
	wide        bool
	ticks       column // when timed and the tick is not bits of the value
	workers     column // worker index into wRecs, when the format has workers and they are not bits of the value
	bodies      column // order numbers: the FF1 body
	modvs       column // order numbers: the whole number, for mod N
	skips       []skip

	snow    *snowParser // non-nil: tick and worker are bits of lo
	isOrder bool
	timed   bool
	wIndex  map[workerKey]uint64 // a map of workers, not of IDs
	wRecs   []rec                // one rec per worker, for its label
}

type workerKey struct {
	n uint64
	s string
}

func newCollector(p parser, opt Options) *collector {
	c := &collector{p: p, opt: opt, wIndex: map[workerKey]uint64{}}
	_, c.isOrder = p.(*orderParser)
	c.snow, _ = p.(*snowParser)
	return c
}

// add takes one non-blank, non-comment input line, number line.
func (c *collector) add(line int, text []byte) error {
	c.lines++
	r, err := c.p.parse(text)
	if err != nil {
		c.invalid.Count++
		if len(c.invalid.Examples) < max(c.opt.Examples, 1) {
			c.invalid.Examples = append(c.invalid.Examples, Line{Line: line, Text: clip(string(text)), Err: err.Error()})
		}
		return nil
	}
	if c.n == maxIDs {
		return fmt.Errorf("line %d: more than %d IDs: analyse the input in parts", line, maxIDs)
	}
	i := c.n
	if c.n == 0 {
		c.timed = r.hasTick
	}
	if want := i + 1 + c.cum(i); line != want {
		c.skips = append(c.skips, skip{at: i, cum: line - i - 1})
	}
	if !c.wide && (r.k[0] != 0 || r.k[1] != 0) {
		c.wide = true
		for range i {
			c.mid.add(0)
			c.hi.add(0)
		}
	}
	c.lo.add(r.k[2])
	if c.wide {
		c.mid.add(r.k[1])
		c.hi.add(r.k[0])
	}
	if c.timed && c.snow == nil {
		c.ticks.add(uint64(r.tick))
	}
	if c.p.hasWorker() && c.snow == nil {
		wk := workerKey{r.wnum, r.wstr}
		w, ok := c.wIndex[wk]
		if !ok {
			w = uint64(len(c.wRecs))
			c.wIndex[wk] = w
			c.wRecs = append(c.wRecs, r)
		}
		c.workers.add(w)
	}
	if c.isOrder {
		c.bodies.add(r.body)
		c.modvs.add(r.modv)
	}
	c.n++
	return nil
}

// cum is how many non-ID lines come before the ID at index i.
func (c *collector) cum(i int) int {
	k := sort.Search(len(c.skips), func(k int) bool { return c.skips[k].at > i })
	if k == 0 {
		return 0
	}
	return c.skips[k-1].cum
}

// line is the input line of the ID at index i.
func (c *collector) line(i int) int { return i + 1 + c.cum(i) }

func (c *collector) key(i int) key {
	if !c.wide {
		return key{0, 0, c.lo.at(i)}
	}
	return key{c.hi.at(i), c.mid.at(i), c.lo.at(i)}
}

// cmp compares the IDs at indexes i and j.
func (c *collector) cmp(i, j int) int {
	if c.wide {
		if r := cmp.Compare(c.hi.at(i), c.hi.at(j)); r != 0 {
			return r
		}
		if r := cmp.Compare(c.mid.at(i), c.mid.at(j)); r != 0 {
			return r
		}
	}
	return cmp.Compare(c.lo.at(i), c.lo.at(j))
}

// byKey orders positions by their ID, then by position (ties keep input
// order).
func (c *collector) byKey(a, b uint32) int {
	if r := c.cmp(int(a), int(b)); r != 0 {
		return r
	}
	return cmp.Compare(a, b)
}

func (c *collector) tick(i int) int64 {
	if c.snow != nil {
		return int64(c.lo.at(i) >> c.snow.timeShift)
	}
	return int64(c.ticks.at(i))
}

// worker is the worker identity of the ID at index i: its node bits, or
// an index into wRecs.
func (c *collector) worker(i int) uint64 {
	if c.snow != nil {
		return c.lo.at(i) & c.snow.nodeMask
	}
	return c.workers.at(i)
}

func (c *collector) workerLabel(w uint64) string {
	if c.snow != nil {
		return c.p.workerLabel(rec{wnum: w})
	}
	return c.p.workerLabel(c.wRecs[w])
}

// text renders the ID at index i for examples.
func (c *collector) text(i int) string {
	k := c.key(i)
	if k[0] == 0 && k[1] == 0 {
		return fmt.Sprint(k[2])
	}
	return fmt.Sprintf("%x:%016x:%016x", k[0], k[1], k[2])
}

func (c *collector) analyse(rep *Report) {
	n := c.n
	rep.Count = n
	// One sort by (key, position) gives duplicates, displacement and, for
	// a snowflake layout, the time statistics (ticks are the top bits).
	pos := make([]uint32, n)
	for i := range pos {
		pos[i] = uint32(i)
	}
	slices.SortFunc(pos, c.byKey)
	c.duplicates(rep, pos)
	c.order(rep, pos)
	if c.timed {
		rep.Time = c.timeStats(pos)
	}
	if n >= 3 && !c.isOrder {
		// The sorted order inverted in place is every ID's rank.
		invert(pos)
		rep.Random = randomRanks(&c.lo, pos)
	}
	if c.p.hasWorker() {
		c.workerOrder(rep, pos)
	}
	if c.opt.ModSample > 0 && n >= 2 {
		rep.Mod = c.modStats(pos)
	}
	if t, note := c.p.end(); !t.IsZero() {
		rep.End = &End{End: t, Source: note, YearsLeft: t.Sub(c.opt.Now).Hours() / 24 / 365.2425, Expired: !c.opt.Now.Before(t)}
		if t.Sub(c.opt.Now) == math.MaxInt64 {
			rep.End.YearsLeft = float64(t.Year() - c.opt.Now.Year())
		}
	}
	if n >= 3 {
		if c.isOrder {
			// Order numbers: the body is what must look random.
			for i := range pos {
				pos[i] = uint32(i)
			}
			slices.SortFunc(pos, func(a, b uint32) int {
				if r := cmp.Compare(c.bodies.at(int(a)), c.bodies.at(int(b))); r != 0 {
					return r
				}
				return cmp.Compare(a, b)
			})
			invert(pos)
			rep.Random = randomRanks(&c.bodies, pos)
			repeatedSteps(rep.Random, &c.bodies, n)
		} else {
			// Last: it overwrites the values with their steps.
			repeatedSteps(rep.Random, &c.lo, n)
		}
	}
	c.findings(rep)
}

// invert turns p, a permutation (p[rank] = index), into its inverse
// (p[index] = rank) in place, following each cycle and marking the slots
// already written with the top bit.
func invert(p []uint32) {
	const mark = 1 << 31
	for start := range p {
		if p[start]&mark != 0 {
			continue
		}
		r, i := uint32(start), p[start]
		for {
			next := p[i]
			p[i] = r | mark
			if i == uint32(start) {
				break
			}
			r, i = i, next
		}
	}
	for k := range p {
		p[k] &^= mark
	}
}

// Dups reports repeated IDs.
type Dups struct {
	Distinct int   `json:"distinct"`
	Extra    int   `json:"extra"`  // IDs beyond the first copy of each value
	Values   int   `json:"values"` // values that occur more than once
	Examples []Dup `json:"examples,omitempty"`
}

// Dup is one repeated value and where it appears.
type Dup struct {
	ID    string `json:"id"`
	Times int    `json:"times"`
	Lines []int  `json:"lines"` // up to 5
}

func (c *collector) duplicates(rep *Report, idx []uint32) {
	d := &rep.Duplicates
	for i := 0; i < len(idx); {
		j := i + 1
		for j < len(idx) && c.cmp(int(idx[j]), int(idx[i])) == 0 {
			j++
		}
		d.Distinct++
		if j-i > 1 {
			d.Values++
			d.Extra += j - i - 1
			if len(d.Examples) < c.opt.Examples {
				ex := Dup{ID: c.text(int(idx[i])), Times: j - i}
				for _, p := range idx[i:min(j, i+5)] {
					ex.Lines = append(ex.Lines, c.line(int(p)))
				}
				d.Examples = append(d.Examples, ex)
			}
		}
		i = j
	}
}

// Order describes how far the IDs are from sorted, in input order.
type Order struct {
	Overall OrderStats `json:"overall"`
	// Workers is the number of distinct workers (node values); 0 when
	// the format has none.
	Workers int `json:"workers"`
	// PerWorker lists the workers with the most disorder first (at most
	// 20); Worst aggregates all of them.
	PerWorker []WorkerOrder `json:"per_worker,omitempty"`
	Worst     OrderStats    `json:"worst_worker"`
	// Plot is the largest |displacement| in each of Bins equal slices of
	// the input, for the out-of-order chart.
	Plot []OrderPoint `json:"plot"`
}

// OrderStats is the disorder of one sequence of IDs.
type OrderStats struct {
	Count int `json:"count"`
	// Pairs is the number of consecutive pairs compared: Count-1 per
	// sequence.
	Pairs int `json:"pairs"`
	// Descents counts IDs lower than the ID before them; equal IDs are
	// duplicates, not descents.
	Descents        int     `json:"descents"`
	DescentFraction float64 `json:"descent_fraction"`
	// MaxDisplacement is the largest distance, in positions, between an
	// ID's place in the input and its place in the sorted input (ties keep
	// input order). The input is k-sorted for k = MaxDisplacement.
	MaxDisplacement int `json:"max_displacement"`
	// MaxAtLine is the input line of an ID with that displacement.
	MaxAtLine int `json:"max_at_line,omitempty"`
	// FirstDescentLine is the line of the first descent.
	FirstDescentLine int `json:"first_descent_line,omitempty"`
}

// WorkerOrder is the disorder of one worker's IDs.
type WorkerOrder struct {
	Worker string `json:"worker"`
	OrderStats
	// PeakPerTick is the most IDs of this worker stamped with one tick
	// (time-first formats); 0 when unknown.
	PeakPerTick int `json:"peak_per_tick,omitempty"`
}

// OrderPoint is one point of the out-of-order plot.
type OrderPoint struct {
	From            int `json:"from"` // input positions [From, To)
	To              int `json:"to"`
	MaxDisplacement int `json:"max_displacement"`
	Descents        int `json:"descents"`
}

// order measures the disorder overall: descents in input order, and each
// ID's displacement from its place in sorted (the input position idx[r]
// of rank r against r).
func (c *collector) order(rep *Report, idx []uint32) {
	n := c.n
	o := &rep.Order
	o.Overall.Count = n
	bins := min(c.opt.Bins, n)
	o.Plot = make([]OrderPoint, bins)
	for b := range o.Plot {
		o.Plot[b].From, o.Plot[b].To = b*n/bins, (b+1)*n/bins
	}
	for r, p := range idx {
		i := int(p)
		d := abs(i - r)
		b := i * bins / n
		if d > o.Plot[b].MaxDisplacement {
			o.Plot[b].MaxDisplacement = d
		}
		// Of equal displacements, the first in input order.
		if d > o.Overall.MaxDisplacement || d == o.Overall.MaxDisplacement && d > 0 && c.line(i) < o.Overall.MaxAtLine {
			o.Overall.MaxDisplacement, o.Overall.MaxAtLine = d, c.line(i)
		}
	}
	for i := 1; i < n; i++ {
		if c.cmp(i, i-1) < 0 {
			o.Overall.Descents++
			o.Plot[i*bins/n].Descents++
			if o.Overall.FirstDescentLine == 0 {
				o.Overall.FirstDescentLine = c.line(i)
			}
		}
	}
	if n > 1 {
		o.Overall.Pairs = n - 1
		o.Overall.DescentFraction = float64(o.Overall.Descents) / float64(n-1)
	}
}

// workerOrder repeats the order analysis within each worker. One sort of
// the positions (scratch, reused) by (worker, key, position) groups each
// worker's IDs in sorted order; one pass in input order then finds each
// ID's place in its group, from which its displacement follows (an ID in
// order is where its group's count says, so the binary search is only for
// IDs out of place).
func (c *collector) workerOrder(rep *Report, scratch []uint32) {
	n := c.n
	idx := scratch
	for i := range idx {
		idx[i] = uint32(i)
	}
	slices.SortFunc(idx, func(a, b uint32) int {
		if r := cmp.Compare(c.worker(int(a)), c.worker(int(b))); r != 0 {
			return r
		}
		return c.byKey(a, b)
	})
	type group struct {
		w          uint64
		from, to   int // its IDs are idx[from:to]
		seen, last int
		stats      WorkerOrder
	}
	var groups []group
	for g := 0; g < n; {
		w := c.worker(int(idx[g]))
		e := g
		for e < n && c.worker(int(idx[e])) == w {
			e++
		}
		gr := group{w: w, from: g, to: e, last: -1}
		if c.timed {
			run := 0
			for r := g; r < e; r++ {
				if r > g && c.tick(int(idx[r])) == c.tick(int(idx[r-1])) {
					run++
				} else {
					run = 1
				}
				gr.stats.PeakPerTick = max(gr.stats.PeakPerTick, run)
			}
		}
		groups = append(groups, gr)
		g = e
	}
	o := &rep.Order
	o.Workers = len(groups)
	cur := 0
	for i := range n {
		w := c.worker(i)
		if groups[cur].w != w {
			cur = sort.Search(len(groups), func(k int) bool { return groups[k].w >= w })
		}
		gr := &groups[cur]
		s := &gr.stats.OrderStats
		s.Count++
		local := gr.seen
		gr.seen++
		at := local // where the group's sorted order has this ID
		if int(idx[gr.from+local]) != i {
			at = sort.Search(gr.to-gr.from, func(k int) bool {
				j := int(idx[gr.from+k])
				r := c.cmp(j, i)
				return r > 0 || r == 0 && j >= i
			})
		}
		if d := abs(local - at); d > s.MaxDisplacement {
			s.MaxDisplacement, s.MaxAtLine = d, c.line(i)
		}
		if gr.last >= 0 && c.cmp(i, gr.last) < 0 {
			s.Descents++
			if s.FirstDescentLine == 0 {
				s.FirstDescentLine = c.line(i)
			}
		}
		gr.last = i
	}
	stats := make([]WorkerOrder, len(groups))
	for k := range groups {
		stats[k] = groups[k].stats
		s := &stats[k]
		s.Worker = c.workerLabel(groups[k].w)
		if s.Count > 1 {
			s.Pairs = s.Count - 1
			s.DescentFraction = float64(s.Descents) / float64(s.Pairs)
		}
		ws := &o.Worst
		ws.Count += s.Count
		ws.Descents += s.Descents
		if s.MaxDisplacement > ws.MaxDisplacement {
			ws.MaxDisplacement, ws.MaxAtLine = s.MaxDisplacement, s.MaxAtLine
		}
		if s.FirstDescentLine != 0 && (ws.FirstDescentLine == 0 || s.FirstDescentLine < ws.FirstDescentLine) {
			ws.FirstDescentLine = s.FirstDescentLine
		}
	}
	nw := len(groups)
	if o.Worst.Count > nw {
		o.Worst.Pairs = o.Worst.Count - nw
		o.Worst.DescentFraction = float64(o.Worst.Descents) / float64(o.Worst.Pairs)
	}
	slices.SortStableFunc(stats, func(a, b WorkerOrder) int {
		if a.Descents != b.Descents {
			return b.Descents - a.Descents
		}
		if a.MaxDisplacement != b.MaxDisplacement {
			return b.MaxDisplacement - a.MaxDisplacement
		}
		return strings.Compare(a.Worker, b.Worker)
	})
	o.PerWorker = stats[:min(len(stats), 20)]
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// Time describes when the IDs were stamped.
type Time struct {
	First time.Time     `json:"first"`
	Last  time.Time     `json:"last"`
	Span  time.Duration `json:"span_ns"`
	// Tick is the format's time resolution (layout unit, ID precision).
	Tick time.Duration `json:"tick_ns"`
	// RatePerSecond is Count over the span (first tick to the end of the
	// last tick).
	RatePerSecond float64 `json:"rate_per_second"`
	// PeakPerTick is the most IDs stamped with one tick, and PeakAt that
	// tick.
	PeakPerTick int       `json:"peak_per_tick"`
	PeakAt      time.Time `json:"peak_at"`
	// Capacity is the most IDs one worker may stamp in one tick (snowflake
	// layouts: 2^seq bits); 0 when unknown.
	CapacityPerTick int64 `json:"capacity_per_tick,omitempty"`
	// Histogram counts IDs in equal slices of [First, Last+Tick).
	Histogram []Bin `json:"histogram"`
}

// Bin is one bar of the time histogram.
type Bin struct {
	Start time.Time `json:"start"`
	Count int       `json:"count"`
}

func (c *collector) timeStats(sorted []uint32) *Time {
	unit, epoch := c.p.clock()
	if unit <= 0 {
		return nil
	}
	// The ticks in ascending order: for a snowflake layout the sorted
	// IDs' top bits; otherwise a sorted copy of the ticks.
	tickAt := func(r int) int64 { return c.tick(int(sorted[r])) }
	if c.snow == nil {
		ts := make([]int64, c.n)
		for i := range ts {
			ts[i] = c.tick(i)
		}
		slices.Sort(ts)
		tickAt = func(r int) int64 { return ts[r] }
	}
	n := c.n
	t := &Time{Tick: unit}
	first, last := tickAt(0), tickAt(n-1)
	t.First, t.Last = tickTime(epoch, unit, first), tickTime(epoch, unit, last)
	span := t.Last.Add(unit).Sub(t.First)
	t.Span = span
	if span > 0 {
		t.RatePerSecond = float64(n) / span.Seconds()
	}
	// Histogram over ticks [first, last+1): bins of whole ticks.
	width := (uint64(last-first) + 1 + uint64(c.opt.Bins) - 1) / uint64(c.opt.Bins)
	width = max(width, 1)
	nb := int((uint64(last-first) + width) / width)
	t.Histogram = make([]Bin, nb)
	for b := range t.Histogram {
		t.Histogram[b].Start = tickTime(epoch, unit, first+int64(uint64(b)*width))
	}
	run := 0
	prev := first
	for r := range n {
		k := tickAt(r)
		if r > 0 && k == prev {
			run++
		} else {
			run = 1
		}
		prev = k
		if run > t.PeakPerTick {
			t.PeakPerTick, t.PeakAt = run, tickTime(epoch, unit, k)
		}
		t.Histogram[uint64(k-first)/width].Count++
	}
	if c.snow != nil {
		t.CapacityPerTick = int64(1) << uint(c.snow.l.SeqBits())
	}
	return t
}

// tickTime returns epoch + tick*unit exactly, in 128-bit arithmetic, so
// no layout's tick overflows time.Duration.
func tickTime(epoch time.Time, unit time.Duration, tick int64) time.Time {
	neg := tick < 0
	u := uint64(tick)
	if neg {
		u = uint64(-tick)
	}
	hi, lo := bits.Mul64(u, uint64(unit))
	if hi >= 1e9 {
		hi = 1e9 - 1 // beyond any representable date: saturate
	}
	sec, ns := bits.Div64(hi, lo, 1e9)
	sec = min(sec, math.MaxInt64/4)
	s, n := int64(sec), int64(ns)
	if neg {
		s, n = -s, -n
	}
	return time.Unix(epoch.Unix()+s, int64(epoch.Nanosecond())+n).UTC()
}
