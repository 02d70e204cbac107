package server

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The public listener holds at most max_conns connections (U10): with 2
// kept open in the middle of a request, a third client gets no answer
// until one of them closes.
func TestAttackMaxConns(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxConns = 2 })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveFixture(t, f, Listeners{HTTP: ln})
	const req = "GET /v1/keys/order/ids HTTP/1.1\r\nHost: x\r\n\r\n"
	// ask sends one request on c and returns its status line, or the error
	// when none comes within d.
	ask := func(c net.Conn, r *bufio.Reader, d time.Duration) (string, error) {
		c.SetDeadline(time.Now().Add(d))
		if _, err := io.WriteString(c, req); err != nil {
			return "", err
		}
		line, err := r.ReadString('\n')
		if err != nil {
			return "", err
		}
		// Read the rest of the answer: headers, then the bare ID.
		for {
			h, err := r.ReadString('\n')
			if err != nil {
				return "", err
			}
			if h == "\r\n" {
				break
			}
		}
		return strings.TrimSpace(line), nil
	}
	var conns []net.Conn
	var readers []*bufio.Reader
	for i := range 3 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns, readers = append(conns, c), append(readers, bufio.NewReader(c))
		if i < 2 {
			// Busy: half a request, so the connection is never idle (an
			// idle one would be closed to make room).
			if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\n"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if line, err := ask(conns[2], readers[2], 500*time.Millisecond); err == nil {
		t.Fatalf("a third connection was served (%q) while max_conns = 2 were open", line)
	}
	// The busy ones are served: finish conns[1]'s request.
	conns[1].SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(conns[1], "Host: x\r\n\r\n")
	if line, err := readers[1].ReadString('\n'); err != nil || strings.TrimSpace(line) != "HTTP/1.1 200 OK" {
		t.Fatalf("a busy connection, its request finished: %q, %v", line, err)
	}
	conns[0].Close()
	conns[2].SetDeadline(time.Now().Add(10 * time.Second))
	line, err := readers[2].ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "HTTP/1.1 200 OK" {
		t.Fatalf("after one connection closed, the waiting one got %q, %v", line, err)
	}
}

// Idle keep-alive connections do not lock the listener out: with
// max_conns = 2 held by two clients that made one request each and then
// went quiet, a third client is answered at once (one idle connection is
// closed to make room). 4,100 such connections used to hold every slot
// for idle_timeout (120 s).
func TestAttackIdleConnsLockout(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxConns = 2 })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveFixture(t, f, Listeners{HTTP: ln})
	url := "http://" + ln.Addr().String() + "/healthz"
	for i := range 2 { // two clients, each keeping its connection alive
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}} // a connection of its own
		t.Cleanup(hc.CloseIdleConnections)
		resp, err := hc.Get(url)
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	third := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := third.Get(url)
	if err != nil {
		t.Fatalf("a new client while the slots were held by idle connections: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("a new client: %d", resp.StatusCode)
	}
}

// serveFixture serves f's server on ls until the test ends, and fails the
// test when Serve does not return 30 s after that.
func serveFixture(t *testing.T, f *fixture, ls Listeners) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- f.s.Serve(ctx, ls) }()
	t.Cleanup(func() {
		stop()
		f.s.SkipDrain() // the fixture's clock is fake: nothing ends the drain period
		select {
		case <-served:
		case <-time.After(30 * time.Second):
			t.Error("Serve did not return 30 s after its context ended")
		}
	})
}
