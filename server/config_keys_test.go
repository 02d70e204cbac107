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
		{"keys:\n  a: {strategy: uuid, stepp: 3}\n", "line 2: field stepp not found in type server.KeyConfig"},
		{"keys: [a, b]\n", "keys must be a mapping"},
		{"keys:\n  a: {strategy: uuid, step: many}\n", `key "a"`},
		{"listen: x\nnonsense: 1\n", "field nonsense not found"},
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
