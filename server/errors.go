package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idmint/idmint/server/internal/wire"
)

// Error codes of the native API's error body
// {"error":{"code":...,"message":...,"field":...}}.
const (
	CodeBadCount         = "bad_count"
	CodeBadParam         = "bad_param" // an unknown query parameter
	CodeBadPage          = "bad_page"  // limit or after of a listing
	CodeBadKey           = "bad_key"
	CodeBadLayout        = "bad_layout"
	CodeBadID            = "bad_id"
	CodeBadBody          = "bad_body"
	CodeBadStep          = "bad_step"
	CodeUnsupported      = "unsupported"
	CodeUnknownKey       = "unknown_key"
	CodeNotFound         = "not_found"
	CodeBadPath          = "bad_path"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeUnauthorized     = "unauthorized"
	CodeForbidden        = "forbidden"
	CodeConflict         = "conflict"
	CodeBodyTooLarge     = "body_too_large"
	CodeRateLimited      = "rate_limited"
	CodeUnavailable      = "unavailable"
)

// apiError is an error answer: status, code, the field it concerns, and a
// message naming the value.
type apiError struct {
	status     int
	code       string
	field      string
	msg        string
	retryAfter time.Duration
}

func (s *Server) writeError(w http.ResponseWriter, e apiError) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	if e.retryAfter <= 0 && (e.status == http.StatusTooManyRequests || e.status == http.StatusServiceUnavailable) {
		// Every 429 and 503 says when to come back (RFC 9110 10.2.3).
		e.retryAfter = time.Second
	}
	if e.retryAfter > 0 {
		secs := int64((e.retryAfter + time.Second - 1) / time.Second)
		h.Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	if e.status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="idmint"`)
	}
	w.WriteHeader(e.status)
	b := make([]byte, 0, 128+len(e.msg))
	b = append(b, `{"error":{"code":`...)
	b = wire.AppendJSONString(b, e.code)
	b = append(b, `,"message":`...)
	b = wire.AppendJSONString(b, e.msg)
	if e.field != "" {
		b = append(b, `,"field":`...)
		b = wire.AppendJSONString(b, e.field)
	}
	b = append(b, "}}\n"...)
	w.Write(b)
}

func (s *Server) writeAuthError(w http.ResponseWriter, status int) {
	if status == http.StatusUnauthorized {
		s.writeError(w, apiError{status: status, code: CodeUnauthorized, field: "Authorization", msg: "a bearer token is required: send Authorization: Bearer <token>"})
		return
	}
	s.writeError(w, apiError{status: status, code: CodeForbidden, field: "Authorization", msg: "this token may not do that (or this client may not: without admin_token only loopback clients may administer)"})
}

// issuerError maps an issuer's failure to an answer: the request's fault
// (InputError) is 400; everything else is the server refusing for now
// (clock, lease, store): 503 with Retry-After.
func issuerError(err error, key string) apiError {
	var ie *InputError
	if errors.As(err, &ie) {
		code := CodeBadCount
		if ie.Field != "count" && ie.Field != "" {
			code = "bad_" + strings.SplitN(ie.Field, ".", 2)[0]
		}
		return apiError{status: http.StatusBadRequest, code: code, field: ie.Field, msg: ie.Error()}
	}
	retry := time.Second
	var ra RetryAfter
	if errors.As(err, &ra) && ra.RetryAfter() > retry {
		retry = ra.RetryAfter()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return apiError{status: http.StatusServiceUnavailable, code: CodeUnavailable, msg: "key " + strconv.Quote(key) + ": request cancelled or timed out: " + err.Error(), retryAfter: retry}
	}
	return apiError{status: http.StatusServiceUnavailable, code: CodeUnavailable, msg: "key " + strconv.Quote(key) + ": cannot issue now: " + err.Error(), retryAfter: retry}
}
