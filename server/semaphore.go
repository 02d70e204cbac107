package server

import (
	"net"
	"sync"
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

// limitListener accepts at most n connections at once: Accept waits for
// one to close first (golang.org/x/net/netutil.LimitListener's rule,
// written here to keep x/net an indirect dependency).
type limitListener struct {
	net.Listener
	slots chan struct{}
}

func newLimitListener(l net.Listener, n int) net.Listener {
	return &limitListener{Listener: l, slots: make(chan struct{}, n)}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.slots <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
