// Package numfmt formats numbers for people to read: the CLI's tables and
// the server's HTML views.
package numfmt

import (
	"strconv"
	"strings"
)

// Group writes n with a comma between every three digits
// (-1234567 -> "-1,234,567").
func Group(n int64) string { return GroupDecimal(strconv.FormatInt(n, 10)) }

// GroupDecimal puts a comma between every three digits of s, a decimal
// integer with an optional leading '-'.
func GroupDecimal(s string) string {
	digits := strings.TrimPrefix(s, "-")
	var b strings.Builder
	b.Grow(len(s) + len(digits)/3)
	if len(digits) < len(s) {
		b.WriteByte('-')
	}
	for i := 0; i < len(digits); i++ {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteByte(digits[i])
	}
	return b.String()
}
