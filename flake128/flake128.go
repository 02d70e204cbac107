// Package flake128 issues and decodes 128-bit Boundary flakes.
//
// Boundary's flake (github.com/boundary/flake, 2012) puts a 64-bit Unix
// millisecond timestamp first, then a 48-bit worker ID (originally the MAC
// address of a network interface, so no coordination is needed), then a
// 16-bit sequence that restarts each millisecond:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Unix milliseconds (64 bits) ...               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                        ... milliseconds                       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      worker (48 bits) ...                     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          ... worker           |        sequence (16 bits)     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// IDs are written as 32 hex digits or as 22 base62 digits (0-9, A-Z, a-z,
// zero-padded so that text order is numeric order; Boundary's own base62
// form is not padded, and ParseBase62 accepts it).
//
// Guarantees: one Generator returns strictly increasing IDs, at most 65,536
// per millisecond; the next waits for the clock. IDs of different workers
// never collide. A worker ID must be held by one generator at a time: use
// a leased ID from package worker, or MACWorker, which identifies (leaks)
// the machine's network card exactly as Boundary's flake does.
package flake128

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"net"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/internal/idtext"
	"github.com/idmint/idmint/internal/stamp"
)

// ID is a 128-bit flake in big-endian byte order.
type ID [16]byte

// MaxWorker is the largest worker ID.
const MaxWorker = 1<<48 - 1

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// maxBase62 is 2^128-1 in base62.
var maxBase62 = ID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}.String()

var (
	// ErrLength is returned by the parsers for input of the wrong length.
	ErrLength = errors.New("flake128: wrong length")
	// ErrSyntax is returned by the parsers for a character outside the
	// alphabet.
	ErrSyntax = errors.New("flake128: invalid character")
	// ErrRange is returned by ParseBase62 when the value exceeds 128 bits.
	ErrRange = errors.New("flake128: value out of range")
	// ErrWorker is returned by New and MACWorker for a worker ID that is
	// out of range or cannot be found.
	ErrWorker = errors.New("flake128: bad worker")
	// ErrSettings is returned by New for an invalid Settings field.
	ErrSettings = errors.New("flake128: invalid settings")
	// ErrExhausted is returned by Next when 65,536 IDs were issued in the
	// current millisecond and the next is more than MaxWait away.
	ErrExhausted = errors.New("flake128: millisecond exhausted")
	// ErrTime is returned by Next when the clock reads before 1970.
	ErrTime = errors.New("flake128: clock out of range")
)

// Make assembles an ID from its parts. Bits of worker beyond 48 are dropped.
func Make(ms uint64, worker uint64, seq uint16) ID {
	var id ID
	binary.BigEndian.PutUint64(id[0:8], ms)
	binary.BigEndian.PutUint64(id[8:16], worker<<16|uint64(seq))
	return id
}

// Millis returns the Unix millisecond timestamp.
func (id ID) Millis() uint64 { return binary.BigEndian.Uint64(id[0:8]) }

// Time returns the timestamp as a time in UTC.
func (id ID) Time() time.Time { return time.UnixMilli(int64(id.Millis())).UTC() }

// Worker returns the 48-bit worker ID.
func (id ID) Worker() uint64 { return binary.BigEndian.Uint64(id[8:16]) >> 16 }

// Seq returns the 16-bit sequence.
func (id ID) Seq() uint16 { return binary.BigEndian.Uint16(id[14:16]) }

// Hex returns the 32-digit lowercase hex form.
func (id ID) Hex() string {
	var b [32]byte
	hex.Encode(b[:], id[:])
	return string(b[:])
}

// String returns the 22-digit base62 form, zero-padded so that it sorts
// like the ID.
func (id ID) String() string {
	hi, lo := binary.BigEndian.Uint64(id[0:8]), binary.BigEndian.Uint64(id[8:16])
	var b [22]byte
	for i := len(b) - 1; i >= 0; i-- {
		var r uint64
		hi, r = bits.Div64(0, hi, 62)
		lo, r = bits.Div64(r, lo, 62)
		b[i] = base62[r]
	}
	return string(b[:])
}

