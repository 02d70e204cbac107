package uuid

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/idmint/idmint/clock"
)

// Settings configures a generator. The zero value is valid and means: the
// real clock, a ChaCha8 CSPRNG seeded from crypto/rand, MaxWait of one
// second, MaxAhead of one millisecond, a random multicast node.
type Settings struct {
	// Clock stamps V1, V6 and V7 IDs and serves waits. Nil means
	// clock.NewReal().
	Clock clock.Clock
	// Rand supplies random bits. Nil means a ChaCha8 generator seeded from
	// crypto/rand. Tests pass a deterministic reader; an error from it is
	// returned by Next.
	Rand io.Reader
	// MaxWait bounds how long Next waits for the clock when every value of
	// the current time unit is used (V1, V6 under sustained overload; V7
	// only after 2^41 IDs in one millisecond). A wait that would be longer
	// fails with ErrExhausted instead. Zero means one second; negative is
	// invalid.
	MaxWait time.Duration
	// MaxAhead is how far a V1 or V6 timestamp may run ahead of the clock
	// when IDs are issued faster than one per 100 ns. Zero means one
	// millisecond; negative is invalid.
	MaxAhead time.Duration
	// Node is the 48-bit node of V1 and V6 IDs: a leased worker ID or, if
	// you accept that it identifies the machine, a MAC address. Nil means
	// 47 random bits with the multicast bit set (RFC 9562 §6.10), chosen
	// once per generator. It must be nil or 6 bytes.
	Node []byte
}

var (
	// ErrSettings is wrapped by constructors when a Settings field is
	// invalid; the message names the field and its value.
	ErrSettings = errors.New("uuid: invalid settings")
	// ErrExhausted is returned by Next when every value of the current time
	// unit has been issued and the clock needs longer than MaxWait to reach
	// the next one (for example after the wall clock stepped back).
	ErrExhausted = errors.New("uuid: time unit exhausted")
	// ErrTime is returned by Next when the clock reads a time the version
	// cannot encode (before 1970 for V7, before 1582-10-15 for V1 and V6).
	ErrTime = errors.New("uuid: clock out of range")
)

func (s Settings) withDefaults() (Settings, error) {
	if s.MaxWait < 0 {
		return s, fmt.Errorf("%w: MaxWait = %v, want >= 0", ErrSettings, s.MaxWait)
	}
	if s.MaxAhead < 0 {
		return s, fmt.Errorf("%w: MaxAhead = %v, want >= 0", ErrSettings, s.MaxAhead)
	}
	if s.Node != nil && len(s.Node) != 6 {
		return s, fmt.Errorf("%w: Node has %d bytes, want 6", ErrSettings, len(s.Node))
	}
	if s.Clock == nil {
		s.Clock = clock.NewReal()
	}
	if s.MaxWait == 0 {
		s.MaxWait = time.Second
	}
	if s.MaxAhead == 0 {
		s.MaxAhead = time.Millisecond
	}
	return s, nil
}
