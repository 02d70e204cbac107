package analyze

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/idmint/idmint/snowflake"
)

// Read holds a snowflake ID in 8 bytes and adds a 4-byte position per ID
// for the analysis; everything else is bounded by the layout, the mod-N
// sample and the report. What one Read allocates in all, per ID, stays
// under 24 bytes (about 14 today; the collector of maps and per-ID records
// it replaced allocated 280). Not parallel: the count is process-wide.
func TestReadMemoryPerID(t *testing.T) {
	tw, _ := snowflake.Lookup("twitter")
	const n = 200_000
	in := twitterLog(t, n)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rep, err := Read(bytes.NewReader(in), Options{Layout: tw, Now: now})
	runtime.ReadMemStats(&after)
	if err != nil || rep.Count != n {
		t.Fatalf("Read: %d IDs, %v", rep.Count, err)
	}
	perID := float64(after.TotalAlloc-before.TotalAlloc) / n
	t.Logf("%.1f bytes allocated per ID", perID)
	if perID > 24 {
		t.Fatalf("Read allocated %.1f bytes per ID for %d snowflake IDs; want at most 24", perID, n)
	}
}

// naiveOrder is the definition of the order statistics, computed the
// slow and obvious way: a stable sort of the positions by value gives
// every ID's rank; displacement is |position - rank|; a descent is a
// value below the previous one (of the same worker).
func naiveOrder(vals []uint64, lines []int) OrderStats {
	n := len(vals)
	pos := make([]int, n)
	for i := range pos {
		pos[i] = i
	}
	slices.SortStableFunc(pos, func(a, b int) int {
		switch {
		case vals[a] < vals[b]:
			return -1
		case vals[a] > vals[b]:
			return 1
		}
		return 0
	})
	rank := make([]int, n)
	for r, i := range pos {
		rank[i] = r
	}
	s := OrderStats{Count: n}
	for i := range n {
		d := i - rank[i]
		if d < 0 {
			d = -d
		}
		if d > s.MaxDisplacement {
			s.MaxDisplacement, s.MaxAtLine = d, lines[i]
		}
		if i > 0 && vals[i] < vals[i-1] {
			s.Descents++
			if s.FirstDescentLine == 0 {
				s.FirstDescentLine = lines[i]
			}
		}
	}
	return s
}

