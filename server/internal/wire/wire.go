// Package wire holds the small encoders and parsers every HTTP surface of
// the server shares: JSON strings written without reflection, query
// parameters read without allocating, and the header values set on every
// answer.
package wire

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"
)

// Header values shared by the answers (a slice assigned to the header map
// directly skips canonicalising the name and allocating the value).
var (
	// NoStore is Cache-Control's value on every answer: an ID, an error
	// or a view cached by a proxy would be served again.
	NoStore = []string{"no-store"}
	// TextPlain is the Content-Type of a bare decimal ID.
	TextPlain = []string{"text/plain;charset=UTF-8"}
)

// ErrDuplicateParam is returned by QueryValue when a parameter is repeated:
// the request is ambiguous, so it is refused rather than guessed.
var ErrDuplicateParam = errors.New("given more than once")

// QueryValue returns the value of the query parameter name in a raw query
// string, unescaped, without allocating when it needs no unescaping. It
// reports whether the parameter was present.
func QueryValue(raw, name string) (string, bool, error) {
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
			return "", true, fmt.Errorf("%s: %w", name, ErrDuplicateParam)
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

// AppendJSONString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD.
func AppendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < 0x80 {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20 || c == 0x7f:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			case c == '<' || c == '>' || c == '&':
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == 0xfffd && size == 1 {
			b = append(b, "\ufffd"...)
		} else if r == 0x2028 || r == 0x2029 {
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// Trunc shortens a value echoed in an error message.
func Trunc(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
