package main

// A checker for the PromQL the dashboard uses: a tokenizer and a
// recursive-descent parser of the language as Prometheus documents it
// (prometheus.io/docs/prometheus/latest/querying/: selectors, range
// selectors, functions, aggregations, binary operators with their
// precedence and vector matching), with its types (scalar, instant
// vector, range vector, string) checked the way Prometheus checks them.
// It rejects what it does not know (subqueries, @, unknown functions)
// rather than guess. Prometheus's own parser module would add dozens of
// modules and newer versions of several to go.mod; where Debian's
// promtool is installed, TestPromtoolChecksQueries runs the real parser
// too.

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

type valueType int

const (
	scalar valueType = iota
	vector
	matrix
	str
)

func (t valueType) String() string {
	return [...]string{"scalar", "instant vector", "range vector", "string"}[t]
}

type token struct {
	kind string // "ident", "number", "string", "duration", "var", or the operator itself
	text string
	pos  int
}

// grafanaVar is a Grafana variable that may stand where a duration does.
var grafanaVar = regexp.MustCompile(`^\$(__rate_interval|__interval|__range)\b`)

var durationRE = regexp.MustCompile(`^([0-9]+(ms|s|m|h|d|w|y))+`)

func tokenize(s string) ([]token, error) {
	var toks []token
	ops := []string{"!=", "=~", "!~", "==", "<=", ">=", "(", ")", "{", "}", "[", "]", ",", "=", "<", ">", "+", "-", "*", "/", "%", "^", ":", "@"}
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			i++
		case c == '"' || c == '\'':
			j := i + 1
			for ; j < len(s) && s[j] != c; j++ {
				if s[j] == '\\' {
					j++
				}
				if j < len(s) && s[j] == '\n' {
					return nil, fmt.Errorf("offset %d: newline in string", j)
				}
			}
			if j >= len(s) {
				return nil, fmt.Errorf("offset %d: unterminated string", i)
			}
			toks = append(toks, token{"string", s[i+1 : j], i})
			i = j + 1
		case c == '$':
			m := grafanaVar.FindString(s[i:])
			if m == "" {
				return nil, fmt.Errorf("offset %d: %q: only $__rate_interval, $__interval and $__range may stand outside a string", i, s[i:min(len(s), i+20)])
			}
			toks = append(toks, token{"var", m, i})
			i += len(m)
		case c >= '0' && c <= '9' || c == '.':
			if m := durationRE.FindString(s[i:]); m != "" && (i+len(m) == len(s) || !isIdent(rune(s[i+len(m)]))) {
				toks = append(toks, token{"duration", m, i})
				i += len(m)
				continue
			}
			j := i
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '.' || s[j] == 'e' || s[j] == 'E' ||
				(s[j] == '+' || s[j] == '-') && j > i && (s[j-1] == 'e' || s[j-1] == 'E')) {
				j++
			}
			toks = append(toks, token{"number", s[i:j], i})
			i = j
		case isIdent(rune(c)) && !(c >= '0' && c <= '9'):
			j := i
			for j < len(s) && isIdent(rune(s[j])) {
				j++
			}
			toks = append(toks, token{"ident", s[i:j], i})
			i = j
		default:
			matched := false
			for _, op := range ops {
				if strings.HasPrefix(s[i:], op) {
					toks = append(toks, token{op, op, i})
					i += len(op)
					matched = true
					break
				}
			}
			if !matched {
				return nil, fmt.Errorf("offset %d: unexpected character %q", i, c)
			}
		}
	}
	return append(toks, token{"eof", "", len(s)}), nil
}

func isIdent(r rune) bool { return r == '_' || r == ':' || unicode.IsLetter(r) || unicode.IsDigit(r) }

// fn is a function's signature: its argument types (the last repeated
// up to maxArgs when variadic) and its result.
type fn struct {
	args     []valueType
	optional int // trailing arguments that may be left out
	result   valueType
}

