package server

import (
	"bytes"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// This file reads a config document the way a user wrote it, before it is
// decoded into Config: every unknown field, every value of the wrong kind
// and every tab-indented line is reported at once, by its YAML path and
// line, with the fields that are valid there — in the user's words, never
// a Go type's. Validate's later problems get their lines from here too.

// configLines maps a field path ("keys.order.step") to the line it is on.
type configLines map[string]int

func (l configLines) set(path string, line int) {
	if l != nil {
		l[path] = line
	}
}

// line returns the line of path, or of its nearest parent that has one.
func (l configLines) line(path string) int {
	for path != "" {
		if n, ok := l[path]; ok {
			return n
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return 0
		}
		path = path[:i]
	}
	return 0
}

// lintConfig checks the document b against Config's shape. It returns the
// parsed document and the problems found; a document that YAML itself
// cannot read yields one problem (or one per tab-indented line). With
// lines non-nil it records the line of every field path it sees.
func lintConfig(b []byte, lines configLines) (*yaml.Node, []Problem) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		if ps := tabProblems(b); len(ps) > 0 {
			return nil, ps
		}
		return nil, []Problem{syntaxProblem(err)}
	}
	var ps []Problem
	if len(doc.Content) > 0 {
		lintNode(doc.Content[0], reflect.TypeOf(Config{}), "", lines, &ps)
	}
	return &doc, ps
}

// linesOf returns the line of every field path of the config document b
// (nil when there is none): Validate asks only when it found problems, so
// a good config is walked once.
func linesOf(b []byte) configLines {
	if b == nil {
		return nil
	}
	lines := configLines{}
	lintConfig(b, lines)
	return lines
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxProblem turns a YAML parser error into a Problem with its line.
func syntaxProblem(err error) Problem {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		p := Problem{Message: "not valid YAML: " + m[2] +
			" (check the indentation and the quoting on this line and the one before)"}
		if n, err := strconv.Atoi(m[1]); err == nil { // digits only, but they could overflow
			p.Line = n
		}
		return p
	}
	return Problem{Message: "not valid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

// tabProblems reports lines indented with a tab, which YAML forbids.
func tabProblems(b []byte) []Problem {
	var ps []Problem
	for i, ln := range bytes.Split(b, []byte("\n")) {
		indent := ln[:len(ln)-len(bytes.TrimLeft(ln, " \t"))]
		if bytes.IndexByte(indent, '\t') >= 0 {
			ps = append(ps, Problem{Line: i + 1, Message: "indented with a tab; YAML indents with spaces only"})
		}
	}
	return ps
}

var durationType = reflect.TypeOf(Duration(0))

// lintNode checks n against type t at path.
func lintNode(n *yaml.Node, t reflect.Type, path string, lines configLines, ps *[]Problem) {
	if n.Kind == yaml.AliasNode || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
		return
	}
	bad := func(want string) {
		*ps = append(*ps, Problem{Field: path, Value: nodeValue(n), Line: n.Line,
			Message: fmt.Sprintf("expected %s, found %s", want, nodeKind(n))})
	}
	switch {
	case t.Kind() == reflect.Struct && t != durationType:
		if n.Kind != yaml.MappingNode {
			bad("a mapping of field names to values")
			return
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" {
				continue
			}
			p := joinPath(path, k.Value)
			lines.set(p, k.Line)
			f, ok := fields[k.Value]
			if !ok {
				*ps = append(*ps, unknownField(p, k, fields))
				continue
			}
			lintNode(v, f, p, lines, ps)
		}
	case t.Kind() == reflect.Map:
		if n.Kind != yaml.MappingNode {
			bad("a mapping of names to values")
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := joinPath(path, k.Value)
			lines.set(p, k.Line)
			lintNode(v, t.Elem(), p, lines, ps)
		}
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			bad("a list")
			return
		}
		for i, e := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			lines.set(p, e.Line)
			lintNode(e, t.Elem(), p, lines, ps)
		}
	default:
		if n.Kind != yaml.ScalarNode {
			bad(YAMLWords.Kind(t))
			return
		}
		if t.Kind() == reflect.String {
			return // any scalar reads as text
		}
		v := reflect.New(t)
		if err := n.Decode(v.Interface()); err != nil {
			msg := fmt.Sprintf("expected %s", YAMLWords.Kind(t))
			if t == durationType {
				msg += `, such as 500ms, 5s or 1m30s`
			}
			*ps = append(*ps, Problem{Field: path, Value: n.Value, Line: n.Line, Message: msg})
		}
	}
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// fieldsOf caches yamlFields by type: a config of 10,000 keys lints 10,000
// KeyConfig mappings, and listing the fields by reflection was a tenth of
// its parse.
var fieldsOf sync.Map // reflect.Type -> map[string]reflect.Type

// yamlFields maps the YAML names of t's fields to their types. The map is
// shared: read it only.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldsOf.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); f.IsExported() && tag != "" && tag != "-" {
			m[tag] = f.Type
		}
	}
	fieldsOf.Store(t, m)
	return m
}

// unknownField reports a field name that is not valid where it stands,
// with the closest valid one and the whole list.
func unknownField(path string, k *yaml.Node, fields map[string]reflect.Type) Problem {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	sort.Strings(names)
	msg := "unknown field"
	if best := closest(k.Value, names); best != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", best)
	}
	msg += "; valid fields here: " + strings.Join(names, ", ")
	return Problem{Field: path, Line: k.Line, Message: msg}
}

// closest returns the name within edit distance 2 of s, if any.
func closest(s string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(strings.ToLower(s), n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// KindWords names the kinds of value a reader sees in one format: what a
// string, a list and a mapping are called there, and the word for the rest.
type KindWords struct{ String, List, Mapping, Other string }

// YAMLWords and JSONWords are the config file's and the HTTP API's words.
var (
	YAMLWords = KindWords{String: "a text value", List: "a list", Mapping: "a mapping", Other: "a value"}
	JSONWords = KindWords{String: "a string", List: "an array", Mapping: "an object", Other: "another kind of value"}
)

// Kind names what a value of type t looks like in the format w describes:
// one mapping from Go types to a user's words for the config file (where
// a duration is its own kind) and the JSON API alike.
func (w KindWords) Kind(t reflect.Type) string {
	if t == nil {
		return w.Other
	}
	if t == durationType {
		return "a duration"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return w.String
	case reflect.Map, reflect.Struct:
		return w.Mapping
	case reflect.Slice, reflect.Array:
		return w.List
	case reflect.Pointer:
		return w.Kind(t.Elem())
	}
	return w.Other
}

// nodeKind names what the user wrote.
func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%q", n.Value)
}

func nodeValue(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return n.Value
	}
	return ""
}
