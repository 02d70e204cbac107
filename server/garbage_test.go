package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/idmint/idmint/server/internal/wire"
)

// liveServer serves f's handler on a real loopback listener with the
// server's own timeouts (a short ReadHeaderTimeout, so the slow-header case
// ends quickly).
func liveServer(t *testing.T) (string, *fixture) {
	t.Helper()
	f := newFixture(t, func(c *Config) { c.ReadHeaderTimeout = Duration(300 * time.Millisecond) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := f.s.HTTPServer(f.h)
	hs.ErrorLog = slog.NewLogLogger(slog.New(slog.NewTextHandler(io.Discard, nil)).Handler(), slog.LevelDebug)
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String(), f
}

// raw sends bytes on a fresh connection and returns the status line, or ""
// when the server closed the connection without one.
func raw(t *testing.T, addr, payload string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, payload); err != nil {
		return ""
	}
	c.(*net.TCPConn).CloseWrite() // a lying Content-Length meets EOF, not a wait
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return ""
	}
	return strings.TrimSpace(line)
}

func TestGarbageClients(t *testing.T) {
	addr, _ := liveServer(t)
	healthy := func() {
		t.Helper()
		resp, err := http.Get("http://" + addr + "/v1/keys/order/ids")
		if err != nil {
			t.Fatalf("a good client is not served: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("a good client got %d %s", resp.StatusCode, b)
		}
	}

	// A slow-header client holds a connection open, trickling bytes;
	// others are served meanwhile, and the server hangs up on it.
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	io.WriteString(slow, "GET /v1/keys/order/ids HTTP/1.1\r\nHost: x\r\n")
	healthy()

	cases := []struct {
		name, payload string
		want          []string // acceptable status codes ("" = closed)
	}{
		{"garbage request line", "HELLO THERE\r\n\r\n", []string{"400"}},
		{"binary noise", "\x00\x01\x02\xff\xfe\r\n\r\n", []string{"400", ""}},
		{"bad escape in path", "GET /v1/keys/%zz/ids HTTP/1.1\r\nHost: x\r\n\r\n", []string{"400"}},
		{"dot-dot path", "GET /../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n", []string{"400", "404"}},
		{"empty key", "GET /v1/snowflake/ HTTP/1.1\r\nHost: x\r\n\r\n", []string{"404"}},
		{"double slash", "GET /v1/keys//ids HTTP/1.1\r\nHost: x\r\n\r\n", []string{"301", "400", "404"}},
		{"invalid UTF-8 key", "GET /v1/keys/%ff%fe%fd/ids HTTP/1.1\r\nHost: x\r\n\r\n", []string{"400"}},
		{"raw invalid UTF-8 key", "GET /v1/keys/\xff\xfe/ids HTTP/1.1\r\nHost: x\r\n\r\n", []string{"400"}},
		{"huge count", "GET /v1/keys/order/ids?count=99999999999999999999999 HTTP/1.1\r\nHost: x\r\n\r\n", []string{"400"}},
		{"count over max", "GET /v1/keys/order/ids?count=10001 HTTP/1.1\r\nHost: x\r\n\r\n", []string{"400"}},
		{"negative count", "GET /v1/keys/order/range?count=-5 HTTP/1.1\r\nHost: x\r\n\r\n", []string{"400"}},
		{"wrong method", "DELETE /v1/keys/order/ids HTTP/1.1\r\nHost: x\r\n\r\n", []string{"405"}},
		{"made-up method", "BREW /v1/keys/order/ids HTTP/1.1\r\nHost: x\r\n\r\n", []string{"405"}},
		{"oversized body", "POST /v1/keys/order/ids HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{\"count\":\"" + strings.Repeat("1", 100000), []string{"413", ""}},
		{"lying content length", "POST /v1/keys/order/ids HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{}", []string{"400", ""}},
		{"huge header", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", 70000) + "\r\n\r\n", []string{"431", "400", ""}},
		{"no host", "GET /healthz HTTP/1.1\r\n\r\n", []string{"400"}},
	}
	for _, c := range cases {
		got := raw(t, addr, c.payload)
		code := ""
		if f := strings.Fields(got); len(f) >= 2 {
			code = f[1]
		}
		ok := false
		for _, w := range c.want {
			ok = ok || w == code
		}
		if !ok {
			t.Errorf("%s: got %q, want one of %q", c.name, got, c.want)
		}
		healthy()
	}

	// By now the slow client has been cut off (ReadHeaderTimeout 300 ms).
	slow.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 512)
	n, err := slow.Read(buf)
	if err == nil && !strings.Contains(string(buf[:n]), "408") {
		t.Fatalf("slow-header client got %q, want a closed connection or 408", buf[:n])
	}
	healthy()
}

// FuzzQueryValue checks the query scanner never panics and agrees with
// net/url on single, well-formed parameters.
func FuzzQueryValue(f *testing.F) {
	for _, s := range []string{"count=5", "count=1&count=2", "a=b&count=%31%32", "count", "count=+", "&&count=x&", "c%6funt=3", "count=%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, ok, err := wire.QueryValue(raw, "count")
		if err != nil {
			return
		}
		q, perr := url.ParseQuery(raw)
		if perr == nil && len(q["count"]) == 1 && (!ok || v != q["count"][0]) {
			t.Fatalf("wire.QueryValue(%q) = %q, %v; net/url says %q", raw, v, ok, q["count"][0])
		}
	})
}

