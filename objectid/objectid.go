// Package objectid issues and parses MongoDB ObjectIDs.
//
// Layout, per the current BSON ObjectID specification
// (github.com/mongodb/specifications, source/bson-objectid/objectid.md):
//
//	+---------------+-------------------+-----------+
//	| 4 bytes       | 5 bytes           | 3 bytes   |
//	| Unix seconds  | per-process random| counter   |
//	| big-endian    |                   | big-endian|
//	+---------------+-------------------+-----------+
//
// Before that specification the middle five bytes were a 3-byte machine
// identifier and a 2-byte process ID; Parts reports both readings, since
// the bytes alone cannot say which generator made them.
//
// A Generator never repeats an ID: unlike drivers whose 24-bit counter wraps
// silently, it issues at most 2^24 IDs per second and waits for the next
// second beyond that (see internal/oid).
package objectid

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/internal/entropy"
	"github.com/idmint/idmint/internal/idtext"
	"github.com/idmint/idmint/internal/oid"
)

// ID is a 12-byte ObjectID.
type ID [12]byte

var (
	// ErrLength is returned by Parse and FromBytes for input of the wrong
	// length.
	ErrLength = errors.New("objectid: wrong length")
	// ErrSyntax is returned by Parse when a character is not a hex digit.
	ErrSyntax = errors.New("objectid: invalid character")
	// ErrSettings is returned by New for an invalid Settings field.
	ErrSettings = errors.New("objectid: invalid settings")
	// ErrExhausted is returned by Next when 2^24 IDs were issued in the
	// current second and the next second is more than MaxWait away.
	ErrExhausted = errors.New("objectid: second exhausted")
	// ErrTime is returned by Next when the clock is outside 1970..2106.
	ErrTime = errors.New("objectid: clock out of range")
)

// String returns the 24-character lowercase hex form.
func (id ID) String() string {
	var b [24]byte
	hex.Encode(b[:], id[:])
	return string(b[:])
}

// MarshalText returns the hex form.
func (id ID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText parses the hex form.
func (id *ID) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// Time returns the second the ID was stamped with, in UTC.
func (id ID) Time() time.Time {
	return time.Unix(int64(binary.BigEndian.Uint32(id[0:4])), 0).UTC()
}

// Random returns the 5-byte per-process random value (current layout).
func (id ID) Random() [5]byte { return [5]byte(id[4:9]) }

// Machine and PID return the middle bytes read in the legacy layout:
// 3-byte machine identifier and 2-byte big-endian process ID.
func (id ID) Machine() [3]byte { return [3]byte(id[4:7]) }

// PID returns bytes 7–8 as the legacy big-endian process ID.
func (id ID) PID() uint16 { return binary.BigEndian.Uint16(id[7:9]) }

// Counter returns the 24-bit counter.
func (id ID) Counter() uint32 {
	return uint32(id[9])<<16 | uint32(id[10])<<8 | uint32(id[11])
}

// FromBytes returns the ID held in a 12-byte slice.
func FromBytes(b []byte) (ID, error) {
	if len(b) != 12 {
		return ID{}, fmt.Errorf("%w: %d bytes, want 12", ErrLength, len(b))
	}
	return ID(b), nil
}

// Parse decodes the 24-character hex form, in either case. Errors wrap
// ErrLength or ErrSyntax and name the length or the character and position.
func Parse(s string) (ID, error) {
	var id ID
	if len(s) != 24 {
		return id, fmt.Errorf("%w: %s has %d characters, want 24 hex digits", ErrLength, idtext.Quote(s), len(s))
	}
	if err := idtext.DecodeHex(id[:], s, ErrSyntax); err != nil {
		return ID{}, err
	}
	return id, nil
}

// Settings configures a Generator. The zero value is valid.
type Settings struct {
	// Clock stamps IDs. Nil means the real clock read through a 1 ms cache
	// (stamps never run ahead of the real time).
	Clock clock.Clock
	// Rand supplies the 5-byte process value and the counter's start. Nil
	// means crypto-seeded ChaCha8.
	Rand io.Reader
	// MaxWait bounds the wait for the next second once 2^24 IDs were issued
	// in one; zero means 2 s, negative is invalid.
	MaxWait time.Duration
}

// Generator issues ObjectIDs in the current layout. Safe for concurrent use.
type Generator struct{ g *oid.Gen }

// New returns a Generator with a fresh random 5-byte value and counter
// start.
func New(s Settings) (*Generator, error) {
	if s.MaxWait < 0 {
		return nil, fmt.Errorf("%w: MaxWait = %v, want >= 0", ErrSettings, s.MaxWait)
	}
	if s.MaxWait == 0 {
		s.MaxWait = 2 * time.Second
	}
	if s.Clock == nil {
		s.Clock = clock.Shared()
	}
	src := entropy.New(s.Rand)
	r, err := src.Uint64()
	if err != nil {
		return nil, fmt.Errorf("objectid: %w", err)
	}
	var proc [5]byte
	binary.BigEndian.PutUint32(proc[0:4], uint32(r>>32))
	proc[4] = byte(r >> 24)
	return &Generator{g: oid.New(s.Clock, s.MaxWait, oid.Errors{Time: ErrTime, Exhausted: ErrExhausted}, proc, uint32(r))}, nil
}

// Next returns an ObjectID this Generator never issued before. It fails with
// ErrTime, ErrExhausted, or ctx's error if ctx ends while it waits for the
// next second.
func (g *Generator) Next(ctx context.Context) (ID, error) {
	b, err := g.g.Next(ctx)
	return ID(b), err
}

// Ahead reports how far the last ID's second is ahead of the clock: zero
// unless the wall clock stepped back.
func (g *Generator) Ahead() time.Duration { return g.g.Ahead() }
