// Package hdr is a histogram of non-negative int64 values (latencies in
// nanoseconds) in the manner of Gil Tene's HdrHistogram: buckets are
// log-linear, so every recorded value is kept to within a fixed relative
// error at any magnitude, in constant memory, with O(1) recording.
//
// With precision p (bits), values below 2^(p+1) are counted exactly; above,
// each power-of-two range [2^k, 2^(k+1)) is cut into 2^p equal buckets, so a
// bucket is at most 2^-p of its values wide (p = 7: 0.78 %, better than two
// significant decimal digits). ValueAt reports a bucket's highest value, as
// HdrHistogram's getValueAtPercentile reports the highest equivalent value,
// so a percentile is never understated.
//
// A Histogram is not safe for concurrent use; give each goroutine its own
// and Merge them.
package hdr

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// DefaultPrecision is the precision New uses: 7 bits, a relative error of
// at most 1/128 (0.78 %).
const DefaultPrecision = 7

// ErrPrecision is returned by NewPrecision for a precision outside 1..14.
var ErrPrecision = errors.New("hdr: precision must be between 1 and 14 bits")

// Histogram counts values in log-linear buckets.
type Histogram struct {
	p      uint // precision in bits
	counts []int64
	total  int64
	min    int64
	max    int64
	sum    float64
}

// New returns an empty histogram of DefaultPrecision.
func New() *Histogram {
	h, _ := NewPrecision(DefaultPrecision)
	return h
}

// NewPrecision returns an empty histogram whose buckets are at most
// 2^-precision of their values wide.
func NewPrecision(precision int) (*Histogram, error) {
	if precision < 1 || precision > 14 {
		return nil, fmt.Errorf("%w: got %d", ErrPrecision, precision)
	}
	p := uint(precision)
	// The largest int64 has 63 bits: shift 63-(p+1), index (shift<<p) + 2^(p+1)-1.
	n := ((63 - (p + 1)) << p) + (1 << (p + 1))
	return &Histogram{p: p, counts: make([]int64, n), min: math.MaxInt64}, nil
}

func (h *Histogram) index(v int64) int {
	u := uint64(v)
	shift := 0
	if n := bits.Len64(u); n > int(h.p)+1 {
		shift = n - int(h.p) - 1
	}
	return shift<<h.p + int(u>>uint(shift))
}

// bucketRange is the lowest and highest value counted in bucket i.
func (h *Histogram) bucketRange(i int) (lo, hi int64) {
	if i < 1<<(h.p+1) {
		return int64(i), int64(i)
	}
	shift := uint(i>>h.p) - 1
	top := uint64(i) - uint64(shift)<<h.p // v>>shift, in [2^p, 2^(p+1))
	lo = int64(top << shift)
	return lo, lo + int64(uint64(1)<<shift) - 1
}

// Record counts v once. A negative v counts as 0 (a latency measured
// across a clock step, which the monotonic clock rules out).
func (h *Histogram) Record(v int64) { h.RecordN(v, 1) }

// RecordN counts v n times; n ≤ 0 records nothing.
func (h *Histogram) RecordN(v int64, n int64) {
	if n <= 0 {
		return
	}
	if v < 0 {
		v = 0
	}
	h.counts[h.index(v)] += n
	h.total += n
	h.sum += float64(v) * float64(n)
	h.min = min(h.min, v)
	h.max = max(h.max, v)
}

// RecordCorrected counts v and, when v exceeds interval > 0, the values
// v-interval, v-2·interval, ... down to interval: the samples a load
// generator that sends one request per interval would have taken while this
// one was outstanding. This is HdrHistogram's correction for coordinated
// omission (recordValueWithExpectedInterval) for a closed loop with a known
// expected interval; an open loop corrects instead by timing each request
// from when it was due.
func (h *Histogram) RecordCorrected(v, interval int64) {
	h.Record(v)
	if interval <= 0 {
		return
	}
	for missing := v - interval; missing >= interval; missing -= interval {
		h.Record(missing)
	}
}

// Merge adds o's counts to h. Both must have the same precision.
func (h *Histogram) Merge(o *Histogram) error {
	if o.p != h.p {
		return fmt.Errorf("hdr: merge of precision %d into %d", o.p, h.p)
	}
	if o.total == 0 {
		return nil
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
	h.sum += o.sum
	h.min = min(h.min, o.min)
	h.max = max(h.max, o.max)
	return nil
}

// Reset empties h.
func (h *Histogram) Reset() {
	clear(h.counts)
	h.total, h.sum, h.min, h.max = 0, 0, math.MaxInt64, 0
}

// Count is the number of values recorded.
func (h *Histogram) Count() int64 { return h.total }

// Max is the largest value recorded, exactly (0 when empty).
func (h *Histogram) Max() int64 { return h.max }

// Min is the smallest value recorded, exactly (0 when empty).
func (h *Histogram) Min() int64 {
	if h.total == 0 {
		return 0
	}
	return h.min
}

// Mean is the mean of the values recorded (0 when empty).
func (h *Histogram) Mean() float64 {
	if h.total == 0 {
		return 0
	}
	return h.sum / float64(h.total)
}

// ValueAt returns the value below or at which a fraction q (0..1) of the
// recorded values lie: the highest value of the bucket that holds the
// ceil(q·count)-th smallest value, never above Max. It is 0 when empty.
func (h *Histogram) ValueAt(q float64) int64 {
	if h.total == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := int64(math.Ceil(q * float64(h.total)))
	rank = max(rank, 1)
	var seen int64
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		seen += c
		if seen >= rank {
			_, hi := h.bucketRange(i)
			return min(hi, h.max)
		}
	}
	return h.max
}
