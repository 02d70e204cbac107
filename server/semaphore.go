package server

import (
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"time"
)

// semaphore is a counting semaphore whose acquire never waits.
type semaphore chan struct{}

func newSemaphore(n int) semaphore { return make(semaphore, n) }

// TryAcquire takes a slot, or reports false when all are taken.
func (s semaphore) TryAcquire() bool {
	select {
	case s <- struct{}{}:
		return true
	default:
		return false
	}
}

// Release returns a slot taken by TryAcquire.
func (s semaphore) Release() { <-s }

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
	l.mu.Lock()
	defer l.mu.Unlock()
	if st == http.StateIdle {
		l.idle[lc] = struct{}{}
	} else {
		delete(l.idle, lc)
	}
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
	owing   *owing // nil but on the gRPC listener
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
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
