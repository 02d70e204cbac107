// Package idtext holds the pieces of text handling that idmint's ID-format
// packages (flake128, objectid, ulid, xid, ksuid, uuid, idformat) share, so
// that each error names untrusted input and each hex digit is read the same
// way everywhere.
package idtext

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Quote renders untrusted input for an error message: Go-quoted, cut to its
// first 64 bytes followed by "..." when longer.
func Quote(s string) string {
	if len(s) > 64 {
		return fmt.Sprintf("%q...", s[:64])
	}
	return fmt.Sprintf("%q", s)
}

// Printable renders a value read from elsewhere (a coordinator's record,
// a holder name) for a terminal table: as it is when it is valid UTF-8
// without control characters, Go-quoted otherwise, so that escape
// sequences and tabs cannot retitle, clear or recolour the terminal or
// shift a table's columns.
func Printable(s string) string {
	if utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) || r == utf8.RuneError }) < 0 {
		return s
	}
	return strconv.Quote(s)
}

// Unhex returns the value of the hex digit c (either case) and whether c is
// one.
func Unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// DecodeHex fills dst from the first 2*len(dst) characters of s, hex digits
// in either case; the caller has checked the length. On a character that is
// not a hex digit it returns NotHex(syntax, s, position).
func DecodeHex(dst []byte, s string, syntax error) error {
	for i := range dst {
		hi, ok1 := Unhex(s[2*i])
		lo, ok2 := Unhex(s[2*i+1])
		if !ok1 || !ok2 {
			p := 2 * i
			if ok1 {
				p++
			}
			return NotHex(syntax, s, p)
		}
		dst[i] = hi<<4 | lo
	}
	return nil
}

// NotHex returns an error wrapping syntax that names in and the character
// at byte position pos, which is not a hex digit.
func NotHex(syntax error, in string, pos int) error {
	return fmt.Errorf("%w: %s: %q at position %d is not a hex digit", syntax, Quote(in), in[pos], pos)
}

// goPrefixes are the names of idmint's packages as their errors begin
// ("server: ", "segment: ", ...): Go's convention, and noise to a user,
// who did not call the package. Names that are also fields of the config
// or of a request ("witness: ", "stores: ", "count: ") are not among
// them: a problem names its field that way.
var goPrefixes = []string{
	"admin", "answer", "dashboard", "ff1", "flake128", "gene", "grpcapi", "idformat", "idparts",
	"instagram", "ksuid", "leaf", "monotonic", "objectid", "ordernum", "rediscounter", "redisstore",
	"segment", "server", "snowflake", "sqldb", "sqlstore", "strategies", "ticket",
	"timeid", "ulid", "uuid", "worker", "xid",
}

// UserText is an error message as a user reads it: without the Go
// package prefixes ("server: ", "strategies: ") that open it and each
// wrapped cause (after ": "). Answers and the command line pass every
// message through it at the boundary; the logs keep the full text.
func UserText(msg string) string {
	if strings.IndexByte(msg, ':') < 0 {
		return msg
	}
	var b strings.Builder
	for start := true; ; {
		if start {
			for {
				cut := false
				for _, p := range goPrefixes {
					if len(msg) > len(p)+1 && msg[len(p)] == ':' && msg[len(p)+1] == ' ' && msg[:len(p)] == p {
						msg, cut = msg[len(p)+2:], true
						break
					}
				}
				if !cut {
					break
				}
			}
		}
		i := strings.Index(msg, ": ")
		if i < 0 {
			b.WriteString(msg)
			return b.String()
		}
		b.WriteString(msg[:i+2])
		msg, start = msg[i+2:], true
	}
}

// Where a store lives, as error messages from drivers and the OS name it.
var (
	scrubURL  = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'()<>]*[^\s"'()<>:,;.]`)
	scrubIPv6 = regexp.MustCompile(`\[[0-9A-Fa-f:.]+(%[^\]]+)?\](:[0-9]+)?`)
	scrubIPv4 = regexp.MustCompile(`\b[0-9]{1,3}(\.[0-9]{1,3}){3}(:[0-9]+)?\b`)
	scrubHost = regexp.MustCompile(`(^|[\s"'(=,])[A-Za-z][A-Za-z0-9-]*(\.[A-Za-z0-9-]+)*:[0-9]{2,5}\b`)
	scrubPath = regexp.MustCompile(`(^|[\s"'(=,])(/[^\s"'()/,;:]+){2,}`)
)

// Scrub replaces what a message says of where the server's stores live
// (URLs, file paths, IP addresses and host:port) with [url], [path] and
// [address], for answers a client reads when the server cannot serve
// (503, /readyz): those are the operator's to know, and the log keeps the
// message whole.
func Scrub(msg string) string {
	if !strings.ContainsAny(msg, "/:.") {
		return msg
	}
	msg = scrubURL.ReplaceAllString(msg, "[url]")
	msg = scrubIPv6.ReplaceAllString(msg, "[address]")
	msg = scrubIPv4.ReplaceAllString(msg, "[address]")
	msg = scrubHost.ReplaceAllString(msg, "${1}[address]")
	msg = scrubPath.ReplaceAllString(msg, "${1}[path]")
	return msg
}