// MarshalText returns the base62 form.
func (id ID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText parses either form (see Parse).
func (id *ID) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// Parse decodes 32 hex digits or up to 22 base62 digits.
func Parse(s string) (ID, error) {
	if len(s) == 32 {
		return ParseHex(s)
	}
	return ParseBase62(s)
}

// ParseHex decodes the 32-digit hex form, in either case.
func ParseHex(s string) (ID, error) {
	var id ID
	if len(s) != 32 {
		return id, fmt.Errorf("%w: %s has %d characters, want 32 hex digits", ErrLength, idtext.Quote(s), len(s))
	}
	if err := idtext.DecodeHex(id[:], s, ErrSyntax); err != nil {
		return ID{}, err
	}
	return id, nil
}

// ParseBase62 decodes 1 to 22 base62 digits (0-9, A-Z, a-z; Boundary's
// unpadded form or this package's padded one). Errors wrap ErrLength,
// ErrSyntax or ErrRange (more than 128 bits).
func ParseBase62(s string) (ID, error) {
	if len(s) == 0 || len(s) > 22 {
		return ID{}, fmt.Errorf("%w: %s has %d characters, want 1 to 22 base62 digits or 32 hex digits", ErrLength, idtext.Quote(s), len(s))
	}
	var hi, lo uint64
	for i := range len(s) {
		d := digit62(s[i])
		if d < 0 {
			return ID{}, fmt.Errorf("%w: %s: %q at position %d is not base62", ErrSyntax, idtext.Quote(s), s[i], i)
		}
		// (hi, lo) = (hi, lo)*62 + d, failing on overflow past 128 bits.
		h1, h0 := bits.Mul64(hi, 62)
		l1, l0 := bits.Mul64(lo, 62)
		var c, c2 uint64
		lo, c = bits.Add64(l0, uint64(d), 0)
		hi, c2 = bits.Add64(h0, l1, c)
		if h1 != 0 || c2 != 0 {
			return ID{}, fmt.Errorf("%w: %s exceeds 2^128-1 (largest is %s)", ErrRange, idtext.Quote(s), maxBase62)
		}
	}
	var id ID
	binary.BigEndian.PutUint64(id[0:8], hi)
	binary.BigEndian.PutUint64(id[8:16], lo)
	return id, nil
}

func digit62(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'A' <= c && c <= 'Z':
		return int(c-'A') + 10
	case 'a' <= c && c <= 'z':
		return int(c-'a') + 36
	}
	return -1
}

// MACWorker returns the hardware address of the first up, non-loopback
// network interface with a 6-byte address, as a worker ID. Like Boundary's
// flake, this needs no coordination but puts the MAC address in every ID;
// prefer a leased worker ID where that matters.
func MACWorker() (uint64, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return 0, fmt.Errorf("%w: list interfaces: %v", ErrWorker, err)
	}
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 || len(i.HardwareAddr) != 6 {
			continue
		}
		var b [8]byte
		copy(b[2:], i.HardwareAddr)
		return binary.BigEndian.Uint64(b[:]), nil
	}
	return 0, fmt.Errorf("%w: no up, non-loopback interface with a 6-byte MAC address", ErrWorker)
}

// Settings configures a Generator. The zero value is valid.
type Settings struct {
	// Clock stamps IDs. Nil means the real clock read through a 1 ms cache
	// (clock.Shared(): stamps never run ahead of the real time and lag it by at most 1 ms).
	Clock clock.Clock
	// MaxWait bounds the wait for the next millisecond once 65,536 IDs were
	// issued in one; zero means 1 s, negative is invalid.
	MaxWait time.Duration
}

// Generator issues strictly increasing flakes for one worker. Safe for
// concurrent use.
type Generator struct {
	t      stamp.Millis
	worker uint64
	next   uint32 // next sequence in t.Last, under t.Mu; 1<<16 when exhausted
}

// New returns a Generator for a worker ID in [0, MaxWorker].
func New(worker uint64, s Settings) (*Generator, error) {
	if worker > MaxWorker {
		return nil, fmt.Errorf("%w: worker %d exceeds 48 bits (max %d)", ErrWorker, worker, uint64(MaxWorker))
	}
	if s.MaxWait < 0 {
		return nil, fmt.Errorf("%w: MaxWait = %v, want >= 0", ErrSettings, s.MaxWait)
	}
	if s.MaxWait == 0 {
		s.MaxWait = time.Second
	}
	if s.Clock == nil {
		s.Clock = clock.Shared()
	}
	return &Generator{t: stamp.Millis{Clk: s.Clock, MaxWait: s.MaxWait, Last: -1}, worker: worker}, nil
}

// Next returns a flake greater than every flake this Generator returned
// before. If the wall clock steps back it keeps the last millisecond and
// its remaining sequence numbers (Ahead reports the lead), then waits. It
// fails with ErrTime before 1970, ErrExhausted when it would wait longer
// than MaxWait, or ctx's error if ctx ends while it waits.
func (g *Generator) Next(ctx context.Context) (ID, error) {
	for {
		g.t.Mu.Lock()
		now := g.t.Clk.Now()
		ms := now.UnixMilli()
		if ms < 0 {
			g.t.Mu.Unlock()
			return ID{}, fmt.Errorf("%w: %v is before 1970", ErrTime, now)
		}
		if ms > g.t.Last {
			g.t.Last, g.next = ms, 0
		}
		if g.next > 0xffff {
			if err := g.t.Wait(ctx, now, func(held int64, wait time.Duration) error {
				return fmt.Errorf("%w: 65536 IDs issued in millisecond %d and the clock is %v from the next", ErrExhausted, held, wait)
			}); err != nil {
				return ID{}, err
			}
			continue
		}
		id := Make(uint64(g.t.Last), g.worker, uint16(g.next))
		g.next++
		g.t.Mu.Unlock()
		return id, nil
	}
}

// Ahead reports how far the last flake's millisecond is ahead of the clock:
// zero unless the wall clock stepped back.
func (g *Generator) Ahead() time.Duration { return g.t.Ahead() }