// functions are PromQL's functions the dashboard may use, with the
// signatures Prometheus's documentation gives them.
var functions = map[string]fn{
	"abs": {[]valueType{vector}, 0, vector}, "ceil": {[]valueType{vector}, 0, vector}, "floor": {[]valueType{vector}, 0, vector},
	"round": {[]valueType{vector, scalar}, 1, vector}, "sqrt": {[]valueType{vector}, 0, vector},
	"absent": {[]valueType{vector}, 0, vector}, "absent_over_time": {[]valueType{matrix}, 0, vector},
	"rate": {[]valueType{matrix}, 0, vector}, "irate": {[]valueType{matrix}, 0, vector}, "increase": {[]valueType{matrix}, 0, vector},
	"delta": {[]valueType{matrix}, 0, vector}, "idelta": {[]valueType{matrix}, 0, vector}, "deriv": {[]valueType{matrix}, 0, vector},
	"changes": {[]valueType{matrix}, 0, vector}, "resets": {[]valueType{matrix}, 0, vector},
	"predict_linear": {[]valueType{matrix, scalar}, 0, vector},
	"avg_over_time":  {[]valueType{matrix}, 0, vector}, "min_over_time": {[]valueType{matrix}, 0, vector},
	"max_over_time": {[]valueType{matrix}, 0, vector}, "sum_over_time": {[]valueType{matrix}, 0, vector},
	"count_over_time": {[]valueType{matrix}, 0, vector}, "last_over_time": {[]valueType{matrix}, 0, vector},
	"quantile_over_time": {[]valueType{scalar, matrix}, 0, vector},
	"histogram_quantile": {[]valueType{scalar, vector}, 0, vector},
	"clamp":              {[]valueType{vector, scalar, scalar}, 0, vector},
	"clamp_min":          {[]valueType{vector, scalar}, 0, vector}, "clamp_max": {[]valueType{vector, scalar}, 0, vector},
	"time": {nil, 0, scalar}, "timestamp": {[]valueType{vector}, 0, vector},
	"vector": {[]valueType{scalar}, 0, vector}, "scalar": {[]valueType{vector}, 0, scalar},
	"sort": {[]valueType{vector}, 0, vector}, "sort_desc": {[]valueType{vector}, 0, vector},
	"label_replace": {[]valueType{vector, str, str, str, str}, 0, vector},
}

// aggregations take an instant vector; some take a parameter first.
var aggregations = map[string]*valueType{
	"sum": nil, "min": nil, "max": nil, "avg": nil, "count": nil, "group": nil, "stddev": nil, "stdvar": nil,
	"topk": ptr(scalar), "bottomk": ptr(scalar), "quantile": ptr(scalar), "count_values": ptr(str),
}

func ptr(t valueType) *valueType { return &t }

// binary operators by precedence, lowest first (^ is right-associative).
var precedence = map[string]int{
	"or": 1, "and": 2, "unless": 2,
	"==": 3, "!=": 3, "<=": 3, "<": 3, ">=": 3, ">": 3,
	"+": 4, "-": 4, "*": 5, "/": 5, "%": 5, "atan2": 5, "^": 6,
}

var keywords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true,
	"group_right": true, "bool": true, "offset": true, "and": true, "or": true, "unless": true, "atan2": true}

var metricNameRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
var labelNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

type parser struct {
	toks    []token
	i       int
	metrics []string // metric names in selectors, in order
}

