package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/idmint/idmint/idformat"
	"github.com/idmint/idmint/monotonic"
	"github.com/idmint/idmint/snowflake"
)

func init() {
	register(command{name: "decode", summary: "show the parts of an ID (decimal, friendly TIME-NODE-SEQ or text): idmint decode <id> [--layout NAME|SPEC] [--json]", run: runDecode})
}

// decoded is what decode prints: the format and its named parts, in order.
type decoded struct {
	Format string   `json:"format"`
	ID     string   `json:"id"`
	Parts  []kvPart `json:"-"`
}

type kvPart struct{ Key, Value string }

func (d decoded) MarshalJSON() ([]byte, error) {
	m := map[string]string{"format": d.Format, "id": d.ID}
	for _, p := range d.Parts {
		m[p.Key] = p.Value
	}
	return json.Marshal(m)
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
		switch {
		case *format == "monotonic":
			d, err = decodeMonotonic(text)
		case (*format == "" || *format == "snowflake") && snowflake.IsFriendly(strings.TrimSpace(text)):
			d, err = decodeFriendly(layout, text)
		case *format == "snowflake" || *layoutText != "" || (*format == "" && isDecimal(text)):
			d, err = decodeSnowflake(layout, text)
		case *format != "":
			d, err = decodeFamily(idformat.ParseAs(*format, text))
		default:
			d, err = decodeFamily(idformat.Parse(text))
		}
		if err != nil {
			return err
		}
		if *asJSON {
			b, _ := json.Marshal(d)
			fmt.Fprintf(e.stdout, "%s\n", b)
			continue
		}
		fmt.Fprintf(e.stdout, "%s (%s)\n", d.ID, d.Format)
		for _, p := range d.Parts {
			fmt.Fprintf(e.stdout, "  %-10s %s\n", p.Key, p.Value)
		}
		if *layoutText == "" && strings.HasPrefix(d.Format, "snowflake/") {
			fmt.Fprintf(e.stdout, "  %-10s layout %s assumed (what idmint issues); for an ID from elsewhere give --layout (twitter, discord...: `idmint layouts`)\n", "note", defaultLayout)
		}
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

func decodeFamily(p idformat.Parts, err error) (decoded, error) {
	if err != nil {
		return decoded{}, usagef("argument id: %v", err)
	}
	d := decoded{Format: p.Format, ID: p.Canonical}
	for _, f := range p.Fields() {
		d.Parts = append(d.Parts, kvPart{f.Name, f.Value})
	}
	return d, nil
}

func decodeSnowflake(l snowflake.Layout, text string) (decoded, error) {
	id, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
	if err != nil {
		return decoded{}, usagef("argument id: %q is not a 64-bit decimal integer", text)
	}
	p, err := snowflake.Decode(l, id)
	if err != nil {
		return decoded{}, usagef("argument id: %v", err)
	}
	d := decoded{Format: "snowflake/" + l.Name(), ID: strconv.FormatInt(id, 10)}
	d.Parts = append(d.Parts, kvPart{"time", p.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00")})
	d.Parts = append(d.Parts, kvPart{"unix_ms", strconv.FormatInt(p.Time.UnixMilli(), 10)})
	for _, f := range l.NodeFields() {
		d.Parts = append(d.Parts, kvPart{f.Name, strconv.FormatInt(p.Node[f.Name], 10)})
	}
	d.Parts = append(d.Parts, kvPart{"sequence", strconv.FormatInt(p.Sequence, 10)})
	if f, err := snowflake.FormatFriendly(l, id); err == nil {
		d.Parts = append(d.Parts, kvPart{"friendly", f})
	}
	js := "yes"
	if id > snowflake.MaxSafeInteger {
		js = "no (above 2^53-1: send it to JavaScript as a string)"
	}
	d.Parts = append(d.Parts, kvPart{"js_safe", js})
	return d, nil
}

// decodeFriendly reads the friendly form (snowflake.FormatFriendly) back
// into its ID and decodes that.
func decodeFriendly(l snowflake.Layout, text string) (decoded, error) {
	id, err := snowflake.ParseFriendly(l, strings.TrimSpace(text))
	if err != nil {
		return decoded{}, usagef("argument id: %v", err)
	}
	return decodeSnowflake(l, strconv.FormatInt(id, 10))
}

// decodeMonotonic takes a timestamp-form monotonic ID apart: Unix
// milliseconds above monotonic.LogicalBits logical bits.
func decodeMonotonic(text string) (decoded, error) {
	t := strings.TrimSpace(text)
	id, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return decoded{}, usagef("argument %q: a monotonic ID is a decimal int64", t)
	}
	p, err := monotonic.Decode(id)
	if err != nil {
		return decoded{}, usagef("argument %q: %v", t, err)
	}
	return decoded{Format: "monotonic/timestamp", ID: t, Parts: []kvPart{
		{"time", p.Time.Format("2006-01-02T15:04:05.000Z07:00")},
		{"unix_ms", strconv.FormatInt(p.Time.UnixMilli(), 10)},
		{"logical", strconv.FormatInt(p.Logical, 10)},
	}}, nil
}
