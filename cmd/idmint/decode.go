package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idmint/idmint/idformat"
	"github.com/idmint/idmint/idparts"
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/server/strategies"
	"github.com/idmint/idmint/snowflake"
)

func init() {
	register(command{name: "decode", summary: "show the parts of an ID (decimal, friendly TIME-NODE-SEQ or text): idmint decode <id> [--layout NAME|SPEC] [--json]", run: runDecode})
}

// decoded is one ID taken apart: the object /v1/decode answers (what
// --json prints), and what the text output adds to it.
type decoded struct {
	answer idparts.Answer
	// at is the ID's time (answer.Time as a time).
	at time.Time
	// kind says what the layout is ("snowflake", "timestamp form") in the
	// text output; "" for a text format, whose name says it.
	kind string
	// nodeField names the layout field answer.Node holds ("worker"); ""
	// when the format has no node number.
	nodeField string
	// hasSeq says whether the format has a sequence.
	hasSeq bool
	// extras lists answer.Extra's keys in the order to print them.
	extras []string
	// more are text-only lines after the answer's fields (friendly,
	// js_safe, every note of a text format); replaced lists the Extra keys
	// they stand for (a text format's last note), not printed again.
	more     []kvPart
	replaced []string
}

type kvPart struct{ Key, Value string }

// newDecoded builds the answer for the ID text id from what a /v1/decode
// layout decoder returned.
func newDecoded(id string, p server.Decoded, err error) (decoded, error) {
	if err != nil {
		return decoded{}, usagef("argument id: %v", err)
	}
	return decoded{answer: idparts.Parts(p).Answer(id), at: p.Time}, nil
}

// text writes d for a reader: one line per field of the JSON answer,
// named as there (an extra field by its own name), then the text-only lines.
func (d decoded) text(w io.Writer) {
	a := d.answer
	fmt.Fprintf(w, "%s\n", a.ID)
	line := func(k, v string) { fmt.Fprintf(w, "  %-10s %s\n", k, v) }
	layout := a.Layout
	if d.kind != "" {
		layout += " (" + d.kind + ")"
	}
	line("layout", layout)
	if a.Time != "" {
		t := a.Time
		if d.at.Nanosecond()%int(time.Millisecond) == 0 {
			// Whole milliseconds read better with all three digits
			// (.850Z, .000Z); finer times keep every digit they need.
			t = d.at.UTC().Format("2006-01-02T15:04:05.000Z07:00")
		}
		line("time", t)
		line("unix_ms", a.UnixMs)
	}
	if d.nodeField != "" {
		line("node", fmt.Sprintf("%d (%s)", a.Node, d.nodeField))
	}
	if d.hasSeq {
		seq := strconv.FormatInt(a.Sequence, 10)
		if a.Layout == "monotonic" {
			seq += " (the logical counter)"
		}
		line("sequence", seq)
	}
	printed := map[string]bool{}
	for _, k := range d.replaced {
		printed[k] = true
	}
	for _, k := range append(d.extras, slices.Sorted(maps.Keys(a.Extra))...) {
		if v, ok := a.Extra[k]; ok && !printed[k] {
			line(k, v)
			printed[k] = true
		}
	}
	for _, p := range d.more {
		line(p.Key, p.Value)
	}
}

