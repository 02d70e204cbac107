package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/idmint/idmint/snowflake"
)

func init() {
	register(command{name: "decode", summary: "show the parts of an ID: idmint decode <id> [--layout NAME|SPEC] [--json]", run: runDecode})
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
	fs := newFlags(e, "decode", "<id>... [--layout NAME|SPEC] [--json]")
	layoutText := fs.String("layout", "twitter", "snowflake layout the IDs were issued with (see `idmint layouts`)")
	asJSON := fs.Bool("json", false, "print one JSON object per ID")
	ids, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return usagef("missing argument: the ID to decode")
	}
	layout, err := snowflake.ParseLayout(*layoutText)
	if err != nil {
		return usagef("flag --layout: %v", err)
	}
	for _, text := range ids {
		d, err := decodeSnowflake(layout, text)
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
	}
	return nil
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
	return d, nil
}
