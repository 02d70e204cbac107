package snowflake

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"time"
)

// Seq is the name of the sequence field in a Layout's field list.
const Seq = "seq"

// Errors reported about layouts and IDs. Each is wrapped by a *FieldError (or
// returned as is) so callers can test with errors.Is.
var (
	// ErrInvalidLayout is wrapped by every error NewLayout and ParseLayout
	// return for a malformed layout.
	ErrInvalidLayout = errors.New("snowflake: invalid layout")
	// ErrEpochInFuture is returned (wrapped) by Layout.Check and New when the
	// layout's epoch is after the clock's current time.
	ErrEpochInFuture = errors.New("snowflake: epoch is in the future")
	// ErrLayoutExpired is returned (wrapped) by Layout.Check, New and the
	// Generator once the clock is past the layout's End: its time field
	// cannot represent the current time any more.
	ErrLayoutExpired = errors.New("snowflake: layout has run out of time")
	// ErrInvalidID is returned (wrapped) by Decode for a negative ID or one
	// with bits set above the layout's width.
	ErrInvalidID = errors.New("snowflake: invalid id")
	// ErrInvalidNode is wrapped by errors about node values: an unknown
	// field name, a missing value, or a value too wide for its field.
	ErrInvalidNode = errors.New("snowflake: invalid node value")
)

// FieldError reports a bad value for one named field of a layout, a node, a
// spec or Settings. It unwraps to one of the package's sentinel errors.
type FieldError struct {
	Field  string // the field, e.g. "time bits", "worker", "epoch", "BorrowLimit"
	Value  string // the offending value as given
	Reason string // what is wrong with it
	Err    error  // sentinel: ErrInvalidLayout, ErrInvalidNode, ...
}

// Error returns "snowflake: <field> <value>: <reason>".
func (e *FieldError) Error() string {
	return "snowflake: " + e.Field + " " + strconv.Quote(e.Value) + ": " + e.Reason
}

// Unwrap returns the sentinel error the FieldError belongs to.
func (e *FieldError) Unwrap() error { return e.Err }

func layoutErr(field, value, format string, args ...any) error {
	return &FieldError{Field: field, Value: value, Reason: fmt.Sprintf(format, args...), Err: ErrInvalidLayout}
}

// Field is one named bit field below the time field: a node field
// (datacenter, worker, shard, ...) or the sequence (named Seq).
type Field struct {
	Name string
	Bits int
}

// LayoutSpec is the input to NewLayout. Every field is validated.
type LayoutSpec struct {
	// Name identifies the layout in listings; empty means "custom".
	Name string
	// Note is free text shown with the layout (its origin, caveats).
	Note string
	// TimeBits is the width of the time field, the most significant one.
	TimeBits int
	// Unit is the length of one tick of the time field (1 ms, 10 ms, 1 s).
	Unit time.Duration
	// Epoch is the instant time field value 0 stands for.
	Epoch time.Time
	// Fields lists the fields below time, most significant first. Exactly
	// one must be named Seq; the others are node fields.
	Fields []Field
	// SeqStart is the sequence-start policy: 0 starts each tick's sequence
	// at 0; k >= 2 starts it at a random value in [0, k), so IDs taken modulo
	// a small number stay balanced (Leaf uses 100, CustomUUID 10). k may be
	// at most 2^seq bits.
	SeqStart int64
}

// Layout is a validated bit layout. The zero value is not a valid layout;
// build one with NewLayout, ParseLayout or Lookup. A Layout is an immutable
// value, safe to copy and to share between goroutines.
type Layout struct {
	name     string
	note     string
	timeBits int
	unit     time.Duration
	epoch    time.Time
	fields   []Field // below time, most significant first; never mutated
	shifts   []uint  // shift of each field
	seqStart int64

	seqBits   uint
	seqShift  uint
	timeShift uint
	total     uint
	maxTick   int64
}

// maxFieldName bounds field names so specs and errors stay readable.
const maxFieldName = 32

