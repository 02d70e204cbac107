package doccheck

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/idmint/idmint/server"
)

// root is the repository, two levels up from this package.
const root = "../.."

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// yamlPaths lists the YAML field paths of t ("tls.cert_file"), following
// nested structs but not maps (keys.NAME is documented as a table of its
// own).
func yamlPaths(t reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || tag == "" || tag == "-" {
			continue
		}
		out = append(out, prefix+tag)
		if f.Type.Kind() == reflect.Struct && f.Type.NumField() > 0 && f.Type.Field(0).Tag.Get("yaml") != "" {
			out = append(out, yamlPaths(f.Type, prefix+tag+".")...)
		}
	}
	return out
}

// Every field the config accepts has a row in docs/configuration.md: a
// field added without its documentation fails here.
func TestEveryConfigFieldDocumented(t *testing.T) {
	doc := read(t, "docs/configuration.md")
	row := func(name string) bool { return strings.Contains(doc, "| `"+name+"` |") }
	for _, p := range yamlPaths(reflect.TypeOf(server.Config{}), "") {
		if !row(p) {
			t.Errorf("config field %s has no row (| `%s` |) in docs/configuration.md", p, p)
		}
	}
	for _, p := range yamlPaths(reflect.TypeOf(server.KeyConfig{}), "") {
		if !row(p) {
			t.Errorf("key field %s has no row (| `%s` |) in docs/configuration.md's per-key table", p, p)
		}
	}
}

var (
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRE = regexp.MustCompile(`(?m)^#+ (.*)$`)
	fenceRE   = regexp.MustCompile("(?ms)^```.*?^```")
)

// anchor is the id GitHub gives a heading.
func anchor(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	var b strings.Builder
	for _, r := range h {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func anchors(text string) map[string]bool {
	m := map[string]bool{}
	for _, h := range headingRE.FindAllStringSubmatch(fenceRE.ReplaceAllString(text, ""), -1) {
		m[anchor(h[1])] = true
	}
	return m
}

// Every relative link of the README and docs/ names a file of the
// repository, and every #anchor a heading of the page it points at.
func TestLinksResolve(t *testing.T) {
	pages, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	pages = append(pages, filepath.Join(root, "README.md"))
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		text := fenceRE.ReplaceAllString(string(b), "")
		for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(link, "#")
			target := page
			if path != "" {
				target = filepath.Join(filepath.Dir(page), path)
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s links to %s, which is not in the repository", rel(page), link)
					continue
				}
			}
			if frag != "" && strings.HasSuffix(target, ".md") {
				tb, err := os.ReadFile(target)
				if err == nil && !anchors(string(tb))[frag] {
					t.Errorf("%s links to %s: no heading #%s in %s", rel(page), link, frag, rel(target))
				}
			}
		}
	}
}

func rel(p string) string {
	r, err := filepath.Rel(root, p)
	if err != nil {
		return p
	}
	return r
}

// The README is a front door: what idmint is, the two commands, the tour,
// the strategies, the package map and a map of docs/, in at most 300
// lines; it never cites notes a reader cannot open.
func TestReadmeIsAFrontDoor(t *testing.T) {
	readme := read(t, "README.md")
	if n := strings.Count(readme, "\n"); n > 300 {
		t.Errorf("README.md has %d lines; keep it at most 300 and move the rest into docs/", n)
	}
	for _, want := range []string{"go run ./cmd/idmint serve", "bash scripts/test.sh", "## Contents", "## Package map", "## Documentation"} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md lacks %q", want)
		}
	}
	pages, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	pages = append(pages, filepath.Join(root, "README.md"))
	bare := regexp.MustCompile(`\bU(1[01]|[1-9])\b|design\.md|\.\./shared|\(h[0-9]+\)|seed survey`)
	for _, p := range pages {
		b, _ := os.ReadFile(p)
		if m := bare.FindString(string(b)); m != "" {
			t.Errorf("%s cites %q, which a reader cannot look up: write it out in words", rel(p), m)
		}
	}
}
