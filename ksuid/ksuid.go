// Package ksuid issues KSUIDs and parses them with clear errors.
//
// A KSUID (github.com/segmentio/ksuid) is 20 bytes: a 32-bit big-endian
// count of seconds since 2014-05-13T16:53:20Z (Unix 1400000000) and a
// 128-bit random payload, written as 27 base62 characters (0-9, A-Z, a-z)
// that sort like the bytes. IDs are segmentio/ksuid's KSUID type, so its
// String, Time, Payload and database methods apply.
//
// Uniqueness is probabilistic: two KSUIDs of the same second collide with
// probability 2^-128, so among n IDs issued in one second the chance of any
// collision is about n²/2^129 (for a billion IDs in one second, ~1.5·10^-21).
// Order within a second is random.
package ksuid

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	sk "github.com/segmentio/ksuid"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/internal/entropy"
	"github.com/idmint/idmint/internal/idtext"
)

// KSUID is segmentio/ksuid's type.
type KSUID = sk.KSUID

// Epoch is the KSUID epoch: Unix second 1400000000.
var Epoch = time.Unix(1400000000, 0).UTC()

const maxValue = "aWgEPTl1tmebfsQzFP4bxwgy80V" // 2^160 - 1 in base62

var (
	// ErrLength is returned by Parse for input that is not 27 characters.
	ErrLength = errors.New("ksuid: wrong length")
	// ErrSyntax is returned by Parse for a character outside 0-9, A-Z, a-z.
	ErrSyntax = errors.New("ksuid: invalid character")
	// ErrRange is returned by Parse when the value exceeds 160 bits, that is
	// sorts after aWgEPTl1tmebfsQzFP4bxwgy80V.
	ErrRange = errors.New("ksuid: value out of range")
	// ErrTime is returned by Next when the clock is outside 2014-05-13..2150.
	ErrTime = errors.New("ksuid: clock out of range")
)

// Parse decodes the 27-character form. Errors wrap ErrLength, ErrSyntax or
// ErrRange and name the character and position at fault.
func Parse(s string) (KSUID, error) {
	if len(s) != 27 {
		return sk.Nil, fmt.Errorf("%w: %s has %d characters, want 27", ErrLength, idtext.Quote(s), len(s))
	}
	for i := range len(s) {
		c := s[i]
		if !('0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z') {
			return sk.Nil, fmt.Errorf("%w: %s: %q at position %d is not base62", ErrSyntax, idtext.Quote(s), c, i)
		}
	}
	if s > maxValue {
		return sk.Nil, fmt.Errorf("%w: %s exceeds the largest KSUID %s", ErrRange, idtext.Quote(s), maxValue)
	}
	id, err := sk.Parse(s)
	if err != nil {
		return sk.Nil, fmt.Errorf("%w: %s: %v", ErrSyntax, idtext.Quote(s), err)
	}
	return id, nil
}

// Settings configures a Generator. The zero value is valid.
type Settings struct {
	// Clock stamps IDs. Nil means clock.Shared(), the real clock read through a 1 ms cache.
	Clock clock.Clock
	// Rand supplies payloads. Nil means crypto-seeded ChaCha8, one per P.
	Rand io.Reader
}

// Generator issues KSUIDs. Safe for concurrent use.
type Generator struct {
	clk  clock.Clock
	mu   sync.Mutex
	src  *entropy.Source // Settings.Rand under mu, or nil
	pool sync.Pool       // of *entropy.Source when src is nil
}

// New returns a Generator.
func New(s Settings) (*Generator, error) {
	g := &Generator{clk: s.Clock}
	if g.clk == nil {
		g.clk = clock.Shared()
	}
	if s.Rand != nil {
		g.src = entropy.New(s.Rand)
	} else {
		g.pool.New = func() any { return entropy.New(nil) }
	}
	return g, nil
}

// Next returns a KSUID stamped with the current second and a fresh random
// payload. It fails with ErrTime if the clock is outside the 32-bit range
// after the epoch, or with the error of Settings.Rand.
func (g *Generator) Next(ctx context.Context) (KSUID, error) {
	now := g.clk.Now()
	ts := now.Unix() - 1400000000
	if ts < 0 || ts > 1<<32-1 {
		return sk.Nil, fmt.Errorf("%w: %v is outside the 32-bit seconds range from %v", ErrTime, now, Epoch)
	}
	var id KSUID
	binary.BigEndian.PutUint32(id[0:4], uint32(ts))
	if g.src == nil {
		src := g.pool.Get().(*entropy.Source)
		_ = src.Fill(id[4:]) // a default Source never fails
		g.pool.Put(src)
		return id, nil
	}
	g.mu.Lock()
	err := g.src.Fill(id[4:])
	g.mu.Unlock()
	if err != nil {
		return sk.Nil, err
	}
	return id, nil
}