// TestReadAgainstNaive: on inputs with blank lines, comments, lines that
// are not IDs, duplicates and disorder from four workers, every line
// number, duplicate and order statistic Read reports is the one the naive
// definition gives.
func TestReadAgainstNaive(t *testing.T) {
	t.Parallel()
	tw, _ := snowflake.Lookup("twitter")
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		n := 50 + rng.IntN(20000)
		var in strings.Builder
		var vals []uint64
		var lines []int
		line := 0
		byWorker := map[uint64][]int{} // worker -> indexes into vals
		for i := range n {
			for rng.IntN(10) == 0 { // blank lines, comments and junk between IDs
				line++
				in.WriteString([]string{"", "# comment", "not-an-id", "   "}[rng.IntN(4)] + "\n")
			}
			w := uint64(rng.IntN(4))
			tick := int64(i/3 + rng.IntN(30)) // disorder within about 30 ticks
			if rng.IntN(500) == 0 {
				tick -= 2000 // a clock stepped back
			}
			v := uint64(tick+5000)<<22 | w<<12 | uint64(rng.IntN(3))
			if len(vals) > 0 && rng.IntN(100) == 0 {
				v = vals[rng.IntN(len(vals))] // a repeated line
			}
			line++
			fmt.Fprintf(&in, " %d\n", v)
			byWorker[v>>12&(1<<10-1)] = append(byWorker[v>>12&(1<<10-1)], len(vals))
			vals = append(vals, v)
			lines = append(lines, line)
		}
		rep, err := Read(strings.NewReader(in.String()), Options{Layout: tw, Now: now, Examples: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Count != len(vals) {
			t.Fatalf("seed %d: %d IDs, want %d", seed, rep.Count, len(vals))
		}
		// Duplicates and their lines.
		where := map[uint64][]int{}
		for i, v := range vals {
			where[v] = append(where[v], lines[i])
		}
		var extra, values int
		for _, ls := range where {
			if len(ls) > 1 {
				values++
				extra += len(ls) - 1
			}
		}
		d := rep.Duplicates
		if d.Distinct != len(where) || d.Extra != extra || d.Values != values {
			t.Fatalf("seed %d: duplicates %+v; want %d distinct, %d extra of %d values", seed, d, len(where), extra, values)
		}
		for _, ex := range d.Examples {
			var v uint64
			fmt.Sscan(ex.ID, &v)
			want := where[v][:min(len(where[v]), 5)]
			if ex.Times != len(where[v]) || !slices.Equal(ex.Lines, want) {
				t.Fatalf("seed %d: duplicate %s x%d on lines %v; want x%d on %v", seed, ex.ID, ex.Times, ex.Lines, len(where[v]), want)
			}
		}
		// Order overall and per worker.
		want := naiveOrder(vals, lines)
		got := rep.Order.Overall
		got.Pairs, got.DescentFraction = 0, 0
		if got != want {
			t.Fatalf("seed %d: overall order %+v; want %+v", seed, got, want)
		}
		if rep.Order.Workers != len(byWorker) {
			t.Fatalf("seed %d: %d workers, want %d", seed, rep.Order.Workers, len(byWorker))
		}
		for _, wo := range rep.Order.PerWorker {
			var w uint64
			fmt.Sscanf(wo.Worker, "datacenter=0 worker=%d", &w)
			var wv []uint64
			var wl []int
			for _, i := range byWorker[w] {
				wv, wl = append(wv, vals[i]), append(wl, lines[i])
			}
			want := naiveOrder(wv, wl)
			got := wo.OrderStats
			got.Pairs, got.DescentFraction = 0, 0
			if got != want {
				t.Fatalf("seed %d: worker %s order %+v; want %+v", seed, wo.Worker, got, want)
			}
		}
	}
}

// The findings say one thing in the singular: "1 duplicate ID", "1 ID is
// lower", "1 of 3 lines does not parse".
func TestFindingsWording(t *testing.T) {
	t.Parallel()
	tw, _ := snowflake.Lookup("twitter")
	id := func(tick int64, w, seq uint64) string { return fmt.Sprint(uint64(tick)<<22 | w<<12 | seq) }
	for _, c := range []struct {
		name, in string
		opt      Options
		want     []string
		not      []string
	}{
		{"one duplicate", "1\n2\n2\n3\n", Options{Format: Integer}, []string{"1 duplicate ID: 2 occurs 2 times (lines 2, 3)"}, []string{"IDs:", "values"}},
		{"two duplicates", "1\n1\n2\n2\n", Options{Format: Integer}, []string{"2 duplicate IDs: 2 values occur more than once, e.g. 1 2 times (lines 1, 2)"}, nil},
		{"one descent", "1\n3\n2\n4\n", Options{Format: Integer}, []string{"IDs (1) is lower than the ID before it (first at line 3); largest displacement 1 position (the input is 1-sorted)"}, nil},
		{"two descents", "2\n1\n4\n3\n", Options{Format: Integer}, []string{"IDs (2) are lower than the ID before them"}, nil},
		{"one bad line", "1\nx\n2\n", Options{Format: Integer}, []string{"1 of 3 lines does not parse as integer (line 2:"}, nil},
		{"two bad lines", "1\nx\ny\n2\n", Options{Format: Integer}, []string{"2 of 4 lines do not parse as integer"}, nil},
		{"one worker descent", strings.Join([]string{id(9e10, 1, 0), id(9e10+5, 1, 0), id(9e10+1, 1, 0)}, "\n"), Options{Layout: tw},
			[]string{"1 ID is lower than the previous ID of the same worker (worst: datacenter=0 worker=1 with 1, first at line 3"}, []string{"IDs are"}},
	} {
		c.opt.Now = now
		rep, err := Read(strings.NewReader(c.in), c.opt)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var all strings.Builder
		for _, f := range rep.Findings {
			all.WriteString(f.Message + "\n")
		}
		for _, w := range c.want {
			if !strings.Contains(all.String(), w) {
				t.Errorf("%s: findings lack %q:\n%s", c.name, w, all.String())
			}
		}
		for _, w := range c.not {
			if strings.Contains(all.String(), w) {
				t.Errorf("%s: findings say %q:\n%s", c.name, w, all.String())
			}
		}
	}
}

// Options.Progress hears from Read every ProgressLines lines and at the
// end of the input.
func TestReadProgress(t *testing.T) {
	t.Parallel()
	var in strings.Builder
	for i := range ProgressLines + 100 {
		fmt.Fprintln(&in, i+1)
	}
	var calls []int
	rep, err := Read(strings.NewReader(in.String()), Options{Format: Integer, Now: now, Progress: func(l int) { calls = append(calls, l) }})
	if err != nil || rep.Count != ProgressLines+100 {
		t.Fatal(rep, err)
	}
	if !slices.Equal(calls, []int{ProgressLines, ProgressLines + 100}) {
		t.Fatalf("progress calls %v; want %d and %d", calls, ProgressLines, ProgressLines+100)
	}
}
