package server

import (
	"context"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	v1 "github.com/idmint/idmint/api/idmintv1"
)

// heapInUse returns the heap in use after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// 1,000 StreamIDs streams that never read, with no token, pinned 1.58 GB
// of RSS. The server now bounds streams per connection and in all, and
// how much one stream may buffer: the same attack grows the heap by less
// than 100 MB and other clients are still served.
func TestAttackGRPCUnreadStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 1,000 streams")
	}
	f := newFixture(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := f.s.GRPCServer()
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	before := heapInUse()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// 32 connections of 32 streams (the per-connection limit: a 33rd
	// would wait for a free slot in the client).
	const conns, perConn = 32, GRPCMaxStreamsPerConn
	var opened atomic.Int64
	var wg sync.WaitGroup
	for c := 0; c < conns; c++ {
		// A small, fixed client window: the client's own buffers stay
		// small, so the growth measured is the server's.
		cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		cl := v1.NewIDsClient(cc)
		for s := 0; s < perConn; s++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := cl.StreamIDs(ctx, &v1.StreamIDsRequest{Key: "order", Batch: GRPCMaxStreamBatch}); err == nil {
					opened.Add(1)
				}
			}()
		}
	}
	within(t, 20*time.Second, "opening the streams", wg.Wait)
	// Let the server fill whatever it will buffer.
	deadline := time.Now().Add(20 * time.Second)
	var grew int64
	for last := int64(-1); time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
		grew = heapInUse() - before
		if grew-last < 1<<20 {
			break
		}
		last = grew
	}
	t.Logf("%d streams opened (%d served at once at most); heap grew %d MiB", opened.Load(), GRPCMaxIDStreams, grew>>20)
	if grew > 100<<20 {
		t.Errorf("heap grew by %d MiB with %d unread streams, want < 100 MiB", grew>>20, opened.Load())
	}
	// Others are still served.
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer ccancel()
	if r, err := v1.NewIDsClient(cc).NextIDs(cctx, &v1.NextIDsRequest{Key: "order", Count: 3}); err != nil || len(r.GetIds()) != 3 {
		t.Errorf("another client during the attack: %v %v", r, err)
	}
	// A batch above the stream limit is refused, not buffered.
	st, err := v1.NewIDsClient(cc).StreamIDs(cctx, &v1.StreamIDsRequest{Key: "order", Batch: GRPCMaxStreamBatch + 1})
	if err == nil {
		_, err = st.Recv()
	}
	if status.Code(err) != codes.InvalidArgument && status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a stream batch of %d: %v", GRPCMaxStreamBatch+1, err)
	}
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
