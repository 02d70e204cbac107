package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// httpConn is a minimal HTTP/1.1 keep-alive client for one connection:
// it writes one prebuilt GET and reads the answer (Content-Length or
// chunked). A load generator beside the server on 2 cores must cost less
// CPU than the server; net/http's client (a goroutine pair per connection,
// header maps, a pool) costs more than idmint's handler does.
type httpConn struct {
	addr    string
	req     []byte
	conn    net.Conn
	br      *bufio.Reader
	body    []byte
	timeout time.Duration
}

func newHTTPConn(addr, path, token string) *httpConn {
	req := "GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nUser-Agent: idmint-bench\r\n"
	if token != "" {
		req += "Authorization: Bearer " + token + "\r\n"
	}
	req += "\r\n"
	return &httpConn{addr: addr, req: []byte(req), timeout: 10 * time.Second}
}

func (c *httpConn) close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}

// get sends the request and returns the status and body (valid until the
// next call). Any failure closes the connection; the next call redials.
func (c *httpConn) get(ctx context.Context) (int, []byte, error) {
	if c.conn == nil {
		d := net.Dialer{Timeout: c.timeout}
		conn, err := d.DialContext(ctx, "tcp", c.addr)
		if err != nil {
			return 0, nil, err
		}
		c.conn = conn
		c.br = bufio.NewReaderSize(conn, 32<<10)
	}
	st, body, keep, err := c.roundTrip(ctx)
	if err != nil || !keep {
		c.close()
	}
	return st, body, err
}

func (c *httpConn) roundTrip(ctx context.Context) (status int, body []byte, keep bool, err error) {
	dl := time.Now().Add(c.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	c.conn.SetDeadline(dl)
	if _, err := c.conn.Write(c.req); err != nil {
		return 0, nil, false, err
	}
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return 0, nil, false, err
	}
	// "HTTP/1.1 200 OK\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, nil, false, fmt.Errorf("bad status line %q", trimLine(line))
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, nil, false, fmt.Errorf("bad status line %q", trimLine(line))
	}
	length, chunked, keep := -1, false, true
	for {
		h, err := c.br.ReadSlice('\n')
		if err != nil {
			return 0, nil, false, err
		}
		h = trimLine(h)
		if len(h) == 0 {
			break
		}
		k, v, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			continue
		}
		v = bytes.TrimSpace(v)
		switch {
		case bytes.EqualFold(k, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(v)); err != nil || length < 0 {
				return 0, nil, false, fmt.Errorf("bad Content-Length %q", v)
			}
		case bytes.EqualFold(k, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(v, []byte("chunked"))
		case bytes.EqualFold(k, []byte("Connection")):
			keep = !bytes.EqualFold(v, []byte("close"))
		}
	}
	c.body = c.body[:0]
	switch {
	case chunked:
		for {
			l, err := c.br.ReadSlice('\n')
			if err != nil {
				return 0, nil, false, err
			}
			l, _, _ = bytes.Cut(trimLine(l), []byte(";"))
			n, err := strconv.ParseInt(string(l), 16, 32)
			if err != nil || n < 0 {
				return 0, nil, false, fmt.Errorf("bad chunk size %q", l)
			}
			if n == 0 {
				for { // trailers up to the blank line
					t, err := c.br.ReadSlice('\n')
					if err != nil {
						return 0, nil, false, err
					}
					if len(trimLine(t)) == 0 {
						break
					}
				}
				break
			}
			if c.body, err = readN(c.br, c.body, int(n)); err != nil {
				return 0, nil, false, err
			}
			if _, err := c.br.Discard(2); err != nil {
				return 0, nil, false, err
			}
		}
	case length >= 0:
		if c.body, err = readN(c.br, c.body, length); err != nil {
			return 0, nil, false, err
		}
	default:
		// No length: the body runs to the end of the connection.
		rest, err := io.ReadAll(c.br)
		if err != nil {
			return 0, nil, false, err
		}
		c.body = append(c.body, rest...)
		keep = false
	}
	return status, c.body, keep, nil
}

