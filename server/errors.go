package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idmint/idmint/internal/idtext"
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
	CodeCancelled        = "cancelled" // 499: the client gave up (StatusClientClosed)
)

// ErrorAnswer is a refusal as the core answers it: an HTTP status, the
// error body's code, the field it concerns, a message naming the value,
// and when to come back. A surface with a wire format of its own (gRPC)
// translates it.
type ErrorAnswer struct {
	Status     int
	Code       string
	Field      string
	Message    string
	RetryAfter time.Duration
}

// WriteError answers e in the native API's error body
// {"error":{"code":...,"message":...,"field":...}}; every 429 and 503
// says when to come back (Retry-After, 1 s at least). The message loses
// its Go package prefixes (idtext.UserText), and a 5xx's message the
// paths, URLs and addresses of the stores behind it (idtext.Scrub; the
// log has them).
func (s *Server) WriteError(w http.ResponseWriter, e ErrorAnswer) {
	e.Message = idtext.UserText(e.Message)
	if e.Status >= 500 {
		e.Message = idtext.Scrub(e.Message)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	if e.RetryAfter <= 0 && (e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable) {
		// Every 429 and 503 says when to come back (RFC 9110 10.2.3).
		e.RetryAfter = time.Second
	}
	if e.RetryAfter > 0 {
		secs := int64((e.RetryAfter + time.Second - 1) / time.Second)
		h.Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	if e.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="idmint"`)
	}
	w.WriteHeader(e.Status)
	b := make([]byte, 0, 128+len(e.Message))
	b = append(b, `{"error":{"code":`...)
	b = wire.AppendJSONString(b, e.Code)
	b = append(b, `,"message":`...)
	b = wire.AppendJSONString(b, e.Message)
	if e.Field != "" {
		b = append(b, `,"field":`...)
		b = wire.AppendJSONString(b, e.Field)
	}
	b = append(b, "}}\n"...)
	w.Write(b)
}

// WriteAuthError answers a failed Key.Authorize (401 or 403) in the native
// API's error body.
func (s *Server) WriteAuthError(w http.ResponseWriter, status int) {
	if status == http.StatusUnauthorized {
		s.WriteError(w, ErrorAnswer{Status: status, Code: CodeUnauthorized, Field: "Authorization", Message: "a bearer token is required: send Authorization: Bearer <token>"})
		return
	}
	s.WriteError(w, ErrorAnswer{Status: status, Code: CodeForbidden, Field: "Authorization", Message: "this token may not do that (or this client may not: without admin_token only loopback clients may administer)"})
}

// issuerError maps an issuer's failure to an answer: the request's fault
// (InputError) is 400; everything else is the server refusing for now
// (clock, lease, store): 503 with Retry-After.
func issuerError(err error, key string) ErrorAnswer {
	var ie *InputError
	if errors.As(err, &ie) {
		code := CodeBadCount
		if ie.Field != "count" && ie.Field != "" {
			code = "bad_" + strings.SplitN(ie.Field, ".", 2)[0]
		}
		return ErrorAnswer{Status: http.StatusBadRequest, Code: code, Field: ie.Field, Message: ie.Error()}
	}
	retry := time.Second
	var ra RetryAfter
	if errors.As(err, &ra) && ra.RetryAfter() > retry {
		retry = ra.RetryAfter()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return ErrorAnswer{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "key " + strconv.Quote(key) + ": request cancelled or timed out: " + err.Error(), RetryAfter: retry}
	}
	return ErrorAnswer{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "key " + strconv.Quote(key) + ": cannot issue now: " + err.Error(), RetryAfter: retry}
}
