package analyze

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"time"
)

// collector holds the parsed IDs as parallel slices (about 44 bytes per ID).
type collector struct {
	p       parser
	opt     Options
	lines   int
	invalid Invalid

	keys    []key
	lineNo  []int32
	ticks   []int64 // when the format has time
	workers []int32 // when the format has workers: index into wlabels
	bodies  []uint64
	modvs   []uint64

	isOrder bool
	wIndex  map[workerKey]int32
	wRecs   []rec // one rec per worker, for its label
	timed   bool
}

type workerKey struct {
	n uint64
	s string
}

func newCollector(p parser, opt Options) *collector {
	_, isOrder := p.(*orderParser)
	return &collector{p: p, opt: opt, isOrder: isOrder, wIndex: map[workerKey]int32{}}
}

func (c *collector) n() int { return len(c.keys) }

func (c *collector) add(l Line) {
	c.lines++
	r, err := c.p.parse(l.Text)
	if err != nil {
		c.invalid.Count++
		if len(c.invalid.Examples) < max(c.opt.Examples, 1) {
			c.invalid.Examples = append(c.invalid.Examples, Line{Line: l.Line, Text: clip(l.Text), Err: err.Error()})
		}
		return
	}
	if len(c.keys) == 0 {
		c.timed = r.hasTick
	}
	c.keys = append(c.keys, r.k)
	c.lineNo = append(c.lineNo, int32(min(l.Line, math.MaxInt32)))
	if c.timed {
		c.ticks = append(c.ticks, r.tick)
	}
	if c.p.hasWorker() {
		wk := workerKey{r.wnum, r.wstr}
		w, ok := c.wIndex[wk]
		if !ok {
			w = int32(len(c.wRecs))
			c.wIndex[wk] = w
			c.wRecs = append(c.wRecs, r)
		}
		c.workers = append(c.workers, w)
	}
	if c.isOrder {
		c.bodies = append(c.bodies, r.body)
		c.modvs = append(c.modvs, r.modv)
	}
}

// text renders the ID at position i for examples.
func (c *collector) text(i int) string {
	k := c.keys[i]
	if k[0] == 0 && k[1] == 0 {
		return fmt.Sprint(k[2])
	}
	return fmt.Sprintf("%x:%016x:%016x", k[0], k[1], k[2])
}

func (c *collector) analyse(rep *Report) {
	n := c.n()
	rep.Count = n
	// One sort by (key, position) gives duplicates, ranks and displacement.
	idx := make([]int32, n)
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int {
		if r := cmpKey(c.keys[a], c.keys[b]); r != 0 {
			return r
		}
		return int(a - b)
	})
	rank := make([]int32, n)
	for r, i := range idx {
		rank[i] = int32(r)
	}
	c.duplicates(rep, idx)
	c.order(rep, rank)
	if c.timed {
		rep.Time = c.timeStats()
	}
	if c.opt.ModSample > 0 && n >= 2 {
		rep.Mod = c.modStats()
	}
	if t, note := c.p.end(); !t.IsZero() {
		rep.End = &End{End: t, Source: note, YearsLeft: t.Sub(c.opt.Now).Hours() / 24 / 365.2425, Expired: !c.opt.Now.Before(t)}
		if t.Sub(c.opt.Now) == math.MaxInt64 {
			rep.End.YearsLeft = float64(t.Year() - c.opt.Now.Year())
		}
	}
	if n >= 3 {
		if c.isOrder {
			rep.Random = randomness(c.bodies, nil)
		} else {
			low := make([]uint64, n)
			for i, k := range c.keys {
				low[i] = k[2]
			}
			rep.Random = randomness(low, rank)
		}
	}
	c.findings(rep)
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

