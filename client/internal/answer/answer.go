// Package answer holds what the client's transports share in reading an
// endpoint's answers: the mark of a malformed one and the reading of a
// Retry-After value.
package answer

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ErrMalformed is the Err of a client.Error for an answer that could not
// be read or did not match the request.
var ErrMalformed = errors.New("malformed answer")

// RetryAfter reads a Retry-After value: delay-seconds or an HTTP-date
// (RFC 9110 section 10.2.3), at most an hour. Anything else is 0.
func RetryAfter(v string, now func() time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(min(s, 3600)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now()); d > 0 {
			return min(d, time.Hour)
		}
	}
	return 0
}