// FuzzParseCount checks that any accepted count is within [1, max].
func FuzzParseCount(f *testing.F) {
	for _, s := range []string{"count=1", "count=10000", "count=0", "count=-1", "count=1e3", "count=٣", "count=00000000001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		n, err := parseCount(raw, 10000, "max_count")
		if err == nil && (n < 1 || n > 10000) {
			t.Fatalf("parseCount(%q) = %d", raw, n)
		}
		if err != nil && !utf8.ValidString(err.Error()) && utf8.ValidString(raw) {
			t.Fatalf("error message is not UTF-8: %q", err)
		}
	})
}

// FuzzCheckName checks that accepted names are valid UTF-8 of bounded
// length, and round-trip through the JSON string encoder.
func FuzzCheckName(f *testing.F) {
	for _, s := range []string{"order", "订单", "a.b:c-d_e", "-x", "", "\xff", "a b", strings.Repeat("k", 129)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if CheckName(s) != nil {
			return
		}
		if !utf8.ValidString(s) || len(s) == 0 || len(s) > MaxNameLen {
			t.Fatalf("CheckName accepted %q", s)
		}
		if got := string(wire.AppendJSONString(nil, s)); got != fmt.Sprintf("%q", s) && strings.ContainsAny(s, "\"\\") {
			t.Fatalf("wire.AppendJSONString(%q) = %s", s, got)
		}
	})
}

// FuzzRequest throws arbitrary methods, paths and queries at the whole
// handler: nothing panics, every non-Leaf answer below 500 carries a JSON
// error body when it is an error, and no state-changing call succeeds
// without a body.
func FuzzRequest(f *testing.F) {
	for _, s := range [][3]string{
		{"GET", "/v1/keys/order/ids", "count=3"},
		{"GET", "/api/segment/get/order", ""},
		{"POST", "/v1/keys", ""},
		{"PATCH", "/v1/keys/order", ""},
		{"GET", "/v1/decode/123", "layout=plain"},
		{"GET", "/decodeSnowflakeId", "snowflakeId=-9223372036854775808"},
		{"GET", "/v1/keys/\xff/range", "count=\x00"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	fx := newFixture(f, nil)
	f.Fuzz(func(t *testing.T, method, path, query string) {
		if method == "" || strings.ContainsAny(method, " \t\r\n") {
			return
		}
		r := &http.Request{Method: method, URL: &url.URL{Path: "/" + strings.TrimPrefix(path, "/"), RawQuery: query},
			Header: http.Header{}, RemoteAddr: "127.0.0.1:1", Body: http.NoBody, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
		r = r.WithContext(context.Background())
		w := &recorder{h: http.Header{}}
		fx.h.ServeHTTP(w, r)
		if w.code == 0 {
			w.code = 200
		}
		leaf := strings.HasPrefix(r.URL.Path, "/api/")
		if w.code >= 500 && !leaf {
			t.Fatalf("%s %s?%s: %d %s", method, r.URL.Path, query, w.code, w.body.String())
		}
		if (method == "POST" && r.URL.Path == "/v1/keys" && w.code < 300) || (method == "DELETE" && w.code < 300) {
			t.Fatalf("%s %s succeeded without a body: %d", method, r.URL.Path, w.code)
		}
	})
}

type recorder struct {
	h    http.Header
	code int
	body strings.Builder
}

func (r *recorder) Header() http.Header { return r.h }
func (r *recorder) WriteHeader(c int) {
	if r.code == 0 {
		r.code = c
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = 200
	}
	return r.body.Write(b)
}
