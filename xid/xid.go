// Package xid issues and parses xids (github.com/rs/xid): 12 bytes of 4-byte
// Unix seconds, 3-byte machine ID, 2-byte process ID and 3-byte counter,
// written as 20 characters of lowercase base32hex (0-9, a-v).
//
// rs/xid's own New repeats IDs beyond ~16.7 million per second in one
// process, because its 24-bit counter wraps within the second. A Generator
// here issues at most 2^24 IDs per second and waits for the next second
// beyond that (see internal/oid), so it never repeats. IDs are rs/xid's ID
// type, so its String, MarshalText, Compare and database methods apply.
package xid

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	rsxid "github.com/rs/xid"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/internal/entropy"
	"github.com/idmint/idmint/internal/idtext"
	"github.com/idmint/idmint/internal/oid"
)

// ID is an xid; it is rs/xid's type.
type ID = rsxid.ID

// alphabet is base32hex in lowercase (RFC 4648 §7).
const alphabet = "0123456789abcdefghijklmnopqrstuv"

var (
	// ErrLength is returned by Parse for input that is not 20 characters.
	ErrLength = errors.New("xid: wrong length")
	// ErrSyntax is returned by Parse for a character outside 0-9, a-v, or a
	// last character other than '0' or 'g' (the 4 padding bits must be 0).
	ErrSyntax = errors.New("xid: invalid character")
	// ErrSettings is returned by New for an invalid Settings field.
	ErrSettings = errors.New("xid: invalid settings")
	// ErrExhausted is returned by Next when 2^24 IDs were issued in the
	// current second and the next second is more than MaxWait away.
	ErrExhausted = errors.New("xid: second exhausted")
	// ErrTime is returned by Next when the clock is outside 1970..2106.
	ErrTime = errors.New("xid: clock out of range")
)

// Parse decodes the 20-character form. Errors wrap ErrLength or ErrSyntax
// and name the character and position at fault.
func Parse(s string) (ID, error) {
	if len(s) != 20 {
		return ID{}, fmt.Errorf("%w: %s has %d characters, want 20", ErrLength, idtext.Quote(s), len(s))
	}
	for i := range len(s) {
		if strings.IndexByte(alphabet, s[i]) < 0 {
			return ID{}, fmt.Errorf("%w: %s: %q at position %d is not in 0-9a-v", ErrSyntax, idtext.Quote(s), s[i], i)
		}
	}
	if c := s[19]; c != '0' && c != 'g' {
		return ID{}, fmt.Errorf("%w: %s: last character %q must be '0' or 'g' (its low 4 bits are padding)", ErrSyntax, idtext.Quote(s), c)
	}
	id, err := rsxid.FromString(s)
	if err != nil {
		return ID{}, fmt.Errorf("%w: %s: %v", ErrSyntax, idtext.Quote(s), err)
	}
	return id, nil
}

// Settings configures a Generator. The zero value is valid.
type Settings struct {
	// Clock stamps IDs. Nil means the real clock read through a 1 ms cache
	// (stamps never run ahead of the real time).
	Clock clock.Clock
	// Rand supplies the counter's random start. Nil means crypto-seeded
	// ChaCha8.
	Rand io.Reader
	// MaxWait bounds the wait for the next second once 2^24 IDs were issued
	// in one; zero means 2 s, negative is invalid.
	MaxWait time.Duration
	// Machine is the 3-byte machine ID. Nil means rs/xid's: a hash of the
	// platform machine ID or host name.
	Machine []byte
	// PID is the 2-byte process ID. Zero means rs/xid's: the process ID
	// mixed with the container's cpuset.
	PID uint16
}

// Generator issues xids. Safe for concurrent use.
type Generator struct{ g *oid.Gen }

// New returns a Generator for the configured machine and process with a
// random counter start.
func New(s Settings) (*Generator, error) {
	if s.MaxWait < 0 {
		return nil, fmt.Errorf("%w: MaxWait = %v, want >= 0", ErrSettings, s.MaxWait)
	}
	if s.Machine != nil && len(s.Machine) != 3 {
		return nil, fmt.Errorf("%w: Machine has %d bytes, want 3", ErrSettings, len(s.Machine))
	}
	if s.MaxWait == 0 {
		s.MaxWait = 2 * time.Second
	}
	if s.Clock == nil {
		s.Clock = clock.Shared()
	}
	ref := rsxid.NewWithTime(time.Unix(0, 0)) // reads only rs/xid's machine ID and PID
	var proc [5]byte
	if s.Machine != nil {
		copy(proc[0:3], s.Machine)
	} else {
		copy(proc[0:3], ref.Machine())
	}
	pid := s.PID
	if pid == 0 {
		pid = ref.Pid()
	}
	binary.BigEndian.PutUint16(proc[3:5], pid)
	r, err := entropy.New(s.Rand).Uint64()
	if err != nil {
		return nil, fmt.Errorf("xid: %w", err)
	}
	return &Generator{g: oid.New(s.Clock, s.MaxWait, oid.Errors{Time: ErrTime, Exhausted: ErrExhausted}, proc, uint32(r))}, nil
}

// Next returns an xid this Generator never issued before. It fails with
// ErrTime, ErrExhausted, or ctx's error if ctx ends while it waits for the
// next second.
func (g *Generator) Next(ctx context.Context) (ID, error) {
	b, err := g.g.Next(ctx)
	return ID(b), err
}

// Ahead reports how far the last ID's second is ahead of the clock: zero
// unless the wall clock stepped back.
func (g *Generator) Ahead() time.Duration { return g.g.Ahead() }
