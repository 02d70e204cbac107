package uuid

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/internal/entropy"
)

// V1 issues Gregorian-time UUIDs (RFC 9562 §5.1): a 60-bit count of 100-ns
// intervals since 1582-10-15, a 14-bit clock sequence and a 48-bit node.
// Unique per generator (see timeBased); safe for concurrent use.
type V1 struct{ t *timeBased }

// V6 issues reordered Gregorian-time UUIDs (RFC 9562 §5.6): V1's fields
// with the timestamp most significant first, so byte order is time order
// and they index like V7. Same guarantees as V1; safe for concurrent use.
type V6 struct{ t *timeBased }

// NewV1 returns a V1 generator. Settings.Clock, Rand, MaxWait, MaxAhead and
// Node are used; the clock sequence starts random.
func NewV1(s Settings) (*V1, error) {
	t, err := newTimeBased(s)
	if err != nil {
		return nil, err
	}
	return &V1{t: t}, nil
}

// NewV6 returns a V6 generator, configured as NewV1.
func NewV6(s Settings) (*V6, error) {
	t, err := newTimeBased(s)
	if err != nil {
		return nil, err
	}
	return &V6{t: t}, nil
}

// Next returns a UUID whose (timestamp, clock sequence) pair this generator
// never returned before. It fails with ErrTime if the
// clock is outside 1582..5236, ErrExhausted if it would have to lead the clock
// by more than MaxAhead for longer than MaxWait, or ctx's error if ctx ends
// while it waits.
func (g *V1) Next(ctx context.Context) (UUID, error) {
	ticks, seq, err := g.t.next(ctx)
	if err != nil {
		return Nil, err
	}
	return FromV1(ticks, seq, g.t.node), nil
}

// Next returns a UUID whose (timestamp, clock sequence) pair this generator
// never returned before; while the clock does not step back, each is greater
// than the last. It fails with ErrTime if the
// clock is outside 1582..5236, ErrExhausted if it would have to lead the clock
// by more than MaxAhead for longer than MaxWait, or ctx's error if ctx ends
// while it waits.
func (g *V6) Next(ctx context.Context) (UUID, error) {
	ticks, seq, err := g.t.next(ctx)
	if err != nil {
		return Nil, err
	}
	return FromV6(ticks, seq, g.t.node), nil
}

// Ahead reports how far the last timestamp issued is ahead of the clock: at
// most MaxAhead from load.
func (g *V1) Ahead() time.Duration { return g.t.ahead() }

// Ahead reports how far the last timestamp issued is ahead of the clock: at
// most MaxAhead from load.
func (g *V6) Ahead() time.Duration { return g.t.ahead() }

// timeBased is the state machine shared by V1 and V6.
//
// Each ID takes the tick max(clock, last+1). Under load that can lead the
// clock; the lead is capped at MaxAhead, beyond which next waits for the
// clock (bounded by MaxWait). When the clock reads earlier than it did at
// the previous call and the last tick is more than MaxAhead ahead of it,
// the wall clock stepped back: the clock sequence is incremented (RFC 9562
// §6.3) and ticks restart from the clock, so a (tick, sequence) pair never
// repeats unless the sequence wraps after 16,384 such steps in one
// generator's life.
type timeBased struct {
	mu       sync.Mutex
	clk      clock.Clock
	maxWait  time.Duration
	maxAhead uint64 // in ticks
	node     [6]byte
	seq      uint16 // 14 bits
	last     uint64 // last tick issued
	lastNow  uint64 // clock reading, in ticks, at the last issue
}

func newTimeBased(s Settings) (*timeBased, error) {
	s, err := s.withDefaults()
	if err != nil {
		return nil, err
	}
	src := entropy.New(s.Rand)
	r, err := src.Uint64()
	if err != nil {
		return nil, err
	}
	t := &timeBased{clk: s.Clock, maxWait: s.MaxWait, maxAhead: uint64(s.MaxAhead / 100)}
	t.seq = uint16(r>>48) & 0x3fff
	if s.Node != nil {
		copy(t.node[:], s.Node)
	} else {
		binary.BigEndian.PutUint16(t.node[0:2], uint16(r>>32))
		binary.BigEndian.PutUint32(t.node[2:6], uint32(r))
		t.node[0] |= 0x01 // multicast bit: cannot clash with a real MAC (RFC 9562 §6.10)
	}
	return t, nil
}

// next returns a tick and clock sequence. It fails with ErrTime when the
// clock reads before 1582-10-15 or past the 60-bit range (year 5236),
// ErrExhausted when the lead would exceed MaxAhead for longer than MaxWait,
// or ctx's error if ctx ends while waiting.
func (t *timeBased) next(ctx context.Context) (uint64, uint16, error) {
	for {
		t.mu.Lock()
		now := t.clk.Now()
		ticks, ok := toTicks(now)
		if !ok {
			t.mu.Unlock()
			return 0, 0, fmt.Errorf("%w: %v is outside the 60-bit Gregorian range of UUID v1/v6", ErrTime, now)
		}
		tick := max(ticks, t.last+1)
		if tick-ticks > t.maxAhead {
			if ticks < t.lastNow {
				// The wall clock stepped back: new clock sequence.
				t.seq = (t.seq + 1) & 0x3fff
				tick = ticks
			} else {
				// Overload: more than one ID per 100 ns for MaxAhead.
				wait := time.Duration(tick-ticks-t.maxAhead) * 100
				t.mu.Unlock()
				if wait > t.maxWait {
					return 0, 0, fmt.Errorf("%w: timestamp %v ahead of the clock, wait %v exceeds MaxWait", ErrExhausted, time.Duration(tick-ticks)*100, wait)
				}
				if err := t.clk.Sleep(ctx, wait); err != nil {
					return 0, 0, err
				}
				continue
			}
		}
		t.last, t.lastNow = tick, ticks
		seq := t.seq
		t.mu.Unlock()
		return tick, seq, nil
	}
}

func (t *timeBased) ahead() time.Duration {
	t.mu.Lock()
	last := t.last
	t.mu.Unlock()
	now, ok := toTicks(t.clk.Now())
	if !ok || last <= now {
		return 0
	}
	return time.Duration(last-now) * 100
}

// toTicks converts a time to 100-ns intervals since 1582-10-15.
func toTicks(t time.Time) (uint64, bool) {
	// Split to avoid overflowing UnixNano outside 1678..2262.
	sec := t.Unix()
	const minSec = -gregorianOffset / 10_000_000
	const maxSec = (1<<60-gregorianOffset)/10_000_000 - 1
	if sec < minSec || sec > maxSec {
		return 0, false
	}
	return uint64(sec*10_000_000+int64(t.Nanosecond()/100)) + gregorianOffset, true
}
