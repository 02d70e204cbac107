package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/idmint/idmint/server/internal/wire"
)

// unknownParam returns the first query parameter of raw other than count,
// or "" when there is none: a route that reads only count refuses the rest
// (?cnt=3 must not quietly answer one ID).
func unknownParam(raw string) string {
	for raw != "" {
		var part string
		part, raw, _ = strings.Cut(raw, "&")
		if part == "" {
			continue
		}
		k, _, _ := strings.Cut(part, "=")
		if k == "count" {
			continue
		}
		if uk, err := url.QueryUnescape(k); err == nil {
			if uk == "count" {
				continue
			}
			k = uk
		}
		return k
	}
	return ""
}

// countBody is the JSON body an ID route accepts on POST.
type countBody struct {
	Count *json.Number `json:"count"`
}

// bodyCount reads the count of a POST's JSON body {"count": N}. It reports
// whether the body gave one; an empty body gives none. A body that is not
// that JSON object is an error naming what is wrong, never ignored.
func bodyCount(r *http.Request, limit int64) (string, bool, *ErrorAnswer) {
	if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return "", false, nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return "", false, &ErrorAnswer{Status: http.StatusBadRequest, Code: CodeBadBody, Field: "body", Message: "reading the body: " + err.Error()}
	}
	if int64(len(b)) > limit {
		return "", false, &ErrorAnswer{Status: http.StatusRequestEntityTooLarge, Code: CodeBodyTooLarge, Field: "body",
			Message: fmt.Sprintf("the body is larger than %d bytes (max_body_bytes)", limit)}
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return "", false, nil
	}
	var cb countBody
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&cb); err != nil || dec.More() {
		msg := `the body must be a JSON object {"count": N} or empty`
		if err != nil {
			msg += ": " + strings.TrimPrefix(err.Error(), "json: ")
		}
		return "", false, &ErrorAnswer{Status: http.StatusBadRequest, Code: CodeBadBody, Field: "body", Message: msg}
	}
	if cb.Count == nil {
		return "", false, nil
	}
	return cb.Count.String(), true, nil
}

// parseCount parses a count: absent means 1; otherwise a plain decimal
// between 1 and max (no sign, no spaces, no leading zeros beyond "0"
// itself, which is out of range anyway).
//
// limit names where max comes from, for the message.
func parseCount(raw string, max int, limit string) (int, error) {
	v, ok, err := wire.QueryValue(raw, "count")
	if err != nil {
		return 0, err
	}
	if !ok {
		return 1, nil
	}
	return countValue(v, max, limit)
}

// countValue checks one count value (see parseCount).
func countValue(v string, max int, limit string) (int, error) {
	if v == "" || len(v) > 10 {
		return 0, fmt.Errorf("count: %q is not a whole number between 1 and %d", wire.Trunc(v), max)
	}
	n := 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("count: %q is not a whole number between 1 and %d", wire.Trunc(v), max)
		}
		n = n*10 + int(c-'0')
	}
	if n < 1 || n > max {
		return 0, fmt.Errorf("count: %s is out of range: must be between 1 and %d (%s)", v, max, limit)
	}
	return n, nil
}