func readN(r *bufio.Reader, b []byte, n int) ([]byte, error) {
	off := len(b)
	b = append(b, make([]byte, n)...)
	_, err := io.ReadFull(r, b[off:])
	return b, err
}

func trimLine(b []byte) []byte {
	return bytes.TrimRight(b, "\r\n")
}

// httpRoute is how a route's path is built and its answer read.
type httpRoute struct {
	name  string
	path  func(key string, count int) string
	parse func(body []byte, dst []int64) (int, error) // IDs into dst
	batch bool                                        // takes count=
}

var httpRoutes = []httpRoute{
	{name: "ids", batch: true, parse: parseIDsJSON,
		path: func(k string, n int) string { return "/v1/keys/" + k + "/ids?count=" + strconv.Itoa(n) }},
	{name: "snowflake", batch: true, parse: parseIDsJSON,
		path: func(k string, n int) string { return "/v1/snowflake/" + k + "?count=" + strconv.Itoa(n) }},
	{name: "range", batch: true, parse: parseRangeJSON,
		path: func(k string, n int) string { return "/v1/keys/" + k + "/range?count=" + strconv.Itoa(n) }},
	{name: "leaf-segment", parse: parseBareID,
		path: func(k string, _ int) string { return "/api/segment/get/" + k }},
	{name: "leaf-snowflake", parse: parseBareID,
		path: func(k string, _ int) string { return "/api/snowflake/get/" + k }},
}

func lookupRoute(name string) (httpRoute, bool) {
	for _, r := range httpRoutes {
		if r.name == name {
			return r, true
		}
	}
	return httpRoute{}, false
}

func routeNames() []string {
	var s []string
	for _, r := range httpRoutes {
		s = append(s, r.name)
	}
	return s
}

var errShort = errors.New("answer holds fewer IDs than asked for")

