package snowflake

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The friendly form of a snowflake ID spells its parts out, in the spirit
// of CosId's SnowflakeFriendlyId (yyyyMMddHHmmssSSS-machine-sequence), but
// defined so that it parses back to exactly one ID:
//
//	TIME-NODE...-SEQ        e.g. 20261201095959123-1-3-17 (twitter: datacenter 1, worker 3, seq 17)
//
//   - TIME is the start of the ID's tick in UTC (never a local zone, whose
//     daylight-saving hour repeats), as YYYYMMDDhhmmss followed by 3
//     fractional digits (milliseconds), or 6 or 9 when the layout's epoch
//     or unit is finer than a millisecond. The digit count is fixed per
//     layout, so the length of TIME never varies.
//   - NODE is each node field of the layout, most significant first, and
//     SEQ the sequence, in decimal without sign or leading zeros.
//   - The form is relative to a layout, like the decimal form: the same
//     text is a different ID in twitter and in discord.
//
// ParseFriendly accepts only the text FormatFriendly produces: a time that
// is not the start of a tick, a wrong number of parts, leading zeros or a
// value too wide for its field are errors, so the mapping is one to one.

// friendlyDigits returns how many fractional-second digits TIME carries:
// enough to show every tick start of l exactly.
func (l Layout) friendlyDigits() int {
	switch {
	case l.epoch.Nanosecond()%1e6 == 0 && l.unit%time.Millisecond == 0:
		return 3
	case l.epoch.Nanosecond()%1e3 == 0 && l.unit%time.Microsecond == 0:
		return 6
	}
	return 9
}

// FriendlyPattern describes l's friendly form, such as
// "YYYYMMDDhhmmssSSS-datacenter-worker-seq", for help texts and errors.
func FriendlyPattern(l Layout) string {
	var b strings.Builder
	b.WriteString("YYYYMMDDhhmmss")
	b.WriteString(strings.Repeat("S", l.friendlyDigits()))
	for _, f := range l.NodeFields() {
		b.WriteString("-" + f.Name)
	}
	b.WriteString("-" + Seq)
	return b.String()
}

// FormatFriendly returns the friendly form of id in layout l (see
// ParseFriendly for the grammar). It fails like Decode for an ID that does
// not fit the layout.
func FormatFriendly(l Layout, id int64) (string, error) {
	p, err := Decode(l, id)
	if err != nil {
		return "", err
	}
	d := l.friendlyDigits()
	t := p.Time.UTC()
	b := make([]byte, 0, 40)
	b = t.AppendFormat(b, "20060102150405")
	frac := int64(t.Nanosecond())
	for i := d; i < 9; i++ {
		frac /= 10
	}
	b = append(b, fmt.Sprintf("%0*d", d, frac)...)
	for _, f := range l.NodeFields() {
		b = append(b, '-')
		b = strconv.AppendInt(b, p.Node[f.Name], 10)
	}
	b = append(b, '-')
	b = strconv.AppendInt(b, p.Sequence, 10)
	return string(b), nil
}

// ParseFriendly parses the friendly form FormatFriendly returns and gives
// back the ID. Every error is a *FieldError naming the part and its value,
// wrapping ErrInvalidID.
func ParseFriendly(l Layout, s string) (int64, error) {
	if l.IsZero() {
		return 0, layoutErr("layout", "", "zero Layout: build one with NewLayout, ParseLayout or Lookup")
	}
	if len(s) > 128 {
		return 0, friendlyErr("friendly id", s[:32]+"...", "is longer than 128 bytes")
	}
	nodes := l.NodeFields()
	parts := strings.Split(s, "-")
	if len(parts) != len(nodes)+2 {
		return 0, friendlyErr("friendly id", s, "has %d dash-separated parts; layout %s's friendly form has %d: %s", len(parts), l.name, len(nodes)+2, FriendlyPattern(l))
	}
	d := l.friendlyDigits()
	ts := parts[0]
	if len(ts) != 14+d || !allDigits(ts) {
		return 0, friendlyErr("time", ts, "must be %d digits, YYYYMMDDhhmmss and %d fractional digits, UTC (layout %s)", 14+d, d, l.name)
	}
	t, err := time.Parse("20060102150405", ts[:14])
	if err != nil {
		return 0, friendlyErr("time", ts, "is not a valid date and time: %v", err)
	}
	frac, err := strconv.ParseInt(ts[14:], 10, 64)
	if err != nil {
		return 0, friendlyErr("time", ts, "fraction %q is not %d decimal digits: %v", ts[14:], d, err)
	}
	for i := d; i < 9; i++ {
		frac *= 10
	}
	t = t.Add(time.Duration(frac))
	if t.Before(l.epoch) || !t.Before(l.End()) {
		return 0, friendlyErr("time", ts, "is outside layout %s's range [%s, %s)", l.name, l.epoch.Format(time.RFC3339Nano), l.End().Format(time.RFC3339Nano))
	}
	if tick := l.tickOf(t); !l.tickTime(tick).Equal(t) {
		return 0, friendlyErr("time", ts, "is not the start of a tick of layout %s (ticks of %v from %s)", l.name, l.unit, l.epoch.Format(time.RFC3339Nano))
	}
	p := Parts{Time: t, Node: make(map[string]int64, len(nodes))}
	for i, f := range nodes {
		v, err := friendlyInt(f.Name, parts[1+i])
		if err != nil {
			return 0, err
		}
		p.Node[f.Name] = v
	}
	if p.Sequence, err = friendlyInt(Seq, parts[len(parts)-1]); err != nil {
		return 0, err
	}
	id, err := Compose(l, p)
	if err != nil {
		return 0, err
	}
	return id, nil
}

func friendlyErr(field, value, format string, args ...any) error {
	return &FieldError{Field: field, Value: value, Reason: fmt.Sprintf(format, args...), Err: ErrInvalidID}
}

// friendlyInt parses a canonical non-negative decimal: no sign, no leading
// zeros, so each value has exactly one spelling.
func friendlyInt(field, s string) (int64, error) {
	if s == "" || !allDigits(s) || (len(s) > 1 && s[0] == '0') {
		return 0, friendlyErr(field, s, "must be a decimal number without sign or leading zeros")
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, friendlyErr(field, s, "is out of range")
	}
	return v, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return len(s) > 0
}

// IsFriendly reports whether s has the shape of a friendly form (a run of
// 17, 20 or 23 digits followed by a dash), without checking it against a
// layout. Use it to tell friendly text from a decimal ID or a UUID.
func IsFriendly(s string) bool {
	i := strings.IndexByte(s, '-')
	return (i == 17 || i == 20 || i == 23) && allDigits(s[:i])
}
