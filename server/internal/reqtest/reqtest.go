// Package reqtest sends one request to a handler as a loopback client
// does and reads the answer, for the tests of the server and of its
// surfaces alike (it imports neither).
package reqtest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Req is one request: GET unless Method says otherwise, from
// 127.0.0.1:40000 unless Remote does, addressed to 127.0.0.1:8080 unless
// Hdr names a Host.
type Req struct {
	Method, Target, Body string
	Hdr                  map[string]string
	Remote               string
}

// Do serves r on h as a loopback client sends it (a Body goes as JSON)
// and returns the answer.
func Do(h http.Handler, r Req) *httptest.ResponseRecorder {
	if r.Method == "" {
		r.Method = http.MethodGet
	}
	var body io.Reader
	if r.Body != "" {
		body = strings.NewReader(r.Body)
	}
	hr := httptest.NewRequest(r.Method, r.Target, body)
	hr.RemoteAddr = "127.0.0.1:40000"
	if r.Remote != "" {
		hr.RemoteAddr = r.Remote
	}
	hr.Host = "127.0.0.1:8080"
	if r.Body != "" {
		hr.Header.Set("Content-Type", "application/json")
	}
	for k, v := range r.Hdr {
		if k == "Host" {
			hr.Host = v
			continue
		}
		hr.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, hr)
	return w
}

// Bearer is the header sending tok.
func Bearer(tok string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + tok}
}

// WantError checks an answer in the native API's error body: its status,
// code and field, and that it has a message.
func WantError(t testing.TB, w *httptest.ResponseRecorder, status int, code, field string) {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status = %d, want %d; body %s", w.Code, status, w.Body)
	}
	var e struct {
		Error struct{ Code, Message, Field string } `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("error body is not JSON: %v: %s", err, w.Body)
	}
	if e.Error.Code != code || e.Error.Field != field || e.Error.Message == "" {
		t.Fatalf("error = %+v, want code %q field %q and a message", e.Error, code, field)
	}
}

var digits = regexp.MustCompile(`[0-9]+`)

// Shape is an answer with the numbers in its body replaced by N and
// without its Date: two answers to the same request on two paths through
// the server (a fast path and the mux) have the same Shape.
func Shape(rec *httptest.ResponseRecorder) string {
	h := rec.Header().Clone()
	h.Del("Date")
	var b strings.Builder
	h.Write(&b)
	return rec.Result().Status + "\n" + b.String() + digits.ReplaceAllString(rec.Body.String(), "N")
}

// Within runs f and fails the test when it has not returned after d.
func Within(t testing.TB, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not finish within %v", what, d)
	}
}

// Drew is what each key issued between two snapshots of issued counts
// (keys that issued nothing left out): two paths serving one request the
// same way draw the same IDs from the same keys.
func Drew(before, after map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for name, n := range after {
		if d := n - before[name]; d != 0 {
			out[name] = d
		}
	}
	return out
}
