package server

import (
	"fmt"
	"strings"
	"testing"
)

// The keys: section decodes as strictly as the rest of the config, and in
// time linear in its size.
func TestParseConfigKeys(t *testing.T) {
	c, err := ParseConfig(strings.NewReader("keys:\n  base: &b {strategy: segment, step: 10}\n  a: {<<: *b, store: other}\n  b: {strategy: uuid, options: {version: \"7\"}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if a := c.Keys["a"]; a.Strategy != "segment" || a.Step != 10 || a.Store != "other" {
		t.Errorf("merged key a = %+v", a)
	}
	if b := c.Keys["b"]; b.Options["version"] != "7" {
		t.Errorf("key b = %+v", b)
	}
	for _, bad := range []struct{ yaml, want string }{
		{"keys:\n  a: {strategy: uuid}\n  a: {strategy: ulid}\n", `line 3: key "a" is already defined`},
		{"keys:\n  a: {strategy: uuid, stepp: 3}\n", `line 2: keys.a.stepp: unknown field (did you mean "step"?); valid fields here: layout, node_local,`},
		{"keys: [a, b]\n", "line 1: keys: expected a mapping of names to values, found a list"},
		{"keys:\n  a: {strategy: uuid, step: many}\n", `line 2: keys.a.step: expected a whole number (value "many")`},
		{"listen: x\nnonsense: 1\n", "line 2: nonsense: unknown field; valid fields here: admin_listen,"},
		{"answer_timeout: soon\n", `line 1: answer_timeout: expected a duration, such as 500ms, 5s or 1m30s (value "soon")`},
		{"tls: on\n", `line 1: tls: expected a mapping of field names to values, found "on"`},
	} {
		_, err := ParseConfig(strings.NewReader(bad.yaml))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: err = %v, want it to say %q", bad.yaml, err, bad.want)
		}
	}
	if c, err := ParseConfig(strings.NewReader("keys:\n")); err != nil || len(c.Keys) != 0 {
		t.Errorf("empty keys: %v %v", c.Keys, err)
	}
	if _, err := ParseConfig(strings.NewReader(strings.Repeat("#", MaxConfigBytes+1))); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("an oversized config: %v", err)
	}
}

// A config's mistakes are reported all at once, each by its line and YAML
// path, in the user's words (never a Go type), and Validate's problems
// carry the line of the field they are about.
func TestConfigProblemsAllAtOnce(t *testing.T) {
	_, err := ParseConfig(strings.NewReader("listn: 1\nkeys:\n  order:\n    strategy: segment\n    stepp: 10\n    rate_limit: fast\n"))
	if err == nil {
		t.Fatal("a config with three mistakes parsed")
	}
	for _, want := range []string{"3 problem(s)", "line 1: listn: unknown field (did you mean \"listen\"?)",
		"line 5: keys.order.stepp: unknown field", "line 6: keys.order.rate_limit: expected a number (value \"fast\")"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v\nwant it to say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "server.KeyConfig") || strings.Contains(err.Error(), "int64") {
		t.Errorf("err names a Go type: %v", err)
	}
	_, err = ParseConfig(strings.NewReader("keys:\n\torder:\n    strategy: segment\n\t  x: 1\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2: indented with a tab; YAML indents with spaces only") ||
		!strings.Contains(err.Error(), "line 4: indented with a tab") {
		t.Errorf("tab-indented config: %v", err)
	}
	c, err := ParseConfig(strings.NewReader("keys:\n  a:\n    strategy: segment\n    step: -1\n"))
	if err != nil {
		t.Fatal(err)
	}
	c.SetDefaults()
	err = c.Validate(NewRegistry())
	if err == nil || !strings.Contains(err.Error(), "line 4: keys.a.step: must not be negative") ||
		!strings.Contains(err.Error(), "line 3: keys.a.strategy: unknown strategy") {
		t.Errorf("Validate: %v", err)
	}
}

// 100,000 keys parse in a fraction of a second (yaml.v3's own duplicate
// check took 52 s): go test -bench ParseConfigKeys ./server
func BenchmarkParseConfigKeys(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("keys:\n")
	for i := 0; i < 100000; i++ {
		fmt.Fprintf(&sb, "  k%d: {strategy: segment}\n", i)
	}
	doc := sb.String()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := ParseConfig(strings.NewReader(doc))
		if err != nil || len(c.Keys) != 100000 {
			b.Fatal(err)
		}
	}
}
