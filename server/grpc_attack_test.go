package server

import (
	"bytes"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// heapInUse returns the heap in use after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// The gRPC listener Serve uses holds at most n connections at once.
func TestAttackLimitListener(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newLimitListener(ln, 2)
	defer l.Close()
	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	var clients []net.Conn
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	var got []net.Conn
	for len(got) < 2 {
		select {
		case c := <-accepted:
			got = append(got, c)
		case <-time.After(5 * time.Second):
			t.Fatalf("accepted %d of the first 2 connections", len(got))
		}
	}
	select {
	case <-accepted:
		t.Fatal("a third connection was accepted while two were open")
	case <-time.After(100 * time.Millisecond):
	}
	got[0].Close()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the third connection was not accepted after one closed")
	}
	got[1].Close()
}

// A connection that sends only the HTTP/2 client preface and then nothing
// held a gRPC connection slot for grpc-go's 120 s handshake deadline:
// 1,030 of them locked every real client out for two minutes. The server
// now drops it after read_header_timeout (here 1 s).
func TestAttackGRPCHalfOpen(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.ReadHeaderTimeout = Duration(time.Second) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := f.s.GRPCServer()
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"); err != nil { // the preface, no SETTINGS
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	start := time.Now()
	_, err = io.Copy(io.Discard, c) // the server's SETTINGS, then EOF when it drops us
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("a half-open connection was still held after %v", time.Since(start).Round(time.Second))
	}
}

// A call's header block is bounded before any token is read: a client
// sending an unfinished block (HEADERS, then CONTINUATION frames without
// END_HEADERS) has its connection closed with GOAWAY once the block passes
// GRPCMaxHeaderListSize, instead of the server buffering up to grpc-go's
// 16 MiB per connection (20 such connections took a server from 70 to
// 207 MB and held it).
func TestAttackGRPCHeaderListBounded(t *testing.T) {
	f := newFixture(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := f.s.GRPCServer()
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	// One header field whose value never ends, 16 KiB a frame (the
	// default maximum frame size), up to 1 MiB: 64 times the limit.
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, hf := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: "/idmint.v1.IDs/Next"}, {Name: ":authority", Value: "x"},
		{Name: "authorization", Value: "Bearer " + strings.Repeat("a", 4<<20)}} {
		enc.WriteField(hf)
	}
	b := block.Bytes()[:1<<20]
	const frame = 16 << 10
	sent := 0
	writeErr := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b[:frame], EndHeaders: false})
	for sent = frame; writeErr == nil && sent < len(b); sent += frame {
		writeErr = fr.WriteContinuation(1, false, b[sent:sent+frame])
	}
	// The server's answer: GOAWAY, then the connection closes (or is
	// reset). A server still waiting for the rest of the block sends
	// nothing and keeps it open.
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	goaway := false
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("after %d bytes of an unfinished header block (write error: %v) the connection is still open and no GOAWAY came", sent, writeErr)
			}
			break // closed (EOF or reset)
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			goaway = true
			if g.ErrCode != http2.ErrCodeProtocol && g.ErrCode != http2.ErrCodeCompression {
				t.Errorf("GOAWAY code %v, want PROTOCOL_ERROR or COMPRESSION_ERROR", g.ErrCode)
			}
		}
	}
	// A close with unread bytes in the server's socket is a reset, which
	// may overtake the GOAWAY: either way the server let go of the block.
	t.Logf("closed after %d bytes sent (GOAWAY seen: %v, write error: %v)", sent, goaway, writeErr)
}
