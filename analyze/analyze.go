package analyze

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/idmint/idmint/idformat"
	"github.com/idmint/idmint/ordernum"
	"github.com/idmint/idmint/snowflake"
)

// Errors Read returns.
var (
	// ErrNoIDs is returned when the input holds no ID at all (only blank
	// lines and # comments).
	ErrNoIDs = errors.New("analyze: no IDs in the input")
	// ErrOptions is wrapped by errors about Options: the message names the
	// field and its value.
	ErrOptions = errors.New("analyze: invalid options")
	// ErrFormat is returned when the format cannot be recognised from the
	// first lines, or most lines do not parse in the chosen format.
	ErrFormat = errors.New("analyze: unrecognised ID format")
)

// Format names besides the idformat ones.
const (
	// Snowflake is a decimal ID in a snowflake layout.
	Snowflake = "snowflake"
	// Integer is a plain decimal integer: a segment, ticket or Redis
	// sequence, or an opaque (permuted) ID. It has no time and no worker.
	Integer = "integer"
	// OrderNum is an order number of a given ordernum.Format.
	OrderNum = "ordernum"
)

// Options tune Read. The zero value guesses the format and uses the
// defaults documented on each field; Now must be set.
type Options struct {
	// Format forces the format: Snowflake, Integer, OrderNum or an idformat
	// name ("uuid", "ulid", "timeid-random", ...). Empty guesses it from the
	// first lines: text formats by shape (idformat.Parse), decimal IDs by
	// trying every built-in snowflake layout (see Layout).
	Format string
	// Layout is the snowflake layout of decimal IDs. Zero with Format
	// empty or Snowflake means: pick the built-in layout under which the
	// sampled IDs decode to times after its epoch and not after Now, the
	// latest such; if none fits, the IDs are read as Integer.
	Layout snowflake.Layout
	// OrderFormat is the order-number format; required when Format is
	// OrderNum.
	OrderFormat ordernum.Format
	// Random says the IDs are meant to be unguessable (order numbers,
	// opaque IDs): a pattern in consecutive values is then a finding. It is
	// implied by Format OrderNum.
	Random bool
	// Now is the current time, for the years a layout has left and for
	// guessing the layout. Required.
	Now time.Time
	// Examples bounds the examples listed for duplicates and bad lines.
	// Zero means 5.
	Examples int
	// ModSample bounds how many IDs the mod-N test counts (it costs 1,023
	// divisions per ID). Above it, a fixed-seed uniform sample of this size
	// is used. Zero means 262,144; negative skips the test.
	ModSample int
	// Bins is the number of bars of the time histogram and points of the
	// order plot. Zero means 60.
	Bins int
	// MaxLine bounds the length of one input line. Zero means 4096.
	MaxLine int
	// Progress, when set, is called by Read every ProgressLines input
	// lines and once when the input ends, with the number of lines read so
	// far, so that a caller can show progress (the package prints
	// nothing). It is called on Read's goroutine.
	Progress func(lines int)
}

// ProgressLines is how many input lines Read reads between two calls of
// Options.Progress.
const ProgressLines = 1 << 16

func (o *Options) defaults() error {
	if o.Now.IsZero() {
		return fmt.Errorf("%w: Now must be set", ErrOptions)
	}
	if o.Examples == 0 {
		o.Examples = 5
	}
	if o.ModSample == 0 {
		o.ModSample = 1 << 18
	}
	if o.Bins == 0 {
		o.Bins = 60
	}
	if o.MaxLine == 0 {
		o.MaxLine = 4096
	}
	switch {
	case o.Examples < 0:
		return fmt.Errorf("%w: Examples %d must not be negative", ErrOptions, o.Examples)
	case o.Bins < 1 || o.Bins > 10000:
		return fmt.Errorf("%w: Bins %d must be between 1 and 10000", ErrOptions, o.Bins)
	case o.MaxLine < 64:
		return fmt.Errorf("%w: MaxLine %d must be at least 64", ErrOptions, o.MaxLine)
	case o.Format == OrderNum && o.OrderFormat.Length() == 0:
		return fmt.Errorf("%w: Format %q needs OrderFormat", ErrOptions, o.Format)
	}
	switch o.Format {
	case "", Snowflake, Integer, OrderNum:
	default:
		if !slices.Contains(idformat.Formats(), o.Format) {
			return fmt.Errorf("%w: Format %q is unknown (want %s, %s, %s or one of %s)", ErrOptions, o.Format, Snowflake, Integer, OrderNum, strings.Join(idformat.Formats(), ", "))
		}
	}
	if o.Format == OrderNum {
		o.Random = true
	}
	return nil
}

// Severity ranks a Finding.
type Severity string

