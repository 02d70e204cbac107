package analyze

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idmint/idmint/idformat"
	"github.com/idmint/idmint/ordernum"
	"github.com/idmint/idmint/snowflake"
	"github.com/idmint/idmint/timeid"
)

// key is an ID as a big-endian number of up to 192 bits, right-aligned:
// key[2] holds the low 64 bits. Comparing keys word by word compares the
// numbers, and for IDs of one fixed-length binary format their bytes.
type key [3]uint64

func cmpKey(a, b key) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// rec is one parsed ID.
type rec struct {
	k       key
	tick    int64 // time in ticks of the parser's unit since its epoch
	hasTick bool
	wnum    uint64 // worker identity: node bits ...
	wstr    string // ... or node text
	body    uint64 // order numbers: the FF1 body, the part meant to look random
	modv    uint64 // order numbers: the whole number when it fits 64 bits
}

// parser turns one line into a rec.
type parser interface {
	parse(b []byte) (rec, error)
	// workerLabel names the worker of a rec; "" when the format has none.
	workerLabel(r rec) string
	// hasWorker reports whether IDs carry a worker (node) field.
	hasWorker() bool
	// clock returns the tick length and the instant tick 0 stands for;
	// unit 0 when IDs carry no time.
	clock() (unit time.Duration, epoch time.Time)
	// end returns when the format's time field runs out and where the
	// figure comes from; zero when it has no time or never runs out.
	end() (time.Time, string)
}

// choose picks the parser from the first lines and starts the report.
func choose(head []Line, opt Options) (parser, *Report, error) {
	rep := &Report{ExpectRandom: opt.Random}
	switch opt.Format {
	case OrderNum:
		rep.Format = OrderNum
		rep.Layout = opt.OrderFormat.String()
		return newOrderParser(opt.OrderFormat), rep, nil
	case Integer:
		rep.Format = Integer
		return intParser{}, rep, nil
	case Snowflake, "":
		if !opt.Layout.IsZero() {
			rep.Format, rep.Layout, rep.LayoutName = Snowflake, opt.Layout.String(), opt.Layout.Name()
			return newSnowParser(opt.Layout), rep, nil
		}
		if opt.Format == "" && !isDecimal(head[0].Text) {
			return chooseText(head, rep)
		}
		l, note := guessLayout(head, opt.Now)
		rep.Guessed, rep.GuessNote = true, note
		if l.IsZero() {
			if opt.Format == Snowflake {
				return nil, nil, fmt.Errorf("%w: no built-in snowflake layout fits the IDs (%s); give the layout", ErrFormat, note)
			}
			rep.Format = Integer
			return intParser{}, rep, nil
		}
		rep.Format, rep.Layout, rep.LayoutName = Snowflake, l.String(), l.Name()
		return newSnowParser(l), rep, nil
	}
	rep.Format = opt.Format
	return newTextParser(opt.Format), rep, nil
}

// chooseText recognises a text format by the shape of the first lines: the
// format most of them parse as.
func chooseText(head []Line, rep *Report) (parser, *Report, error) {
	votes := map[string]int{}
	var firstErr error
	for _, l := range head {
		p, err := idformat.Parse(l.Text)
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("line %d: %w", l.Line, err)
			}
			continue
		}
		votes[p.Format]++
	}
	best, n := "", 0
	for f, v := range votes {
		if v > n || v == n && f < best {
			best, n = f, v
		}
	}
	if n*2 < len(head) {
		return nil, nil, fmt.Errorf("%w: fewer than half of the first %d lines are one format (%v); first error: %v", ErrFormat, len(head), votes, firstErr)
	}
	rep.Format, rep.Guessed = best, true
	rep.GuessNote = fmt.Sprintf("%d of the first %d lines parse as %s", n, len(head), best)
	return newTextParser(best), rep, nil
}