// parsePromQL checks expr and returns the metric names its selectors name.
func parsePromQL(expr string) ([]string, error) {
	toks, err := tokenize(expr)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	t, err := p.expr(0)
	if err != nil {
		return nil, err
	}
	if p.peek().kind != "eof" {
		return nil, p.errorf("unexpected %q after the expression", p.peek().text)
	}
	if t != vector && t != scalar {
		return nil, fmt.Errorf("the expression is a %v; a panel needs an instant vector or a scalar", t)
	}
	return p.metrics, nil
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token { t := p.toks[p.i]; p.i++; return t }

func (p *parser) errorf(format string, a ...any) error {
	return fmt.Errorf("offset %d: %s", p.peek().pos, fmt.Sprintf(format, a...))
}

func (p *parser) expect(kind string) (token, error) {
	if p.peek().kind != kind {
		return token{}, p.errorf("want %q, found %q", kind, p.peek().text)
	}
	return p.next(), nil
}

// binaryOp returns the operator at the cursor, if any.
func (p *parser) binaryOp() (string, bool) {
	t := p.peek()
	op := t.kind
	if t.kind == "ident" {
		op = t.text
	}
	_, ok := precedence[op]
	return op, ok
}

func (p *parser) expr(minPrec int) (valueType, error) {
	lhs, err := p.unary()
	if err != nil {
		return 0, err
	}
	for {
		op, ok := p.binaryOp()
		if !ok || precedence[op] < minPrec {
			return lhs, nil
		}
		p.next()
		returnBool := false
		if p.peek().kind == "ident" && p.peek().text == "bool" {
			if precedence[op] != 3 {
				return 0, p.errorf("bool after %q: only comparisons take it", op)
			}
			returnBool = true
			p.next()
		}
		matching := false
		if t := p.peek(); t.kind == "ident" && (t.text == "on" || t.text == "ignoring") {
			p.next()
			if err := p.labelList(); err != nil {
				return 0, err
			}
			matching = true
			if t := p.peek(); t.kind == "ident" && (t.text == "group_left" || t.text == "group_right") {
				p.next()
				if p.peek().kind == "(" {
					if err := p.labelList(); err != nil {
						return 0, err
					}
				}
			}
		}
		next := precedence[op] + 1
		if op == "^" {
			next = precedence[op]
		}
		rhs, err := p.expr(next)
		if err != nil {
			return 0, err
		}
		if lhs == matrix || rhs == matrix || lhs == str || rhs == str {
			return 0, p.errorf("operator %q on a %v and a %v: it takes scalars and instant vectors", op, lhs, rhs)
		}
		if precedence[op] <= 2 && (lhs != vector || rhs != vector) {
			return 0, p.errorf("set operator %q takes two instant vectors, not a %v and a %v", op, lhs, rhs)
		}
		if precedence[op] == 3 && lhs == scalar && rhs == scalar && !returnBool {
			return 0, p.errorf("comparison %q of two scalars needs bool", op)
		}
		if matching && (lhs != vector || rhs != vector) {
			return 0, p.errorf("on/ignoring after %q between a %v and a %v: vector matching needs two vectors", op, lhs, rhs)
		}
		if lhs == scalar && rhs == scalar {
			lhs = scalar
		} else {
			lhs = vector
		}
	}
}

func (p *parser) unary() (valueType, error) {
	if k := p.peek().kind; k == "-" || k == "+" {
		p.next()
		t, err := p.unary()
		if err != nil {
			return 0, err
		}
		if t != scalar && t != vector {
			return 0, p.errorf("unary %s on a %v", k, t)
		}
		return t, nil
	}
	return p.postfix()
}

func (p *parser) postfix() (valueType, error) {
	start := p.peek()
	t, err := p.primary()
	if err != nil {
		return 0, err
	}
	if p.peek().kind == "[" {
		if t != vector || !(start.kind == "ident" || start.kind == "{") || p.toks[p.i-1].kind == ")" {
			return 0, p.errorf("a range [...] follows only a metric selector (subqueries are not used here)")
		}
		p.next()
		if k := p.peek().kind; k != "duration" && k != "var" {
			return 0, p.errorf("want a duration or $__rate_interval in [...], found %q", p.peek().text)
		}
		p.next()
		if p.peek().kind == ":" {
			return 0, p.errorf("subqueries are not used here")
		}
		if _, err := p.expect("]"); err != nil {
			return 0, err
		}
		t = matrix
	}
	if p.peek().kind == "ident" && p.peek().text == "offset" {
		p.next()
		if k := p.peek().kind; k != "duration" {
			return 0, p.errorf("want a duration after offset, found %q", p.peek().text)
		}
		p.next()
	}
	if p.peek().kind == "@" {
		return 0, p.errorf("@ is not used here")
	}
	return t, nil
}

func (p *parser) primary() (valueType, error) {
	t := p.peek()
	switch t.kind {
	case "number":
		p.next()
		if _, err := fmt.Sscanf(t.text, "%g", new(float64)); err != nil || strings.Count(t.text, ".") > 1 {
			return 0, fmt.Errorf("offset %d: bad number %q", t.pos, t.text)
		}
		return scalar, nil
	case "string":
		p.next()
		return str, nil
	case "(":
		p.next()
		v, err := p.expr(0)
		if err != nil {
			return 0, err
		}
		_, err = p.expect(")")
		return v, err
	case "{":
		return vector, p.selector("")
	case "ident":
		if keywords[t.text] {
			return 0, p.errorf("unexpected keyword %q", t.text)
		}
		if param, ok := aggregations[t.text]; ok {
			return p.aggregation(param)
		}
		p.next()
		if p.peek().kind == "(" {
			f, ok := functions[t.text]
			if !ok {
				return 0, fmt.Errorf("offset %d: unknown function %q", t.pos, t.text)
			}
			return p.call(t.text, f)
		}
		if !metricNameRE.MatchString(t.text) {
			return 0, fmt.Errorf("offset %d: bad metric name %q", t.pos, t.text)
		}
		p.metrics = append(p.metrics, t.text)
		if p.peek().kind == "{" {
			return vector, p.selector(t.text)
		}
		return vector, nil
	}
	return 0, p.errorf("unexpected %q", t.text)
}

func (p *parser) call(name string, f fn) (valueType, error) {
	p.next() // (
	var got []valueType
	for p.peek().kind != ")" {
		if len(got) > 0 {
			if _, err := p.expect(","); err != nil {
				return 0, err
			}
		}
		v, err := p.expr(0)
		if err != nil {
			return 0, err
		}
		got = append(got, v)
	}
	p.next()
	if len(got) > len(f.args) || len(got) < len(f.args)-f.optional {
		return 0, p.errorf("%s takes %d arguments, not %d", name, len(f.args), len(got))
	}
	for i, v := range got {
		if v != f.args[i] {
			return 0, p.errorf("argument %d of %s is a %v; it takes a %v", i+1, name, v, f.args[i])
		}
	}
	return f.result, nil
}

func (p *parser) aggregation(param *valueType) (valueType, error) {
	name := p.next().text
	grouped := false
	if err := p.grouping(&grouped); err != nil {
		return 0, err
	}
	if _, err := p.expect("("); err != nil {
		return 0, err
	}
	if param != nil {
		v, err := p.expr(0)
		if err != nil {
			return 0, err
		}
		if v != *param {
			return 0, p.errorf("%s's parameter is a %v; it takes a %v", name, v, *param)
		}
		if _, err := p.expect(","); err != nil {
			return 0, err
		}
	}
	v, err := p.expr(0)
	if err != nil {
		return 0, err
	}
	if v != vector {
		return 0, p.errorf("%s over a %v; it takes an instant vector", name, v)
	}
	if _, err := p.expect(")"); err != nil {
		return 0, err
	}
	if err := p.grouping(&grouped); err != nil {
		return 0, err
	}
	return vector, nil
}

// grouping reads an optional by (...) or without (...), at most once per
// aggregation.
func (p *parser) grouping(seen *bool) error {
	if t := p.peek(); t.kind == "ident" && (t.text == "by" || t.text == "without") {
		if *seen {
			return p.errorf("a second %s", t.text)
		}
		*seen = true
		p.next()
		return p.labelList()
	}
	return nil
}

func (p *parser) labelList() error {
	if _, err := p.expect("("); err != nil {
		return err
	}
	for n := 0; p.peek().kind != ")"; n++ {
		if n > 0 {
			if _, err := p.expect(","); err != nil {
				return err
			}
		}
		t, err := p.expect("ident")
		if err != nil {
			return err
		}
		if !labelNameRE.MatchString(t.text) {
			return fmt.Errorf("offset %d: bad label name %q", t.pos, t.text)
		}
	}
	p.next()
	return nil
}

func (p *parser) selector(name string) error {
	p.next() // {
	matchers := 0
	for p.peek().kind != "}" {
		if matchers > 0 {
			if _, err := p.expect(","); err != nil {
				return err
			}
			if p.peek().kind == "}" {
				break
			}
		}
		l, err := p.expect("ident")
		if err != nil {
			return err
		}
		if !labelNameRE.MatchString(l.text) {
			return fmt.Errorf("offset %d: bad label name %q", l.pos, l.text)
		}
		switch p.peek().kind {
		case "=", "!=", "=~", "!~":
			op := p.next().kind
			v, err := p.expect("string")
			if err != nil {
				return err
			}
			if op == "=~" || op == "!~" {
				re := regexp.MustCompile(`\$\{?[a-zA-Z_]\w*\}?`).ReplaceAllString(v.text, ".*")
				if _, err := regexp.Compile("^(?:" + re + ")$"); err != nil {
					return fmt.Errorf("offset %d: label %s: bad regular expression %q: %v", v.pos, l.text, v.text, err)
				}
			}
		default:
			return p.errorf("want a matcher (=, !=, =~, !~) after label %s, found %q", l.text, p.peek().text)
		}
		matchers++
	}
	p.next()
	if name == "" && matchers == 0 {
		return p.errorf("a selector needs a metric name or a matcher")
	}
	return nil
}

// TestPromQLChecker: the checker takes the shapes the dashboard uses and
// refuses each mistake one edit of a query makes.
func TestPromQLChecker(t *testing.T) {
	good := map[string][]string{
		`sum by (key, strategy) (rate(idmint_ids_issued_total{job=~"$job",key=~"$key"}[$__rate_interval]))`: {"idmint_ids_issued_total"},
		`histogram_quantile(0.99, sum by (route, le) (rate(x_bucket{code="5xx"}[5m])))`:                     {"x_bucket"},
		`min by (key) ((a{k="v"} / -deriv(a[6h])) > 0) / 86400`:                                             {"a", "a"},
		`min by (key) ((b - time()) / 86400)`:                                                               {"b"},
		`count(up == 0)`:                                                                                    {"up"},
		`sum(rate(a[1m])) without (instance)`:                                                               {"a"},
		`a / on (instance) group_left (version) b`:                                                          {"a", "b"},
		`topk(3, a) or vector(1)`:                                                                           {"a"},
		`1 + 2 * 3 ^ 2`:                                                                                     nil,
		`{__name__="a"}`:                                                                                    nil,
		`changes(idmint_redis_counter_ceiling{k='v'}[5m])`:                                                  {"idmint_redis_counter_ceiling"},
		`100 * a / b`: {"a", "b"},
	}
	for e, want := range good {
		got, err := parsePromQL(e)
		if err != nil {
			t.Errorf("%s: %v", e, err)
		} else if !slices.Equal(got, want) {
			t.Errorf("%s: names %v, want %v", e, got, want)
		}
	}
	bad := []string{
		``,
		`sum(rate(a[5m])`,                 // unbalanced
		`sum(rate(a[5m])))`,               // unbalanced
		`rate(a)`,                         // instant vector where a range is wanted
		`a[5m]`,                           // a range vector as the result
		`rate(a[5])`,                      // no unit
		`rate(a[$job])`,                   // a variable that is no duration
		`rat(a[5m])`,                      // unknown function
		`sum by (key (a)`,                 // grouping not closed
		`sum by key (a)`,                  // grouping without parentheses
		`a{job=~"$job}`,                   // unterminated string
		`a{job~="x"}`,                     // bad matcher
		`a{job="x" key="y"}`,              // missing comma
		`a{job=x}`,                        // unquoted value
		`a{job=~"(x"}`,                    // bad regular expression
		`a +`,                             // dangling operator
		`a b`,                             // two expressions
		`histogram_quantile(a, b)`,        // vector where a scalar is wanted
		`histogram_quantile(0.9)`,         // too few arguments
		`1 > 2`,                           // scalar comparison without bool
		`a and 1`,                         // set operator with a scalar
		`rate(a[5m])[5m]`,                 // range of a function
		`rate(a[5m:1m])`,                  // subquery
		`topk(a)`,                         // parameter missing
		`sum(a) by (k) by (k)`,            // two groupings
		`{}`,                              // a selector with neither name nor matcher
		`label_values(idmint_ready, job)`, // a Grafana variable query, no PromQL
	}
	for _, e := range bad {
		if _, err := parsePromQL(e); err == nil {
			t.Errorf("%q parsed; it is no valid PromQL for a panel", e)
		}
	}
}