var reservedNames = map[string]bool{"time": true, "epoch": true, "name": true, "sequence": true, "start": true}

// lastInstant is the latest End a layout may have; beyond it time.Time and
// RFC 3339 stop being convenient, and no real layout needs it.
var lastInstant = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)

// NewLayout validates s and returns the Layout it describes. Every error is a
// *FieldError naming the field and its value, wrapping ErrInvalidLayout.
// NewLayout does not read the clock: whether the epoch is in the future or
// the layout already ran out is checked by Layout.Check and New.
func NewLayout(s LayoutSpec) (Layout, error) {
	l := Layout{name: s.Name, note: s.Note, timeBits: s.TimeBits, unit: s.Unit, seqStart: s.SeqStart}
	if l.name == "" {
		l.name = "custom"
	}
	if !validName(l.name) {
		return Layout{}, layoutErr("name", l.name, "must be 1-%d characters of a-z, 0-9, '-' or '_', starting with a letter", maxFieldName)
	}
	if s.TimeBits < 1 || s.TimeBits > 62 {
		return Layout{}, layoutErr("time bits", strconv.Itoa(s.TimeBits), "must be between 1 and 62")
	}
	if s.Unit <= 0 {
		return Layout{}, layoutErr("time unit", s.Unit.String(), "must be positive")
	}
	if s.Epoch.IsZero() {
		return Layout{}, layoutErr("epoch", "", "must be set")
	}
	l.epoch = s.Epoch.UTC()
	if l.epoch.Year() < 1970 {
		return Layout{}, layoutErr("epoch", l.epoch.Format(time.RFC3339Nano), "must not be before 1970")
	}
	l.maxTick = 1<<uint(s.TimeBits) - 1
	if end, ok := l.tickTimeOK(l.maxTick); !ok || end.After(lastInstant) {
		return Layout{}, layoutErr("time bits", strconv.Itoa(s.TimeBits), "%d bits of %v from %s end after year 9999", s.TimeBits, s.Unit, l.epoch.Format(time.RFC3339))
	}
	if len(s.Fields) == 0 {
		return Layout{}, layoutErr("fields", "", "must include the %q field", Seq)
	}
	total := s.TimeBits
	seen := make(map[string]bool, len(s.Fields))
	seqIdx := -1
	for i, f := range s.Fields {
		if !validName(f.Name) || reservedNames[f.Name] {
			return Layout{}, layoutErr("field name", f.Name, "must be 1-%d characters of a-z, 0-9, '-' or '_', starting with a letter, and not one of time, epoch, name, sequence, start", maxFieldName)
		}
		if seen[f.Name] {
			return Layout{}, layoutErr("field name", f.Name, "appears twice: fields would overlap")
		}
		seen[f.Name] = true
		if f.Bits < 1 || f.Bits > 62 {
			return Layout{}, layoutErr(f.Name+" bits", strconv.Itoa(f.Bits), "must be between 1 and 62")
		}
		total += f.Bits
		if total > 63 {
			return Layout{}, layoutErr(f.Name+" bits", strconv.Itoa(f.Bits), "makes the layout %d bits wide: time and fields must fit in 63 bits so IDs stay positive int64", total)
		}
		if f.Name == Seq {
			seqIdx = i
		}
	}
	if seqIdx < 0 {
		return Layout{}, layoutErr("fields", fieldList(s.Fields), "must include the %q field", Seq)
	}
	l.fields = append([]Field(nil), s.Fields...)
	l.total = uint(total)
	l.shifts = make([]uint, len(l.fields))
	shift := uint(0)
	for i := len(l.fields) - 1; i >= 0; i-- {
		l.shifts[i] = shift
		shift += uint(l.fields[i].Bits)
	}
	l.timeShift = shift
	l.seqBits = uint(l.fields[seqIdx].Bits)
	l.seqShift = l.shifts[seqIdx]
	switch {
	case s.SeqStart == 0 || s.SeqStart == 1:
		l.seqStart = 0
	case s.SeqStart < 0 || s.SeqStart > 1<<l.seqBits:
		return Layout{}, layoutErr("seq start", strconv.FormatInt(s.SeqStart, 10), "random start bound must be between 2 and 2^%d = %d (or 0 to start at 0)", l.seqBits, int64(1)<<l.seqBits)
	}
	return l, nil
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > maxFieldName || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func fieldList(fs []Field) string {
	s := ""
	for i, f := range fs {
		if i > 0 {
			s += ","
		}
		s += f.Name + "=" + strconv.Itoa(f.Bits)
	}
	return s
}

// IsZero reports whether l is the zero Layout (not built by NewLayout).
func (l Layout) IsZero() bool { return l.unit == 0 }

// Name returns the layout's name ("twitter", "custom", ...).
func (l Layout) Name() string { return l.name }

// Note returns the layout's free-text note: origin, sources, caveats.
func (l Layout) Note() string { return l.note }

// TimeBits returns the width of the time field.
func (l Layout) TimeBits() int { return l.timeBits }

// Unit returns the length of one tick of the time field.
func (l Layout) Unit() time.Duration { return l.unit }

// Epoch returns the instant time field value 0 stands for, in UTC.
func (l Layout) Epoch() time.Time { return l.epoch }

// Bits returns the total width of the layout (at most 63).
func (l Layout) Bits() int { return int(l.total) }

// JSSafe reports whether every ID of l is at most MaxSafeInteger (2^53 - 1),
// so JavaScript numbers and JSON.parse in a browser keep it exact: true when
// the layout is at most 53 bits wide.
func (l Layout) JSSafe() bool { return !l.IsZero() && l.total <= 53 }

// SeqBits returns the width of the sequence field.
func (l Layout) SeqBits() int { return int(l.seqBits) }

// SeqStart returns the sequence-start policy: 0, or k when each tick starts
// at a random value in [0, k).
func (l Layout) SeqStart() int64 { return l.seqStart }

// Fields returns a copy of the fields below time, most significant first,
// the sequence included.
func (l Layout) Fields() []Field { return append([]Field(nil), l.fields...) }

// NodeFields returns a copy of the node fields (every field but the
// sequence), most significant first.
func (l Layout) NodeFields() []Field {
	var out []Field
	for _, f := range l.fields {
		if f.Name != Seq {
			out = append(out, f)
		}
	}
	return out
}

// End returns the first instant the layout cannot encode: Epoch plus
// 2^TimeBits ticks.
func (l Layout) End() time.Time {
	t, _ := l.tickTimeOK(l.maxTick + 1)
	return t
}

// CapacityPerSecond returns the most IDs one node can issue per second of
// wall time: 2^SeqBits per tick. A random sequence start lowers the average
// by about SeqStart/2 per tick.
func (l Layout) CapacityPerSecond() float64 {
	return float64(int64(1)<<l.seqBits) / l.unit.Seconds()
}

// Remaining returns how long after now the layout can still encode times,
// saturating at the largest time.Duration; 0 once now is at or past End.
func (l Layout) Remaining(now time.Time) time.Duration {
	end := l.End()
	if !now.Before(end) {
		return 0
	}
	if end.Sub(now) < 0 { // Sub saturated
		return math.MaxInt64
	}
	return end.Sub(now)
}

// Check reports whether l can stamp IDs at now: it returns an error wrapping
// ErrEpochInFuture when now is before the epoch, and one wrapping
// ErrLayoutExpired when now is at or after End.
func (l Layout) Check(now time.Time) error {
	if l.IsZero() {
		return layoutErr("layout", "", "zero Layout: build one with NewLayout, ParseLayout or Lookup")
	}
	if now.Before(l.epoch) {
		return &FieldError{Field: "epoch", Value: l.epoch.Format(time.RFC3339Nano),
			Reason: fmt.Sprintf("layout %s: epoch is after the current time %s", l.name, now.UTC().Format(time.RFC3339Nano)), Err: ErrEpochInFuture}
	}
	if end := l.End(); !now.Before(end) {
		return &FieldError{Field: "epoch", Value: l.epoch.Format(time.RFC3339Nano),
			Reason: fmt.Sprintf("layout %s ran out on %s (%d bits of %v); re-base it with a later epoch", l.name, end.Format(time.RFC3339), l.timeBits, l.unit), Err: ErrLayoutExpired}
	}
	return nil
}

// WithEpoch returns a copy of l re-based on epoch, validated like NewLayout.
// Use it for a layout that ran out, such as uid-generator's default.
func (l Layout) WithEpoch(epoch time.Time) (Layout, error) {
	s := l.spec()
	s.Epoch = epoch
	return NewLayout(s)
}

func (l Layout) spec() LayoutSpec {
	return LayoutSpec{Name: l.name, Note: l.note, TimeBits: l.timeBits, Unit: l.unit, Epoch: l.epoch, Fields: l.Fields(), SeqStart: l.seqStart}
}

// tickTime returns the instant tick t starts at.
func (l Layout) tickTime(t int64) time.Time {
	tt, _ := l.tickTimeOK(t)
	return tt
}

// tickTimeOK computes epoch + t*unit exactly, for any t in [-2^62, 2^62].
// ok is false when the product does not fit the arithmetic.
func (l Layout) tickTimeOK(t int64) (time.Time, bool) {
	neg := t < 0
	u := uint64(t)
	if neg {
		u = uint64(-t)
	}
	hi, lo := bits.Mul64(u, uint64(l.unit))
	if hi >= 1e9 {
		return time.Time{}, false
	}
	sec, ns := bits.Div64(hi, lo, 1e9)
	if sec > math.MaxInt64/2 {
		return time.Time{}, false
	}
	s, n := int64(sec), int64(ns)
	if neg {
		s, n = -s, -n
	}
	return time.Unix(l.epoch.Unix()+s, int64(l.epoch.Nanosecond())+n).UTC(), true
}

// tickOf returns the tick now falls in, floored, clamped to
// [-2^61, maxTick+1] so callers can add small offsets without overflow.
func (l Layout) tickOf(now time.Time) int64 {
	ds := now.Unix() - l.epoch.Unix()
	dn := int64(now.Nanosecond() - l.epoch.Nanosecond())
	if dn < 0 {
		dn += 1e9
		ds--
	}
	if ds < 0 {
		if ds < -9e9 { // more than ~285 years before the epoch
			return -1 << 61
		}
		total := ds*1e9 + dn
		q := total / int64(l.unit)
		if q*int64(l.unit) != total {
			q--
		}
		return max(q, -1<<61)
	}
	if ds < 9e9 { // within ~285 years of the epoch: plain int64 arithmetic
		return min((ds*1e9+dn)/int64(l.unit), l.maxTick+1)
	}
	hi, lo := bits.Mul64(uint64(ds), 1e9)
	lo, c := bits.Add64(lo, uint64(dn), 0)
	hi += c
	if hi >= uint64(l.unit) {
		return l.maxTick + 1
	}
	q, _ := bits.Div64(hi, lo, uint64(l.unit))
	if q > uint64(l.maxTick) {
		return l.maxTick + 1
	}
	return int64(q)
}

// Parts is a decoded ID.
type Parts struct {
	// Time is the start of the tick the ID is stamped with, in UTC.
	Time time.Time
	// Node holds the value of each node field, by name.
	Node map[string]int64
	// Sequence is the value of the sequence field.
	Sequence int64
}

// Decode splits id into its parts according to l. It returns an error
// wrapping ErrInvalidID for a negative id or one wider than the layout.
// Decode reads no clock and is safe for concurrent use.
func Decode(l Layout, id int64) (Parts, error) {
	if l.IsZero() {
		return Parts{}, layoutErr("layout", "", "zero Layout: build one with NewLayout, ParseLayout or Lookup")
	}
	if id < 0 {
		return Parts{}, fmt.Errorf("%w: %d is negative", ErrInvalidID, id)
	}
	if l.total < 63 && id>>l.total != 0 {
		return Parts{}, fmt.Errorf("%w: %d is wider than layout %s's %d bits", ErrInvalidID, id, l.name, l.total)
	}
	p := Parts{Time: l.tickTime(id >> l.timeShift)}
	if len(l.fields) > 1 {
		p.Node = make(map[string]int64, len(l.fields)-1)
	}
	for i, f := range l.fields {
		v := id >> l.shifts[i] & (1<<uint(f.Bits) - 1)
		if f.Name == Seq {
			p.Sequence = v
		} else {
			p.Node[f.Name] = v
		}
	}
	return p, nil
}

// Compose builds the ID with parts p in layout l: the time field is the tick
// p.Time falls in, node fields absent from p.Node are 0. It returns an error
// (a *FieldError naming the field) when p.Time is outside [Epoch, End), a
// node name is unknown, or a value does not fit its field.
func Compose(l Layout, p Parts) (int64, error) {
	if l.IsZero() {
		return 0, layoutErr("layout", "", "zero Layout: build one with NewLayout, ParseLayout or Lookup")
	}
	if p.Time.Before(l.epoch) || !p.Time.Before(l.End()) {
		return 0, &FieldError{Field: "time", Value: p.Time.UTC().Format(time.RFC3339Nano),
			Reason: fmt.Sprintf("outside layout %s's range [%s, %s)", l.name, l.epoch.Format(time.RFC3339Nano), l.End().Format(time.RFC3339Nano)), Err: ErrInvalidID}
	}
	node, err := l.nodeBits(p.Node, false)
	if err != nil {
		return 0, err
	}
	if p.Sequence < 0 || p.Sequence >= 1<<l.seqBits {
		return 0, &FieldError{Field: Seq, Value: strconv.FormatInt(p.Sequence, 10),
			Reason: fmt.Sprintf("does not fit %d bits (0..%d)", l.seqBits, int64(1)<<l.seqBits-1), Err: ErrInvalidID}
	}
	return l.tickOf(p.Time)<<l.timeShift | node | p.Sequence<<l.seqShift, nil
}

// LeastID is the smallest ID of layout l stamped at or after t: the tick t
// falls in, every other field 0. Before the epoch it is 0; at or past the
// layout's end, the largest ID the layout holds plus one would not fit, so
// it is math.MaxInt64.
func LeastID(l Layout, t time.Time) int64 {
	if t.Before(l.epoch) {
		return 0
	}
	if !t.Before(l.End()) {
		return math.MaxInt64
	}
	return l.tickOf(t) << l.timeShift
}

// nodeBits validates node values against l's node fields and returns them
// placed in position. With requireAll, every node field must be present.
func (l Layout) nodeBits(node map[string]int64, requireAll bool) (int64, error) {
	var out int64
	known := 0
	for i, f := range l.fields {
		if f.Name == Seq {
			continue
		}
		v, ok := node[f.Name]
		if !ok {
			if requireAll {
				return 0, &FieldError{Field: f.Name, Value: "", Reason: fmt.Sprintf("node field of layout %s is not set (0..%d)", l.name, int64(1)<<uint(f.Bits)-1), Err: ErrInvalidNode}
			}
			continue
		}
		known++
		if v < 0 || v >= 1<<uint(f.Bits) {
			return 0, &FieldError{Field: f.Name, Value: strconv.FormatInt(v, 10), Reason: fmt.Sprintf("does not fit %d bits (0..%d)", f.Bits, int64(1)<<uint(f.Bits)-1), Err: ErrInvalidNode}
		}
		out |= v << l.shifts[i]
	}
	if known != len(node) {
		for name := range node {
			if !l.hasNode(name) {
				return 0, &FieldError{Field: "node", Value: name, Reason: fmt.Sprintf("layout %s has no such node field (has %s)", l.name, fieldList(l.NodeFields())), Err: ErrInvalidNode}
			}
		}
	}
	return out, nil
}

func (l Layout) hasNode(name string) bool {
	for _, f := range l.fields {
		if f.Name == name && name != Seq {
			return true
		}
	}
	return false
}