func isDecimal(s string) bool {
	if s == "" || len(s) > 19 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// guessLayout tries every built-in layout on the first decimal lines: a
// layout fits when every sampled ID is inside its width and decodes to a
// time at least a day after its epoch and at most an hour after now. Of
// those that fit, the one whose newest ID is closest to now wins (Twitter
// and Discord share bits; Discord IDs read as Twitter land years early).
func guessLayout(head []Line, now time.Time) (snowflake.Layout, string) {
	var ids []int64
	for _, l := range head {
		if v, err := strconv.ParseInt(l.Text, 10, 64); err == nil && v >= 0 {
			ids = append(ids, v)
		}
	}
	if len(ids) == 0 {
		return snowflake.Layout{}, "no decimal IDs among the first lines"
	}
	var best snowflake.Layout
	var bestNewest time.Time
	var fits []string
	for _, l := range snowflake.Layouts() {
		newest, ok := fitLayout(l, ids, now)
		if !ok {
			continue
		}
		fits = append(fits, l.Name())
		if best.IsZero() || newest.After(bestNewest) {
			best, bestNewest = l, newest
		}
	}
	if best.IsZero() {
		return best, fmt.Sprintf("no built-in layout decodes the first %d IDs to times between its epoch (+1 day) and now: read as plain integers", len(ids))
	}
	note := fmt.Sprintf("layout %s: the first %d IDs decode to times up to %s", best.Name(), len(ids), bestNewest.Format(time.RFC3339))
	if len(fits) > 1 {
		note += "; also plausible: " + strings.Join(slices.DeleteFunc(fits, func(s string) bool { return s == best.Name() }), ", ") + " (give --layout to choose)"
	}
	return best, note
}

func fitLayout(l snowflake.Layout, ids []int64, now time.Time) (time.Time, bool) {
	var newest time.Time
	lo, hi := l.Epoch().Add(24*time.Hour), now.Add(time.Hour)
	for _, id := range ids {
		p, err := snowflake.Decode(l, id)
		if err != nil || p.Time.Before(lo) || p.Time.After(hi) {
			return time.Time{}, false
		}
		if p.Time.After(newest) {
			newest = p.Time
		}
	}
	return newest, true
}

// snowParser reads decimal IDs of one snowflake layout without allocating:
// the masks come from the layout's fields.
type snowParser struct {
	l         snowflake.Layout
	timeShift uint
	nodeMask  uint64
	hasNode   bool
}

func newSnowParser(l snowflake.Layout) *snowParser {
	p := &snowParser{l: l}
	shift := uint(0)
	fs := l.Fields()
	for i := len(fs) - 1; i >= 0; i-- {
		if fs[i].Name != snowflake.Seq {
			p.nodeMask |= (1<<uint(fs[i].Bits) - 1) << shift
			p.hasNode = true
		}
		shift += uint(fs[i].Bits)
	}
	p.timeShift = shift
	return p
}

// decimal reads b as a non-negative decimal integer below 2^64 without
// allocating.
func decimal(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var v uint64
	for _, ch := range b {
		d := uint64(ch - '0')
		if d > 9 || v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

func (p *snowParser) parse(b []byte) (rec, error) {
	u, ok := decimal(b)
	if !ok || u > math.MaxInt64 {
		return rec{}, fmt.Errorf("%q is not a non-negative 64-bit decimal integer", clip(string(b)))
	}
	v := int64(u)
	if b := p.l.Bits(); b < 63 && v>>uint(b) != 0 {
		return rec{}, fmt.Errorf("%d is wider than layout %s's %d bits", v, p.l.Name(), b)
	}
	return rec{k: key{0, 0, uint64(v)}, tick: v >> p.timeShift, hasTick: true, wnum: uint64(v) & p.nodeMask}, nil
}

func (p *snowParser) workerLabel(r rec) string {
	if !p.hasNode {
		return ""
	}
	// Any ID with these node bits decodes to the node's fields.
	parts, err := snowflake.Decode(p.l, int64(r.wnum))
	if err != nil {
		return strconv.FormatUint(r.wnum, 10)
	}
	var b strings.Builder
	for i, f := range p.l.NodeFields() {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", f.Name, parts.Node[f.Name])
	}
	return b.String()
}

func (p *snowParser) hasWorker() bool { return p.hasNode }

func (p *snowParser) clock() (time.Duration, time.Time) { return p.l.Unit(), p.l.Epoch() }

func (p *snowParser) end() (time.Time, string) {
	return p.l.End(), fmt.Sprintf("layout %s: %d bits of %v from %s", p.l.Name(), p.l.TimeBits(), p.l.Unit(), p.l.Epoch().Format(time.RFC3339Nano))
}

// intParser reads plain non-negative decimal integers.
type intParser struct{}

func (intParser) parse(b []byte) (rec, error) {
	v, ok := decimal(b)
	if !ok {
		return rec{}, fmt.Errorf("%q is not a non-negative 64-bit decimal integer", clip(string(b)))
	}
	return rec{k: key{0, 0, v}}, nil
}
func (intParser) workerLabel(rec) string            { return "" }
func (intParser) hasWorker() bool                   { return false }
func (intParser) clock() (time.Duration, time.Time) { return 0, time.Time{} }
func (intParser) end() (time.Time, string)          { return time.Time{}, "" }

// textParser reads one idformat format.
type textParser struct {
	format string
	unit   time.Duration // set from the first ID with a time
}

func newTextParser(format string) *textParser { return &textParser{format: format} }

// textEnds says when each text format's timestamp runs out.
var textEnds = map[string]struct {
	end  time.Time
	note string
}{
	idformat.ULID:       {time.UnixMilli(1<<48 - 1).UTC(), "48-bit Unix milliseconds (ULID spec)"},
	idformat.KSUID:      {time.Unix(1400000000+1<<32-1, 0).UTC(), "32-bit seconds from 2014-05-13T16:53:20Z (KSUID epoch)"},
	idformat.ObjectID:   {time.Unix(1<<32-1, 0).UTC(), "32-bit unsigned Unix seconds (BSON ObjectId)"},
	idformat.XID:        {time.Unix(1<<32-1, 0).UTC(), "32-bit unsigned Unix seconds (xid)"},
	idformat.TimeRandom: {timeid.DefaultEpoch.Add(time.Duration(1<<41) * time.Millisecond), "41-bit milliseconds from 2020-01-01 (timeid)"},
	idformat.TimeMember: {timeid.DefaultEpoch.Add(time.Duration(1<<41) * time.Millisecond), "41-bit milliseconds from 2020-01-01 (timeid)"},
	idformat.TimeGene:   {timeid.DefaultEpoch.Add(time.Duration(1<<41) * time.Millisecond), "41-bit milliseconds from 2020-01-01 (timeid)"},
	// UUID v7 shares ULID's 48-bit milliseconds; v1/v6 count 60 bits of
	// 100 ns from 1582-10-15, which end in 5236 (RFC 9562 §5.1).
	idformat.UUID: {time.UnixMilli(1<<48 - 1).UTC(), "UUID v7: 48-bit Unix milliseconds (RFC 9562 §5.7); v1/v6 last until 5236"},
}

func (p *textParser) parse(text []byte) (rec, error) {
	s := string(text)
	parts, err := idformat.ParseAs(p.format, s)
	if err != nil {
		return rec{}, err
	}
	var r rec
	b := parts.Bytes
	if len(b) == 0 { // timeid: decimal
		v, err := strconv.ParseUint(parts.Canonical, 10, 64)
		if err != nil {
			return rec{}, fmt.Errorf("%q: %v", clip(s), err)
		}
		r.k = key{0, 0, v}
	} else {
		if len(b) > 24 {
			return rec{}, fmt.Errorf("%q: %d bytes is wider than 192 bits", clip(s), len(b))
		}
		var buf [24]byte
		copy(buf[24-len(b):], b)
		for i := range r.k {
			for j := range 8 {
				r.k[i] = r.k[i]<<8 | uint64(buf[8*i+j])
			}
		}
	}
	if !parts.Time.IsZero() {
		if p.unit == 0 {
			p.unit = max(parts.Precision, time.Nanosecond)
		}
		r.tick, r.hasTick = int64(parts.Time.Sub(time.Unix(0, 0))/p.unit), true
	}
	r.wstr = parts.Node
	if parts.PID != 0 {
		r.wstr += "/" + strconv.Itoa(parts.PID)
	}
	return r, nil
}

func (p *textParser) workerLabel(r rec) string { return r.wstr }

// hasWorker: formats whose node and counter make IDs unique per worker.
func (p *textParser) hasWorker() bool {
	switch p.format {
	case idformat.Flake128, idformat.XID, idformat.ObjectID, idformat.TimeGene:
		return true
	}
	return false
}

func (p *textParser) clock() (time.Duration, time.Time) { return p.unit, time.Unix(0, 0).UTC() }

func (p *textParser) end() (time.Time, string) {
	if e, ok := textEnds[p.format]; ok {
		return e.end, e.note
	}
	return time.Time{}, ""
}

// orderParser reads order numbers of one format, without the key: the
// layout is prefix | version | date | body | check (package ordernum).
type orderParser struct {
	f                       ordernum.Format
	verAt, dateAt, bodyAt   int
	dateLen, bodyLen, radix int
}

func newOrderParser(f ordernum.Format) *orderParser {
	cfg := f.Config()
	p := &orderParser{f: f, radix: f.Radix(), bodyLen: f.BodyLength(), dateLen: len(cfg.Date)}
	p.verAt = len(cfg.Prefix)
	p.dateAt = p.verAt
	if cfg.Version {
		p.dateAt++
	}
	p.bodyAt = p.dateAt + p.dateLen
	return p
}

const base32Digits = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

func (p *orderParser) digits(s string) (uint64, bool) {
	var v uint64
	for i := 0; i < len(s); i++ {
		d := strings.IndexByte(base32Digits[:p.radix], s[i])
		if d < 0 || v > (math.MaxUint64-uint64(d))/uint64(p.radix) {
			return 0, false
		}
		v = v*uint64(p.radix) + uint64(d)
	}
	return v, true
}

func (p *orderParser) parse(text []byte) (rec, error) {
	n, err := p.f.Normalize(string(text))
	if err != nil {
		return rec{}, err
	}
	var r rec
	if p.dateLen > 0 {
		ds := n[p.dateAt : p.dateAt+p.dateLen]
		layout := "060102"
		if p.dateLen == 8 {
			layout = "20060102"
		}
		d, err := time.Parse(layout, ds)
		if err != nil {
			return rec{}, fmt.Errorf("date %q: %v", ds, err)
		}
		r.tick, r.hasTick = int64(d.Sub(time.Unix(0, 0))/(24*time.Hour)), true
		r.k[0] = uint64(r.tick)
	}
	if p.dateAt > p.verAt {
		v, _ := p.digits(n[p.verAt:p.dateAt])
		r.k[1] = v
	}
	body, ok := p.digits(n[p.bodyAt : p.bodyAt+p.bodyLen])
	if !ok {
		return rec{}, fmt.Errorf("body of %q does not fit 64 bits", n)
	}
	r.k[2], r.body = body, body
	r.modv, ok = p.digits(n)
	if !ok {
		r.modv = body
	}
	return r, nil
}

func (p *orderParser) workerLabel(rec) string { return "" }
func (p *orderParser) hasWorker() bool        { return false }
func (p *orderParser) clock() (time.Duration, time.Time) {
	if p.dateLen == 0 {
		return 0, time.Time{}
	}
	return 24 * time.Hour, time.Unix(0, 0).UTC()
}
func (p *orderParser) end() (time.Time, string) {
	if p.dateLen == 6 {
		return time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC), "yyMMdd date part: years 2000-2099"
	}
	return time.Time{}, ""
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
