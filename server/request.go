package server

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// errDuplicateParam is returned by queryValue when a parameter is repeated:
// the request is ambiguous, so it is refused rather than guessed.
var errDuplicateParam = errors.New("given more than once")

// queryValue returns the value of the query parameter name in a raw query
// string, unescaped, without allocating when it needs no unescaping. It
// reports whether the parameter was present.
func queryValue(raw, name string) (string, bool, error) {
	var val string
	found := false
	for raw != "" {
		var part string
		part, raw, _ = strings.Cut(raw, "&")
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		if strings.ContainsAny(k, "%+") {
			uk, err := url.QueryUnescape(k)
			if err != nil {
				continue
			}
			k = uk
		}
		if k != name {
			continue
		}
		if found {
			return "", true, fmt.Errorf("%s: %w", name, errDuplicateParam)
		}
		found = true
		if strings.ContainsAny(v, "%+") {
			uv, err := url.QueryUnescape(v)
			if err != nil {
				return "", true, fmt.Errorf("%s: %q is not valid URL encoding", name, v)
			}
			v = uv
		}
		val = v
	}
	return val, found, nil
}

// parseCount parses a count: absent means 1; otherwise a plain decimal
// between 1 and max (no sign, no spaces, no leading zeros beyond "0"
// itself, which is out of range anyway).
func parseCount(raw string, max int) (int, error) {
	v, ok, err := queryValue(raw, "count")
	if err != nil {
		return 0, err
	}
	if !ok {
		return 1, nil
	}
	if v == "" || len(v) > 10 {
		return 0, fmt.Errorf("count: %q is not a whole number between 1 and %d", trunc(v), max)
	}
	n := 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("count: %q is not a whole number between 1 and %d", trunc(v), max)
		}
		n = n*10 + int(c-'0')
	}
	if n < 1 || n > max {
		return 0, fmt.Errorf("count: %s is out of range: must be between 1 and %d (max_count)", v, max)
	}
	return n, nil
}

// trunc shortens a value echoed in an error message.
func trunc(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// parseLeafID parses Leaf's snowflakeId parameter as Java's Long.parseLong
// would: an optional sign and decimal digits, within int64.
func parseLeafID(s string) (int64, error) {
	return strconv.ParseInt(s, 10, 64)
}
