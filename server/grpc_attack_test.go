package server

import (
	"io"
	"net"
	"runtime"
	"testing"
	"time"
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
