// Package idformat recognises an ID string and splits it into its parts:
// the entry point behind `idmint decode` for the UUID family (UUID v1–v8,
// ULID, KSUID, xid, MongoDB ObjectID), 128-bit flakes and the timeid
// formats.
//
// Recognition is by length and alphabet:
//
//	36 chars 8-4-4-4-12 hex, {38}, urn:uuid:(45)  uuid
//	32 hex, RFC 9562 variant and version 1–8      uuid (flake128 if it starts 0000)
//	32 hex, otherwise                             flake128
//	26 Crockford base32                           ulid
//	27 base62                                     ksuid
//	24 hex                                        objectid
//	22 base62                                     flake128
//	20 base32hex (0-9a-v)                         xid
//
// Decimal integers are ambiguous (snowflake layouts, timeid): a Registry
// decodes them only through decoders registered for them (the snowflake
// package registers its layouts from cmd/idmint) or when the format is
// named with ParseAs.
package idformat

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idmint/idmint/internal/idtext"
)

var (
	// ErrUnknown is returned by Parse when no format matches the input.
	ErrUnknown = errors.New("idformat: unrecognised ID")
	// ErrFormat is returned by ParseAs for a format name no decoder has.
	ErrFormat = errors.New("idformat: unknown format")
	// ErrDuplicate is returned by Register for a name already registered.
	ErrDuplicate = errors.New("idformat: format already registered")
)

// Parts is a decoded ID. Fields the format does not have are zero; Fields
// lists the present ones in display order.
type Parts struct {
	Format    string        `json:"format"`              // decoder name, e.g. "uuid", "ulid"
	Canonical string        `json:"canonical"`           // canonical text form
	Bytes     []byte        `json:"bytes,omitempty"`     // binary form, when the format has one
	Version   int           `json:"version,omitempty"`   // UUID version
	Variant   string        `json:"variant,omitempty"`   // UUID variant
	Time      time.Time     `json:"time,omitzero"`       // embedded timestamp, UTC
	Precision time.Duration `json:"precision,omitempty"` // of Time: 100ns, 1ms, 1s
	Node      string        `json:"node,omitempty"`      // hex: UUID node, flake128 worker, xid machine, ObjectID process value
	PID       int           `json:"pid,omitempty"`       // xid process ID
	Sequence  uint64        `json:"sequence,omitempty"`  // clock sequence, counter or sequence
	HasSeq    bool          `json:"-"`                   // Sequence is meaningful (it may be 0)
	Random    string        `json:"random,omitempty"`    // hex of the random bits
	Notes     []string      `json:"notes,omitempty"`     // caveats: legacy readings, leaks, ambiguity
	// Also lists other formats the same string is valid in.
	Also []string `json:"also,omitempty"`
}

// Field is one displayable part.
type Field struct{ Name, Value string }

// Fields returns the parts that are present, in display order.
func (p Parts) Fields() []Field {
	f := []Field{{"format", p.Format}, {"canonical", p.Canonical}}
	if p.Version != 0 {
		f = append(f, Field{"version", strconv.Itoa(p.Version)})
	}
	if p.Variant != "" {
		f = append(f, Field{"variant", p.Variant})
	}
	if !p.Time.IsZero() {
		f = append(f, Field{"time", p.Time.Format(time.RFC3339Nano)})
		f = append(f, Field{"precision", p.Precision.String()})
	}
	if p.Node != "" {
		f = append(f, Field{"node", p.Node})
	}
	if p.PID != 0 {
		f = append(f, Field{"pid", strconv.Itoa(p.PID)})
	}
	if p.HasSeq {
		f = append(f, Field{"sequence", strconv.FormatUint(p.Sequence, 10)})
	}
	if p.Random != "" {
		f = append(f, Field{"random", p.Random})
	}
	for _, n := range p.Notes {
		f = append(f, Field{"note", n})
	}
	if len(p.Also) > 0 {
		f = append(f, Field{"also valid as", strings.Join(p.Also, ", ")})
	}
	return f
}

