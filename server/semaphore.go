package server

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/stats"
)

// limitListener accepts at most n connections at once. When all n are
// taken, Accept first closes one that sits idle between requests (a
// keep-alive connection, which http.Server reports through ConnState),
// then waits for a slot: 4,100 keep-alive connections that made one
// request each used to hold every slot for idle_timeout while new clients
// were answered by nobody. Connections busy with a request are never
// closed; with all n busy, Accept waits for one to close
// (golang.org/x/net/netutil.LimitListener's rule, which has no eviction).
type limitListener struct {
	net.Listener
	slots chan struct{}

	mu   sync.Mutex
	idle map[*limitConn]struct{}

	// index, when set, records every connection by remote address, each
	// with what it owes the answer budget (the gRPC listener).
	index  *connIndex
	budget *answerBudget
	now    func() time.Duration

	closeOnce sync.Once
	closeErr  error
}

// Close closes the listener once; later calls return the first's result.
// Serve closes its listeners to stop accepting before http.Server.Shutdown
// closes them again, which would otherwise report the second close.
func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { l.closeErr = l.Listener.Close() })
	return l.closeErr
}

func newLimitListener(l net.Listener, n int) *limitListener {
	return &limitListener{Listener: l, slots: make(chan struct{}, n), idle: map[*limitConn]struct{}{}}
}

// owingListener is a limitListener whose connections carry what they owe
// b, found through the returned index.
func owingListener(l net.Listener, n int, b *answerBudget, now func() time.Duration) (*limitListener, *connIndex) {
	ll := newLimitListener(l, n)
	ll.index, ll.budget, ll.now = &connIndex{m: map[string]*limitConn{}}, b, now
	return ll, ll.index
}

func (l *limitListener) Accept() (net.Conn, error) {
	// Full: close an idle connection to make room, and keep trying while
	// waiting, since a busy one may go idle before any closes.
	for taken := false; !taken; {
		select {
		case l.slots <- struct{}{}:
			taken = true
		default:
			l.evictIdle()
			t := time.NewTimer(50 * time.Millisecond)
			select {
			case l.slots <- struct{}{}:
				taken = true
			case <-t.C:
			}
			t.Stop()
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	lc := &limitConn{Conn: c}
	if l.index != nil {
		lc.owing = &owing{budget: l.budget, now: l.now}
		l.index.add(lc)
		// A gRPC connection is idle until its first call begins (its
		// handshake included: 1,030 connections that sent only the
		// HTTP/2 preface locked every client out), and again between
		// calls; grpcStreams tells the listener.
		l.setIdle(lc, true)
	}
	lc.release = func() {
		l.mu.Lock()
		delete(l.idle, lc)
		l.mu.Unlock()
		if lc.owing != nil {
			l.index.remove(lc)
			lc.owing.settleAll()
		}
		<-l.slots
	}
	return lc, nil
}

// evictIdle closes one idle connection, if there is one.
func (l *limitListener) evictIdle() {
	l.mu.Lock()
	var victim *limitConn
	for c := range l.idle {
		victim = c
		delete(l.idle, c)
		break
	}
	l.mu.Unlock()
	if victim != nil {
		victim.Close()
	}
}

// ConnState is the http.Server hook that tells the listener which of its
// connections are idle.
func (l *limitListener) ConnState(c net.Conn, st http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	lc, ok := c.(*limitConn)
	if !ok {
		return
	}
	l.setIdle(lc, st == http.StateIdle)
}

func (l *limitListener) setIdle(c *limitConn, idle bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if idle && !c.closed.Load() {
		l.idle[c] = struct{}{}
	} else {
		delete(l.idle, c)
	}
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
	owing   *owing       // nil but on the gRPC listener
	calls   atomic.Int64 // gRPC calls in progress
	closed  atomic.Bool
}

func (c *limitConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if c.owing != nil {
		c.owing.wrote(n)
	}
	return n, err
}

func (c *limitConn) owe(n int64) bool { return c.owing != nil && c.owing.owe(n) }

func (c *limitConn) Close() error {
	c.closed.Store(true)
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// grpcStreams is the gRPC stats handler that tells a limitListener with
// an index which of its connections are idle: those with no call in
// progress. When the listener is full, an idle one is closed to make room.
type grpcStreams struct{ l *limitListener }

type connKey struct{}

func (g grpcStreams) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	if c := g.l.index.lookup(info.RemoteAddr); c != nil {
		return context.WithValue(ctx, connKey{}, c)
	}
	return ctx
}

func (g grpcStreams) HandleConn(context.Context, stats.ConnStats) {}

func (g grpcStreams) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (g grpcStreams) HandleRPC(ctx context.Context, st stats.RPCStats) {
	c, ok := ctx.Value(connKey{}).(*limitConn)
	if !ok {
		return
	}
	switch st.(type) {
	case *stats.Begin:
		if c.calls.Add(1) == 1 {
			g.l.setIdle(c, false)
		}
	case *stats.End:
		if c.calls.Add(-1) == 0 {
			g.l.setIdle(c, true)
		}
	}
}
