package analyze

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/idmint/idmint/idformat"
)

// End says when the format's time field runs out.
type End struct {
	End       time.Time `json:"end"`
	YearsLeft float64   `json:"years_left"`
	Expired   bool      `json:"expired"`
	Source    string    `json:"source"`
}

// WarnYears: a layout with fewer years left than this is a warning.
const WarnYears = 10

// ordered reports whether IDs of the format are meant to increase (so
// disorder is worth a finding).
func (c *collector) ordered(rep *Report) bool {
	switch rep.Format {
	case Snowflake:
		return true
	case Integer:
		return !rep.ExpectRandom
	case idformat.ULID, idformat.KSUID, idformat.ObjectID, idformat.XID, idformat.Flake128,
		idformat.TimeRandom, idformat.TimeMember, idformat.TimeGene:
		return true
	}
	return false
}

func (c *collector) findings(rep *Report) {
	add := func(s Severity, kind, format string, a ...any) {
		rep.Findings = append(rep.Findings, Finding{Severity: s, Kind: kind, Message: fmt.Sprintf(format, a...)})
	}
	if iv := rep.Invalid; iv.Count > 0 {
		add(Warning, "input", "%d of %s %s as %s (line %d: %s)", iv.Count, plural(rep.Lines, "line", "lines"), choose1(iv.Count, "does not parse", "do not parse"), rep.Format, iv.Examples[0].Line, iv.Examples[0].Err)
	}
	if d := rep.Duplicates; d.Extra > 0 {
		ex := d.Examples[0]
		if d.Values == 1 {
			add(Defect, "duplicates", "%s: %s occurs %d times (lines %s)", plural(d.Extra, "duplicate ID", "duplicate IDs"), ex.ID, ex.Times, joinInts(ex.Lines))
		} else {
			add(Defect, "duplicates", "%s: %d values occur more than once, e.g. %s %d times (lines %s)",
				plural(d.Extra, "duplicate ID", "duplicate IDs"), d.Values, ex.ID, ex.Times, joinInts(ex.Lines))
		}
	}
	o := rep.Order
	switch {
	case o.Workers > 0 && o.Worst.Descents > 0:
		w := o.PerWorker[0]
		add(Defect, "disorder", "%s lower than the previous ID of the same worker (worst: %s with %d, first at line %d; largest displacement %d): a generator went backwards (clock rollback) or two generators share a worker ID",
			choose1(o.Worst.Descents, "1 ID is", fmt.Sprintf("%d IDs are", o.Worst.Descents)), w.Worker, w.Descents, w.FirstDescentLine, o.Worst.MaxDisplacement)
	case o.Workers == 0 && o.Overall.Descents > 0 && c.ordered(rep):
		add(Warning, "disorder", "%.2f %% of IDs (%d) %s lower than the ID before %s (first at line %d); largest displacement %s (the input is %d-sorted)",
			100*o.Overall.DescentFraction, o.Overall.Descents, choose1(o.Overall.Descents, "is", "are"), choose1(o.Overall.Descents, "it", "them"),
			o.Overall.FirstDescentLine, plural(o.Overall.MaxDisplacement, "position", "positions"), o.Overall.MaxDisplacement)
	}
	if o.Workers > 1 && o.Overall.Descents > 0 && o.Worst.Descents == 0 {
		add(Info, "disorder", "across %d workers the IDs interleave: %.2f %% are lower than the one before, largest displacement %s (k-sorted, k = %d); each worker on its own is in order",
			o.Workers, 100*o.Overall.DescentFraction, plural(o.Overall.MaxDisplacement, "position", "positions"), o.Overall.MaxDisplacement)
	}
	if t := rep.Time; t != nil && t.CapacityPerTick > 0 {
		for _, w := range o.PerWorker {
			if int64(w.PeakPerTick) > t.CapacityPerTick {
				add(Defect, "capacity", "worker %s has %d IDs in one tick of %v, more than the %d its sequence holds: two generators share the worker ID, or the layout is wrong",
					w.Worker, w.PeakPerTick, t.Tick, t.CapacityPerTick)
				break
			}
		}
	}
	if m := rep.Mod; m != nil && m.Skewed {
		w := m.Worst
		add(Warning, "skew", "id mod N is uneven for %d of %d Ns; worst N = %d: the fullest residue holds %.2fx its share, %d of %d residues are empty (chi-square %.0f, p = %.2g). Sharding by id %% %d would be skewed, as it is for every sequence that restarts at 0 on each tick. Start each tick's sequence at a random value over its whole range (layout seq=<bits>:rand) or shard by a hash of the ID; Leaf's start in 0-99 still skews id mod 32, 64, 128 and up, which 100 is not a multiple of",
			m.SkewedNs, MaxMod-1, w.N, w.MaxShare, w.Empty, w.N, w.Chi2, w.P, w.N)
	}
	if e := rep.End; e != nil {
		switch {
		case e.Expired:
			add(Defect, "end", "the format ran out on %s (%s): new IDs cannot be stamped; re-base the layout with a later epoch", e.End.Format(time.RFC3339), e.Source)
		case e.YearsLeft < WarnYears:
			add(Warning, "end", "the format runs out on %s, in %.1f years (%s)", e.End.Format("2006-01-02"), e.YearsLeft, e.Source)
		default:
			add(Info, "end", "the format runs out on %s, in %s (%s)", e.End.Format("2006-01-02"), plural(int(math.Round(e.YearsLeft)), "year", "years"), e.Source)
		}
	}
	if r := rep.Random; r != nil {
		var failed []string
		for _, t := range r.Tests {
			if !t.Pass {
				failed = append(failed, t.Name+" ("+t.Detail+")")
			}
		}
		switch {
		case rep.ExpectRandom && r.Distinguishable:
			add(Defect, "pattern", "consecutive values are distinguishable from random, so the next one can be guessed: %s", strings.Join(failed, "; "))
		case rep.ExpectRandom:
			add(Info, "pattern", "consecutive values are indistinguishable from random by %d tests", len(r.Tests))
		case r.Distinguishable:
			add(Info, "pattern", "consecutive values are not random (expected for ordered IDs): %s", strings.Join(failed, "; "))
		}
	}
	rank := map[Severity]int{Defect: 0, Warning: 1, Info: 2}
	slices.SortStableFunc(rep.Findings, func(a, b Finding) int { return rank[a.Severity] - rank[b.Severity] })
}

// plural is n and the noun, singular when n is 1: "1 duplicate ID",
// "2 duplicate IDs".
func plural(n int, one, many string) string { return fmt.Sprintf("%d %s", n, choose1(n, one, many)) }

// choose1 is one when n is 1, else many.
func choose1(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}