func runDecode(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "decode", "<id>... [--layout NAME|SPEC] [--format NAME] [--json]\n\n"+
		"A snowflake ID is decimal or its friendly form YYYYMMDDhhmmssSSS-<node fields>-<seq> (UTC),\n"+
		"e.g. 20261201095959123-40-17 for leaf; both read with --layout (default "+defaultLayout+", the layout\n"+
		"idmint serve and idmint gen issue; give --layout twitter, discord... for IDs from elsewhere).")
	layoutText := fs.String("layout", "", "snowflake layout the IDs were issued with (see `idmint layouts`; default "+defaultLayout+", what idmint issues)")
	format := fs.String("format", "", "the ID's format when it cannot be told by its shape: snowflake, monotonic (a timestamp-form monotonic key's ID), "+strings.Join(idformat.Formats(), ", "))
	asJSON := fs.Bool("json", false, "print one JSON object per ID")
	ids, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return usagef("missing argument: the ID to decode")
	}
	if *layoutText == "monotonic" { // as the server's /v1/decode?layout=monotonic
		if *format != "" && *format != "monotonic" {
			return usagef("flag --layout: monotonic goes with no --format (or --format monotonic), not %q", *format)
		}
		*format, *layoutText = "monotonic", ""
	}
	lt := *layoutText
	if lt == "" {
		lt = defaultLayout
	}
	layout, err := snowflake.ParseLayout(lt)
	if err != nil {
		return usagef("flag --layout: %v", err)
	}
	if *format != "" && *format != "snowflake" && *format != "monotonic" && !slices.Contains(idformat.Formats(), *format) {
		return usagef("flag --format: %q is unknown (want snowflake, monotonic, %s)", *format, strings.Join(idformat.Formats(), ", "))
	}
	for _, text := range ids {
		var d decoded
		text = strings.TrimSpace(text)
		switch {
		case *format == "monotonic":
			d, err = decodeMonotonic(text)
		case (*format == "" || *format == "snowflake") && snowflake.IsFriendly(text):
			d, err = decodeFriendly(layout, text)
		case *format == "snowflake" || *layoutText != "" || (*format == "" && isDecimal(text)):
			d, err = decodeSnowflake(layout, text)
		case *format != "":
			d, err = decodeFamily(text, *format)
		default:
			d, err = decodeFamily(text, "")
		}
		if err != nil {
			return err
		}
		if *asJSON {
			b, err := json.Marshal(d.answer)
			if err != nil {
				return fmt.Errorf("decode %s: %w", text, err)
			}
			fmt.Fprintf(e.stdout, "%s\n", b)
			continue
		}
		if *layoutText == "" && d.kind == "snowflake" {
			d.more = append(d.more, kvPart{"note", "layout " + defaultLayout + " assumed (what idmint issues); for an ID from elsewhere give --layout (twitter, discord...: `idmint layouts`)"})
		}
		d.text(e.stdout)
	}
	return nil
}

func isDecimal(s string) bool {
	s = strings.TrimSpace(s)
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if (s[i] < '0' || s[i] > '9') && !(i == 0 && s[i] == '-') {
			return false
		}
	}
	return true
}

// decodeFamily decodes a text-format ID (UUID, ULID...) as format, or as
// the format idformat recognises by its shape when format is "", through
// the server's decoder for that format.
func decodeFamily(text, format string) (decoded, error) {
	var p idformat.Parts
	var err error
	if format == "" {
		p, err = idformat.Parse(text)
	} else {
		p, err = idformat.ParseAs(format, text)
	}
	if err != nil {
		return decoded{}, usagef("argument id: %v", err)
	}
	dp, err := strategies.DecodeText(p.Format, text)
	d, err := newDecoded(text, dp, err)
	if err != nil {
		return d, err
	}
	d.hasSeq = p.HasSeq
	for _, f := range p.Fields() {
		d.extras = append(d.extras, f.Name)
	}
	d.replaced = []string{"note"}
	for _, n := range p.Notes {
		d.more = append(d.more, kvPart{"note", n})
	}
	return d, nil
}

func decodeSnowflake(l snowflake.Layout, text string) (decoded, error) {
	id, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return decoded{}, usagef("argument id: %q is not a 64-bit decimal integer", text)
	}
	p, err := strategies.DecodeSnowflake(l, l.Name(), text)
	d, err := newDecoded(text, p, err)
	if err != nil {
		return d, err
	}
	d.kind, d.hasSeq, d.nodeField = "snowflake", true, strategies.NodeField(l)
	for _, f := range l.NodeFields() {
		d.extras = append(d.extras, f.Name)
	}
	if f, err := snowflake.FormatFriendly(l, id); err == nil {
		d.more = append(d.more, kvPart{"friendly", f})
	}
	js := "yes"
	if id > snowflake.MaxSafeInteger {
		js = "no (above 2^53-1: send it to JavaScript as a string)"
	}
	d.more = append(d.more, kvPart{"js_safe", js})
	return d, nil
}

// decodeFriendly reads the friendly form (snowflake.FormatFriendly) back
// into its ID and decodes that.
func decodeFriendly(l snowflake.Layout, text string) (decoded, error) {
	id, err := snowflake.ParseFriendly(l, text)
	if err != nil {
		return decoded{}, usagef("argument id: %v", err)
	}
	return decodeSnowflake(l, strconv.FormatInt(id, 10))
}

// decodeMonotonic takes a timestamp-form monotonic ID apart: Unix
// milliseconds above monotonic.LogicalBits logical bits.
func decodeMonotonic(text string) (decoded, error) {
	p, err := strategies.DecodeMonotonic(text)
	d, err := newDecoded(text, p, err)
	d.kind, d.hasSeq = "timestamp form", true
	return d, err
}