func (c *collector) duplicates(rep *Report, idx []int32) {
	d := &rep.Duplicates
	for i := 0; i < len(idx); {
		j := i + 1
		for j < len(idx) && c.keys[idx[j]] == c.keys[idx[i]] {
			j++
		}
		d.Distinct++
		if j-i > 1 {
			d.Values++
			d.Extra += j - i - 1
			if len(d.Examples) < c.opt.Examples {
				ex := Dup{ID: c.text(int(idx[i])), Times: j - i}
				for _, p := range idx[i:min(j, i+5)] {
					ex.Lines = append(ex.Lines, int(c.lineNo[p]))
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

func (c *collector) order(rep *Report, rank []int32) {
	n := c.n()
	o := &rep.Order
	o.Overall.Count = n
	bins := min(c.opt.Bins, n)
	o.Plot = make([]OrderPoint, bins)
	for b := range o.Plot {
		o.Plot[b].From, o.Plot[b].To = b*n/bins, (b+1)*n/bins
	}
	for i := range n {
		d := abs(i - int(rank[i]))
		b := i * bins / n
		if d > o.Plot[b].MaxDisplacement {
			o.Plot[b].MaxDisplacement = d
		}
		if d > o.Overall.MaxDisplacement {
			o.Overall.MaxDisplacement, o.Overall.MaxAtLine = d, int(c.lineNo[i])
		}
		if i > 0 && cmpKey(c.keys[i], c.keys[i-1]) < 0 {
			o.Overall.Descents++
			o.Plot[b].Descents++
			if o.Overall.FirstDescentLine == 0 {
				o.Overall.FirstDescentLine = int(c.lineNo[i])
			}
		}
	}
	if n > 1 {
		o.Overall.Pairs = n - 1
		o.Overall.DescentFraction = float64(o.Overall.Descents) / float64(n-1)
	}
	if c.workers == nil {
		return
	}
	c.workerOrder(rep)
}

// workerOrder repeats the order analysis within each worker: one sort by
// (worker, key, position); an ID's place among its worker's IDs in input
// order is counted in one pass.
func (c *collector) workerOrder(rep *Report) {
	n := c.n()
	nw := len(c.wRecs)
	o := &rep.Order
	o.Workers = nw
	local := make([]int32, n) // position among the worker's IDs, input order
	seen := make([]int32, nw)
	last := make([]int32, nw)
	stats := make([]WorkerOrder, nw)
	for w := range stats {
		last[w] = -1
	}
	for i, w := range c.workers {
		local[i] = seen[w]
		seen[w]++
		s := &stats[w].OrderStats
		s.Count++
		if p := last[w]; p >= 0 && cmpKey(c.keys[i], c.keys[p]) < 0 {
			s.Descents++
			if s.FirstDescentLine == 0 {
				s.FirstDescentLine = int(c.lineNo[i])
			}
		}
		last[w] = int32(i)
	}
	idx := make([]int32, n)
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int {
		if c.workers[a] != c.workers[b] {
			return int(c.workers[a] - c.workers[b])
		}
		if r := cmpKey(c.keys[a], c.keys[b]); r != 0 {
			return r
		}
		return int(a - b)
	})
	for g := 0; g < n; {
		w := c.workers[idx[g]]
		e := g
		for e < n && c.workers[idx[e]] == w {
			e++
		}
		s := &stats[w]
		run := 0
		for r := g; r < e; r++ {
			i := idx[r]
			if d := abs(int(local[i]) - (r - g)); d > s.MaxDisplacement {
				s.MaxDisplacement, s.MaxAtLine = d, int(c.lineNo[i])
			}
			if c.timed {
				if r > g && c.ticks[i] == c.ticks[idx[r-1]] {
					run++
				} else {
					run = 1
				}
				s.PeakPerTick = max(s.PeakPerTick, run)
			}
		}
		g = e
	}
	for w := range stats {
		s := &stats[w]
		s.Worker = c.p.workerLabel(c.wRecs[w])
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

func (c *collector) timeStats() *Time {
	unit, epoch := c.p.clock()
	if unit <= 0 {
		return nil
	}
	ticks := slices.Clone(c.ticks)
	slices.Sort(ticks)
	t := &Time{Tick: unit}
	first, last := ticks[0], ticks[len(ticks)-1]
	t.First, t.Last = tickTime(epoch, unit, first), tickTime(epoch, unit, last)
	span := t.Last.Add(unit).Sub(t.First)
	t.Span = span
	if span > 0 {
		t.RatePerSecond = float64(len(ticks)) / span.Seconds()
	}
	run := 0
	for i, k := range ticks {
		if i > 0 && k == ticks[i-1] {
			run++
		} else {
			run = 1
		}
		if run > t.PeakPerTick {
			t.PeakPerTick, t.PeakAt = run, tickTime(epoch, unit, k)
		}
	}
	if sp, ok := c.p.(*snowParser); ok {
		t.CapacityPerTick = int64(1) << uint(sp.l.SeqBits())
	}
	// Histogram over ticks [first, last+1): bins of whole ticks.
	width := (uint64(last-first) + 1 + uint64(c.opt.Bins) - 1) / uint64(c.opt.Bins)
	width = max(width, 1)
	nb := int((uint64(last-first) + width) / width)
	t.Histogram = make([]Bin, nb)
	for b := range t.Histogram {
		t.Histogram[b].Start = tickTime(epoch, unit, first+int64(uint64(b)*width))
	}
	for _, k := range ticks {
		t.Histogram[uint64(k-first)/width].Count++
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