func parseBareID(body []byte, dst []int64) (int, error) {
	id, err := strconv.ParseInt(string(bytes.TrimSpace(body)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("answer %q is not an ID", trunc(body))
	}
	if len(dst) < 1 {
		return 0, errShort
	}
	dst[0] = id
	return 1, nil
}

// parseIDsJSON reads {"...","ids":["1","2",...]} without a JSON decoder:
// the IDs are the quoted integers after "ids":[.
func parseIDsJSON(body []byte, dst []int64) (int, error) {
	i := bytes.Index(body, []byte(`"ids":[`))
	if i < 0 {
		return 0, fmt.Errorf("answer has no \"ids\": %q", trunc(body))
	}
	b := body[i+7:]
	n := 0
	for len(b) > 0 && b[0] != ']' {
		if b[0] == ',' {
			b = b[1:]
			continue
		}
		if b[0] != '"' {
			return n, fmt.Errorf("ids holds a non-numeric ID (text keys cannot be checked): %q", trunc(body))
		}
		end := bytes.IndexByte(b[1:], '"')
		if end < 0 {
			return n, fmt.Errorf("unterminated ID in %q", trunc(body))
		}
		id, ok := atoi64(b[1 : 1+end])
		if !ok {
			return n, fmt.Errorf("ID %q is not numeric (text keys cannot be checked)", b[1:1+end])
		}
		if n >= len(dst) {
			return n, fmt.Errorf("answer holds more IDs than the %d asked for", len(dst))
		}
		dst[n] = id
		n++
		b = b[2+end:]
	}
	return n, nil
}

// atoi64 parses a non-negative decimal int64 (IDs are never negative)
// without strconv's string conversion: the cost of reading an answer
// should be a good client's, not a generic parser's.
func atoi64(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if v > math.MaxInt64 {
		return 0, false
	}
	return int64(v), true
}

// parseRangeJSON reads {"key":..,"first":"F","last":"L","count":N} and
// expands the block into dst.
func parseRangeJSON(body []byte, dst []int64) (int, error) {
	field := func(name string) (int64, error) {
		i := bytes.Index(body, []byte(`"`+name+`":`))
		if i < 0 {
			return 0, fmt.Errorf("answer has no %q: %q", name, trunc(body))
		}
		b := bytes.TrimLeft(body[i+len(name)+3:], `"`)
		j := 0
		for j < len(b) && (b[j] == '-' || (b[j] >= '0' && b[j] <= '9')) {
			j++
		}
		return strconv.ParseInt(string(b[:j]), 10, 64)
	}
	first, err := field("first")
	if err != nil {
		return 0, err
	}
	last, err := field("last")
	if err != nil {
		return 0, err
	}
	if last < first || last-first >= int64(len(dst)) {
		return 0, fmt.Errorf("range [%d, %d] does not fit the %d asked for", first, last, len(dst))
	}
	n := int(last - first + 1)
	for i := range n {
		dst[i] = first + int64(i)
	}
	return n, nil
}

func trunc(b []byte) string {
	if len(b) > 120 {
		return string(b[:120]) + "..."
	}
	return string(b)
}

// httpOp is one worker's op on one connection.
//
// The answer is always decoded into IDs, as any client must, so HTTP and
// gRPC (whose client always decodes) are compared doing the same work.
func httpOp(c *httpConn, r httpRoute, count int) op {
	scratch := make([]int64, count)
	return func(ctx context.Context, dst []int64) (int, error) {
		if dst == nil {
			dst = scratch
		}
		st, body, err := c.get(ctx)
		if err != nil {
			return 0, err
		}
		if st != http.StatusOK {
			return 0, fmt.Errorf("status %d: %s", st, trunc(bytes.TrimSpace(body)))
		}
		n, err := r.parse(body, dst)
		if err == nil && r.name != "range" && n != count {
			err = fmt.Errorf("%w: %d of %d", errShort, n, count)
		}
		return n, err
	}
}

// The floor: a bare net/http server that answers every GET with the next
// number of one atomic counter as text, the least any ID route can do.
// Single-ID routes are compared with it. It runs as a child process
// (`idmint bench --floor-server`), as idmint serve runs beside the load
// generator, so both compete with it for the cores the same way.

// floorHandler is the floor's whole server.
func floorHandler() http.Handler {
	var n atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b [20]byte
		w.Header()["Content-Type"] = []string{"text/plain; charset=utf-8"}
		w.Write(strconv.AppendInt(b[:0], n.Add(1), 10))
	})
}

// serveFloor is the child: it listens on a free loopback port, prints the
// address, and serves until its standard input closes (the parent exited).
func serveFloor(e *env) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("floor server: %w", err)
	}
	srv := &http.Server{Handler: floorHandler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	fmt.Fprintln(e.stdout, ln.Addr().String())
	io.Copy(io.Discard, e.stdin)
	return srv.Close()
}

type floorServer struct {
	addr  string
	cpu   cpuReader // the floor process's CPU seconds
	close func()
}

// startFloor starts the floor; tests replace it with one in their process
// (a test binary cannot be run as `idmint bench --floor-server`).
var startFloor = startFloorChild

// startFloorChild starts this executable as the floor's child process.
func startFloorChild(ctx context.Context) (*floorServer, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("floor server: %w", err)
	}
	cmd := exec.Command(exe, "bench", "--floor-server")
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("floor server: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("floor server: %w", err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("floor server: %w", err)
	}
	f := &floorServer{cpu: procCPU(cmd.Process.Pid), close: func() { stopFloor(cmd, in) }}
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(out).ReadString('\n')
		line <- strings.TrimSpace(l)
	}()
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case f.addr = <-line:
	case <-t.C:
	case <-ctx.Done():
	}
	if _, _, err := net.SplitHostPort(f.addr); err != nil {
		f.close()
		return nil, fmt.Errorf("floor server: %s did not print its address within 10s (got %q)", exe, f.addr)
	}
	return f, nil
}

// stopFloor closes the child's standard input (it exits) and kills it if
// it has not exited 2 s later.
func stopFloor(cmd *exec.Cmd, stdin io.Closer) {
	stdin.Close()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t := time.NewTimer(2 * time.Second)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		cmd.Process.Kill()
		<-done
	}
}