// Decoder decodes one format.
type Decoder struct {
	// Name is what ParseAs and Parts.Format call the format.
	Name string
	// Match reports, from length and alphabet only, whether s may be this
	// format. Nil means the decoder is used only when named.
	Match func(s string) bool
	// Decode splits s, or returns an error that names the fault.
	Decode func(s string) (Parts, error)
	// Prefer, if set, reports that s is more likely this format than an
	// earlier decoder that also accepts it (for example a 32-hex string
	// starting 0000 is a plausible flake128 and an implausible UUID).
	Prefer func(s string) bool
}

// Registry holds decoders. The zero value is empty; New returns one with
// the built-in formats. Safe for concurrent use.
type Registry struct {
	mu   sync.RWMutex
	decs []Decoder
}

// New returns a Registry holding the built-in decoders.
func New() *Registry {
	r := &Registry{}
	r.decs = append(r.decs, builtins()...)
	return r
}

// defaultRegistry serves the package-level functions; it holds only the
// built-ins and never changes.
var defaultRegistry = New()

// Parse recognises s among the built-in formats and decodes it.
func Parse(s string) (Parts, error) { return defaultRegistry.Parse(s) }

// ParseAs decodes s as the named built-in format.
func ParseAs(format, s string) (Parts, error) { return defaultRegistry.ParseAs(format, s) }

// Formats lists the built-in format names.
func Formats() []string { return defaultRegistry.Formats() }

// Register adds a decoder, tried after those already present. The name
// must be new.
func (r *Registry) Register(d Decoder) error {
	if d.Name == "" || d.Decode == nil {
		return fmt.Errorf("%w: decoder needs a Name and a Decode function", ErrFormat)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.decs {
		if e.Name == d.Name {
			return fmt.Errorf("%w: %q", ErrDuplicate, d.Name)
		}
	}
	r.decs = append(r.decs, d)
	return nil
}

// Formats lists the registered format names, sorted.
func (r *Registry) Formats() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, len(r.decs))
	for i, d := range r.decs {
		names[i] = d.Name
	}
	sort.Strings(names)
	return names
}

// Parse decodes s with the first decoder whose Match accepts it and whose
// Decode succeeds; Parts.Also names the other formats that decode s too.
// Surrounding white space is ignored. If no decoder matches it fails with
// ErrUnknown naming the length; if decoders matched but all failed, with
// the first decoder's error.
func (r *Registry) Parse(s string) (Parts, error) {
	s = strings.TrimSpace(s)
	r.mu.RLock()
	decs := r.decs
	r.mu.RUnlock()
	var first error
	var got []Parts
	best := 0
	for _, d := range decs {
		if d.Match == nil || !d.Match(s) {
			continue
		}
		p, err := d.Decode(s)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		p.Format = d.Name
		if len(got) > 0 && d.Prefer != nil && d.Prefer(s) {
			best = len(got)
		}
		got = append(got, p)
	}
	if len(got) > 0 {
		p := got[best]
		for i, q := range got {
			if i != best {
				p.Also = append(p.Also, q.Format)
			}
		}
		return p, nil
	}
	if first != nil {
		return Parts{}, first
	}
	return Parts{}, fmt.Errorf("%w: %s (%d characters) matches no format by length and alphabet; name one of %s", ErrUnknown, idtext.Quote(s), len(s), strings.Join(r.Formats(), ", "))
}

// ParseAs decodes s as the named format, whatever its shape.
func (r *Registry) ParseAs(format, s string) (Parts, error) {
	s = strings.TrimSpace(s)
	r.mu.RLock()
	decs := r.decs
	r.mu.RUnlock()
	for _, d := range decs {
		if d.Name == format {
			p, err := d.Decode(s)
			if err != nil {
				return Parts{}, err
			}
			p.Format = d.Name
			return p, nil
		}
	}
	return Parts{}, fmt.Errorf("%w: %q; known: %s", ErrFormat, format, strings.Join(r.Formats(), ", "))
}
