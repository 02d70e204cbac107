package client

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Sentinel errors. Test for them with errors.Is.
var (
	// ErrUnavailable wraps every failure to get IDs because no endpoint
	// answered in time: all down, all refusing (503, 429), all too slow.
	ErrUnavailable = errors.New("client: no endpoint could issue")
	// ErrBadKey is returned for a key name the servers would refuse.
	ErrBadKey = errors.New("client: bad key")
	// ErrNoRanges is returned by Range for a key that does not hand out
	// contiguous ranges (snowflake, ticket, monotonic keys).
	ErrNoRanges = errors.New("client: key has no contiguous ranges")
	// ErrTextKey is returned by Next, NextN and Range for a key whose IDs
	// are text (UUID family, order numbers), not int64.
	ErrTextKey = errors.New("client: key issues text IDs")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("client: closed")
)

// Error is one endpoint's failure. Retryable says whether another endpoint,
// or the same one later, may succeed: true for network failures, timeouts,
// 5xx, 429 and malformed answers; false for 400, 401, 403 and an unknown
// key, which the client returns to the caller at once.
type Error struct {
	Endpoint   string
	Status     int    // HTTP status, or the gRPC code's HTTP equivalent; 0 for network errors
	Code       string // the server's error code ("unknown_key", "bad_count", ...), if any
	Field      string // the request field the server names, if any
	Message    string
	RetryAfter time.Duration // from Retry-After, 0 if none
	Retryable  bool
	Err        error // the underlying error, if any
}

func (e *Error) Error() string {
	s := "client: " + e.Endpoint + ": "
	if e.Status != 0 {
		s += strconv.Itoa(e.Status) + " "
	}
	if e.Code != "" {
		s += e.Code + ": "
	}
	s += e.Message
	if e.Field != "" && e.Status >= 400 && e.Status < 500 {
		s += " (field " + e.Field + ")"
	}
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(" (retry after %v)", e.RetryAfter)
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// retryable reports whether err may succeed elsewhere or later.
func retryable(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.Retryable
	}
	return errors.Is(err, ErrUnavailable)
}

// unavailable is a failure of every endpoint tried; retryAt (client
// monotonic time) is when the next endpoint's backoff ends.
type unavailable struct {
	last    error
	tried   int
	retryAt time.Duration
}

func (u *unavailable) Error() string {
	if u.tried == 0 {
		if u.last == nil {
			return ErrUnavailable.Error() + ": every endpoint is backing off after failures"
		}
		return fmt.Sprintf("%s: every endpoint is backing off after failures; last failure: %v", ErrUnavailable, u.last)
	}
	return fmt.Sprintf("%s: %d endpoint(s) tried; last failure: %v", ErrUnavailable, u.tried, u.last)
}

func (u *unavailable) Unwrap() []error { return []error{ErrUnavailable, u.last} }
