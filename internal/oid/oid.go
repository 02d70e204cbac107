// Package oid is the engine shared by MongoDB ObjectIDs and xids: 12 bytes
// of 4-byte big-endian Unix seconds, 5 bytes that name the process, and a
// 3-byte big-endian counter.
//
// Both formats' reference generators let the 24-bit counter wrap, so a
// process issuing more than 2^24 IDs in one second repeats IDs (rs/xid was
// measured doing so past ~16.7 million IDs/s). Gen counts the IDs it issued
// in the current second instead; the 2^24-th waits for the next second.
// The counter itself runs on across seconds from a random start, as both
// specifications ask, so the counter values of one second are a contiguous
// window of at most 2^24 and never repeat within it.
package oid

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/idmint/idmint/clock"
)

// PerSecond is how many IDs one Gen issues per second at most.
const PerSecond = 1 << 24

// Errors lets each format return its own package's sentinels.
type Errors struct {
	Time      error // the clock is outside 1970..2106
	Exhausted error // PerSecond IDs issued and the next second is more than MaxWait away
}

// Gen issues 12-byte IDs. Safe for concurrent use, without a lock: an ID
// costs a clock read and one atomic add on the current second's count
// (rs/xid's own cost), and a new second is one compare-and-swap.
type Gen struct {
	clk     clock.Clock
	maxWait time.Duration
	errs    Errors
	proc    [5]byte
	limit   uint32 // PerSecond; tests lower it
	cur     atomic.Pointer[second]
}

// second is the budget of one second: the IDs of second sec take counter
// values ctr0, ctr0+1, ... (mod 2^24), one per value of used below limit.
type second struct {
	sec  int64 // -1 before the first ID
	ctr0 uint32
	used atomic.Uint64
}

// New returns a Gen stamping from clk with the given process bytes and a
// counter starting at ctr0 (mod 2^24).
func New(clk clock.Clock, maxWait time.Duration, errs Errors, proc [5]byte, ctr0 uint32) *Gen {
	g := &Gen{clk: clk, maxWait: maxWait, errs: errs, proc: proc, limit: PerSecond}
	g.cur.Store(&second{sec: -1, ctr0: ctr0 & (PerSecond - 1)})
	return g
}

// SetLimit lowers the per-second budget; for tests of the exhaustion path.
func (g *Gen) SetLimit(n uint32) { g.limit = n }

// Next returns an ID not issued before by this Gen. While the wall clock
// does not step back, one goroutine's IDs increase in byte order except
// where the counter wraps within a second. After a step back the last
// second is reused (its budget continues), so IDs stay unique; Ahead
// reports the lead.
func (g *Gen) Next(ctx context.Context) ([12]byte, error) {
	for {
		now := g.clk.Now()
		sec := now.Unix()
		if sec < 0 || sec > 1<<32-1 {
			return [12]byte{}, fmt.Errorf("%w: %v is outside the 32-bit seconds range (1970..2106)", g.errs.Time, now)
		}
		s := g.cur.Load()
		if sec > s.sec {
			// The counter runs on from where the last second stopped.
			n := &second{sec: sec, ctr0: (s.ctr0 + uint32(min(s.used.Load(), uint64(g.limit)))) & (PerSecond - 1)}
			if !g.cur.CompareAndSwap(s, n) {
				continue
			}
			s = n
		}
		u := s.used.Add(1) - 1
		if u >= uint64(g.limit) {
			wait := time.Unix(s.sec+1, 0).Sub(now)
			if wait > g.maxWait {
				return [12]byte{}, fmt.Errorf("%w: %d IDs issued in second %d and the clock is %v from the next", g.errs.Exhausted, g.limit, s.sec, wait)
			}
			if err := g.clk.Sleep(ctx, wait); err != nil {
				return [12]byte{}, err
			}
			continue
		}
		ctr := (s.ctr0 + uint32(u)) & (PerSecond - 1)
		var id [12]byte
		binary.BigEndian.PutUint32(id[0:4], uint32(s.sec))
		copy(id[4:9], g.proc[:])
		id[9], id[10], id[11] = byte(ctr>>16), byte(ctr>>8), byte(ctr)
		return id, nil
	}
}

// Ahead reports how far the second of the last ID is ahead of the clock:
// zero unless the wall clock stepped back.
func (g *Gen) Ahead() time.Duration {
	sec := g.cur.Load().sec
	if sec < 0 {
		return 0
	}
	return max(0, time.Unix(sec, 0).Sub(g.clk.Now()))
}
