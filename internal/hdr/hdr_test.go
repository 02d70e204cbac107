package hdr

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// Every value lands in a bucket that contains it, buckets tile the line
// without gaps or overlaps, and each is at most 2^-p of its values wide.
func TestBucketsTile(t *testing.T) {
	for _, p := range []int{1, 3, 7} {
		h, err := NewPrecision(p)
		if err != nil {
			t.Fatal(err)
		}
		prevHi := int64(-1)
		for i := range h.counts {
			lo, hi := h.bucketRange(i)
			if lo != prevHi+1 {
				t.Fatalf("p=%d bucket %d starts at %d, previous ended at %d", p, i, lo, prevHi)
			}
			if w := hi - lo + 1; w > 1 && float64(w)/float64(lo) > math.Ldexp(1, -p)+1e-12 {
				t.Fatalf("p=%d bucket %d [%d,%d] is wider than 2^-%d of its values", p, i, lo, hi, p)
			}
			if h.index(lo) != i || h.index(hi) != i {
				t.Fatalf("p=%d bucket %d [%d,%d]: index(lo)=%d index(hi)=%d", p, i, lo, hi, h.index(lo), h.index(hi))
			}
			prevHi = hi
		}
		if prevHi != math.MaxInt64 {
			t.Fatalf("p=%d: the last bucket ends at %d, not MaxInt64", p, prevHi)
		}
	}
}

// Percentiles agree with the exact ones from the sorted values, within
// the precision, on a heavy-tailed sample spanning ns to seconds.
func TestPercentilesMatchExact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	h := New()
	var vals []int64
	for range 200_000 {
		v := int64(math.Exp(r.NormFloat64()*2.5 + 11)) // median ~60 µs, tail to seconds
		vals = append(vals, v)
		h.Record(v)
	}
	slices.Sort(vals)
	for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999, 0.9999, 1} {
		rank := max(int(math.Ceil(q*float64(len(vals)))), 1)
		exact := vals[rank-1]
		got := h.ValueAt(q)
		if got < exact || float64(got-exact) > float64(exact)/128+1 {
			t.Errorf("q=%v: got %d, exact %d (must be ≥ exact and within 1/128)", q, got, exact)
		}
	}
	if h.Max() != vals[len(vals)-1] || h.Min() != vals[0] || h.Count() != int64(len(vals)) {
		t.Errorf("max %d min %d count %d, want %d %d %d", h.Max(), h.Min(), h.Count(), vals[len(vals)-1], vals[0], len(vals))
	}
}

func TestSmallValuesExact(t *testing.T) {
	h := New()
	for v := int64(0); v < 256; v++ {
		h.Record(v)
	}
	for _, c := range []struct {
		q    float64
		want int64
	}{{0.5, 127}, {0.9, 230}, {1, 255}, {0, 0}} {
		if got := h.ValueAt(c.q); got != c.want {
			t.Errorf("ValueAt(%v) = %d, want %d", c.q, got, c.want)
		}
	}
}

// One 100 ms stall seen by a loop that sends every 1 ms: the corrected
// histogram holds the 99 requests that could not be sent (99 ms, 98 ms,
// ..., 1 ms), so p90 reflects the stall; uncorrected, it does not.
func TestRecordCorrected(t *testing.T) {
	const ms = int64(1e6)
	plain, corr := New(), New()
	for range 1000 {
		plain.Record(ms / 2)
		corr.RecordCorrected(ms/2, ms)
	}
	plain.Record(100 * ms)
	corr.RecordCorrected(100*ms, ms)
	if plain.Count() != 1001 || corr.Count() != 1001+99 {
		t.Fatalf("counts %d and %d, want 1001 and 1100", plain.Count(), corr.Count())
	}
	if p := plain.ValueAt(0.99); p > ms {
		t.Errorf("uncorrected p99 %d, want the fast path's 0.5 ms", p)
	}
	if p := corr.ValueAt(0.99); p < 80*ms {
		t.Errorf("corrected p99 %d, want ≥ 80 ms (the stall's backlog)", p)
	}
	if p := corr.ValueAt(0.95); p < 40*ms {
		t.Errorf("corrected p95 %d, want ≥ 40 ms", p)
	}
}

func TestMergeAndReset(t *testing.T) {
	a, b := New(), New()
	a.Record(10)
	b.Record(1_000_000)
	b.Record(5)
	if err := a.Merge(b); err != nil {
		t.Fatal(err)
	}
	if a.Count() != 3 || a.Max() != 1_000_000 || a.Min() != 5 {
		t.Fatalf("merged count %d max %d min %d", a.Count(), a.Max(), a.Min())
	}
	c, _ := NewPrecision(3)
	if err := a.Merge(c); err == nil {
		t.Error("merge of different precisions: no error")
	}
	a.Reset()
	if a.Count() != 0 || a.ValueAt(0.99) != 0 || a.Max() != 0 || a.Min() != 0 {
		t.Errorf("after Reset: count %d p99 %d max %d min %d", a.Count(), a.ValueAt(0.99), a.Max(), a.Min())
	}
}

func TestBadInput(t *testing.T) {
	if _, err := NewPrecision(0); !errors.Is(err, ErrPrecision) {
		t.Errorf("precision 0: %v", err)
	}
	h := New()
	h.Record(-5)
	h.RecordN(7, 0)
	if h.Count() != 1 || h.Max() != 0 {
		t.Errorf("negative records as 0 and n=0 records nothing: count %d max %d", h.Count(), h.Max())
	}
}

func BenchmarkRecord(b *testing.B) {
	h := New()
	b.ReportAllocs()
	for i := range b.N {
		h.Record(int64(i) * 977)
	}
}