// Severities, from worst.
const (
	// Defect is something wrong with the IDs themselves: duplicates, a
	// worker going backwards, an expired layout, a guessable order number.
	Defect Severity = "defect"
	// Warning is something that will hurt: mod-N skew, disorder, a layout
	// near its end, lines that are not IDs.
	Warning Severity = "warning"
	// Info is worth knowing and not wrong.
	Info Severity = "info"
)

// Finding is one conclusion of the report, in a sentence.
type Finding struct {
	Severity Severity `json:"severity"`
	Kind     string   `json:"kind"` // duplicates, disorder, skew, capacity, end, pattern, input
	Message  string   `json:"message"`
}

// Report is everything Read found. Sections that do not apply to the
// format are nil (Time for IDs without a timestamp, Random when fewer than
// 3 IDs were read).
type Report struct {
	Format       string    `json:"format"`
	Layout       string    `json:"layout,omitempty"`      // snowflake layout spec
	LayoutName   string    `json:"layout_name,omitempty"` // built-in name or "custom"
	Guessed      bool      `json:"guessed"`               // format or layout was guessed
	GuessNote    string    `json:"guess_note,omitempty"`  // how, and what else fitted
	Lines        int       `json:"lines"`                 // non-blank, non-comment lines
	Count        int       `json:"count"`                 // IDs analysed
	Invalid      Invalid   `json:"invalid"`               // lines that are not IDs of the format
	Duplicates   Dups      `json:"duplicates"`            // repeated IDs
	Order        Order     `json:"order"`                 // disorder overall and per worker
	Time         *Time     `json:"time,omitempty"`        // span, rate, peak, histogram
	Mod          *Mod      `json:"mod,omitempty"`         // mod-N balance
	End          *End      `json:"end,omitempty"`         // when the format runs out
	Random       *Random   `json:"random,omitempty"`      // consecutive values vs random
	Findings     []Finding `json:"findings"`              // conclusions, worst first
	ExpectRandom bool      `json:"expect_random"`         // Options.Random
}

// Clean reports whether the report has no defect and no warning.
func (r *Report) Clean() bool {
	for _, f := range r.Findings {
		if f.Severity != Info {
			return false
		}
	}
	return true
}

// Line is an input line, for examples.
type Line struct {
	Line int    `json:"line"`
	Text string `json:"text"`
	Err  string `json:"error,omitempty"`
}

// Invalid counts lines that did not parse.
type Invalid struct {
	Count    int    `json:"count"`
	Examples []Line `json:"examples,omitempty"`
}

// Read reads IDs, one per line (blank lines and lines starting with # are
// skipped, surrounding space is trimmed), and analyses them. It returns an
// error for bad Options, a read error, an input without IDs, or one whose
// format cannot be recognised; lines that do not parse in the recognised
// format are counted in Report.Invalid instead.
func Read(r io.Reader, opt Options) (*Report, error) {
	if err := opt.defaults(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, min(4096, opt.MaxLine)), opt.MaxLine)
	// The first lines choose the format; keep them until it is chosen.
	// After them, a line is parsed from the scanner's buffer, never copied.
	const probe = 1000
	var head []Line
	lineNo := 0
	next := func() ([]byte, bool, error) {
		for sc.Scan() {
			lineNo++
			if opt.Progress != nil && lineNo%ProgressLines == 0 {
				opt.Progress(lineNo)
			}
			b := bytes.TrimSpace(sc.Bytes())
			if len(b) == 0 || b[0] == '#' {
				continue
			}
			return b, true, nil
		}
		if err := sc.Err(); err != nil {
			if errors.Is(err, bufio.ErrTooLong) {
				return nil, false, fmt.Errorf("read line %d: longer than %d bytes: not an ID list", lineNo+1, opt.MaxLine)
			}
			return nil, false, fmt.Errorf("read line %d: %w", lineNo+1, err)
		}
		return nil, false, nil
	}
	for len(head) < probe {
		b, ok, err := next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		head = append(head, Line{Line: lineNo, Text: string(b)})
	}
	if len(head) == 0 {
		return nil, ErrNoIDs
	}
	p, rep, err := choose(head, opt)
	if err != nil {
		return nil, err
	}
	c := newCollector(p, opt)
	for _, l := range head {
		if err := c.add(l.Line, []byte(l.Text)); err != nil {
			return nil, err
		}
	}
	for {
		b, ok, err := next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		if err := c.add(lineNo, b); err != nil {
			return nil, err
		}
	}
	if opt.Progress != nil {
		opt.Progress(lineNo)
	}
	rep.Lines = c.lines
	rep.Invalid = c.invalid
	if c.n == 0 {
		return nil, fmt.Errorf("%w: none of the %d lines is a %s ID (line %d: %s)", ErrFormat, c.lines, rep.Format, c.invalid.Examples[0].Line, c.invalid.Examples[0].Err)
	}
	c.analyse(rep)
	return rep, nil
}
