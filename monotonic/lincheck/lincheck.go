// Package lincheck verifies a history of ID requests against the monotonic
// contract (design invariant U8): every ID is unique, and whenever request
// A's answer was received before request B was sent, every ID of A is
// below every ID of B. Times are readings of one monotonic clock.
package lincheck

import (
	"fmt"
	"sort"
	"time"
)

// Op is one completed request.
type Op struct {
	Sent, Received time.Duration // monotonic readings around the request
	IDs            []int64       // what it returned (at least one)
	Label          string        // for messages: node, client, scenario
}

// Violation is one broken rule.
type Violation struct {
	Kind string // "duplicate", "order", "empty", "time"
	Msg  string
}

// Check returns every duplicate (one per repeated ID) and, for each
// request B, the first violation of real-time order found against it,
// at most limit in all (limit <= 0: no limit). It runs in O(n log n) in the
// number of IDs and requests.
//
// Order: sort the requests by received time; for each B (by sent time)
// the requests received strictly before B.Sent form a prefix of that
// order, so B is in order iff min(B) exceeds the maximum of max(A) over
// the prefix, which a sweep keeps as it goes.
func Check(ops []Op, limit int) []Violation {
	var out []Violation
	add := func(v Violation) bool {
		out = append(out, v)
		return limit > 0 && len(out) >= limit
	}
	type span struct {
		lo, hi int64
		i      int
	}
	spans := make([]span, 0, len(ops))
	total := 0
	for i, op := range ops {
		if len(op.IDs) == 0 {
			if add(Violation{"empty", fmt.Sprintf("request %d (%s) returned no IDs", i, op.Label)}) {
				return out
			}
			continue
		}
		if op.Received < op.Sent {
			if add(Violation{"time", fmt.Sprintf("request %d (%s) received %v before it was sent %v", i, op.Label, op.Received, op.Sent)}) {
				return out
			}
			continue // its IDs still count for duplicates
		}
		lo, hi := op.IDs[0], op.IDs[0]
		for _, id := range op.IDs {
			lo, hi = min(lo, id), maxInt(hi, id)
		}
		spans = append(spans, span{lo, hi, i})
	}
	for _, op := range ops {
		total += len(op.IDs)
	}
	all := make([]int64, 0, total)
	for _, op := range ops {
		all = append(all, op.IDs...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] && (i < 2 || all[i-2] != all[i]) {
			if add(Violation{"duplicate", fmt.Sprintf("ID %d returned more than once", all[i])}) {
				return out
			}
		}
	}
	byRecv := append([]span(nil), spans...)
	sort.Slice(byRecv, func(i, j int) bool { return ops[byRecv[i].i].Received < ops[byRecv[j].i].Received })
	bySent := append([]span(nil), spans...)
	sort.Slice(bySent, func(i, j int) bool { return ops[bySent[i].i].Sent < ops[bySent[j].i].Sent })
	j := 0
	var prefixMax int64
	prefixOp := -1
	for _, b := range bySent {
		sent := ops[b.i].Sent
		for j < len(byRecv) && ops[byRecv[j].i].Received < sent {
			if prefixOp < 0 || byRecv[j].hi > prefixMax {
				prefixMax, prefixOp = byRecv[j].hi, byRecv[j].i
			}
			j++
		}
		if prefixOp >= 0 && b.lo <= prefixMax {
			a, bo := ops[prefixOp], ops[b.i]
			if add(Violation{"order", fmt.Sprintf("request %d (%s) sent at %v got %d, not above %d of request %d (%s) received at %v",
				b.i, bo.Label, bo.Sent, b.lo, prefixMax, prefixOp, a.Label, a.Received)}) {
				return out
			}
		}
	}
	return out
}

func maxInt(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
