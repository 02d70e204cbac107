package monotonic

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The follower's side of the peer stream: one connection per leader
// address and source, opened on the first forwarded batch and kept; every
// batch is one frame on it, and many may be in flight. A connection that
// breaks fails the batches in flight on it (their callers retry or get an
// error; an answer that was lost is a gap, never handed out later), and
// the next batch dials again.

const (
	// handshakeTimeout bounds dialing and upgrading a peer stream.
	handshakeTimeout = 5 * time.Second
	// legacyForwards is how many batches go over plain HTTP requests to a
	// leader without the stream endpoint (a node of an older version, in
	// a rolling upgrade) before the stream is tried again.
	legacyForwards = 1000
	// silentStream: a stream that answers nothing at all while a batch
	// with at least this long a deadline waits is given up.
	silentStream = time.Second
)

// errNoStream: the leader has no stream endpoint; forward over HTTP.
var errNoStream = errors.New("monotonic: the leader has no peer stream")

// peerLink is the follower's stream to one leader for one source.
type peerLink struct {
	sem    chan struct{} // held while dialing
	conn   atomic.Pointer[peerConn]
	legacy int // batches left to send over HTTP; under sem
}

// peerConn is one open stream.
type peerConn struct {
	p    *Peers
	key  string // in Peers.links
	addr string
	conn net.Conn

	wmu  sync.Mutex
	wbuf []byte

	frames atomic.Uint64 // frames read: a wait that sees none come judges the stream dead

	mu      sync.Mutex
	sent    uint64 // the last request id
	pending map[uint64]chan peerAnswer
	err     error // set once the connection is unusable
}

type peerAnswer struct {
	first int64
	err   error
}

// forwardStream sends one batch over the stream to addr, dialing it when
// there is none; errNoStream when the leader has no stream endpoint.
func (p *Peers) forwardStream(ctx context.Context, addr, name string, n int64) (int64, error) {
	key := addr + "\x00" + name
	p.smu.Lock()
	if p.closed {
		p.smu.Unlock()
		return 0, fmt.Errorf("monotonic: forward to %s: %w", addr, ErrClosed)
	}
	l := p.links[key]
	if l == nil {
		l = &peerLink{sem: make(chan struct{}, 1)}
		p.links[key] = l
	}
	p.smu.Unlock()
	c := l.conn.Load()
	if c == nil || c.broken() {
		var err error
		if c, err = p.connect(ctx, l, key, addr, name); err != nil {
			return 0, err
		}
	}
	return c.call(ctx, n)
}

// connect dials the link's stream, one dial at a time.
func (p *Peers) connect(ctx context.Context, l *peerLink, key, addr, name string) (*peerConn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("monotonic: forward to %s: %w", addr, ctx.Err())
	}
	defer func() { <-l.sem }()
	if c := l.conn.Load(); c != nil && !c.broken() {
		return c, nil // dialed meanwhile
	}
	if l.legacy > 0 {
		l.legacy--
		return nil, errNoStream
	}
	c, err := p.dial(ctx, key, addr, name)
	p.smu.Lock()
	defer p.smu.Unlock()
	switch {
	case errors.Is(err, errNoStream):
		l.legacy = legacyForwards - 1 // kept: it remembers the leader has none
		return nil, err
	case err != nil:
		if p.links[key] == l {
			delete(p.links, key) // a leader gone for good leaves nothing behind
		}
		return nil, err
	}
	if p.links[key] == nil {
		p.links[key] = l // dropped by the failure of the stream this one replaces
	}
	l.conn.Store(c)
	return c, nil
}

// dial opens a stream: an HTTP/1.1 upgrade carrying the same token as a
// forwarded request.
func (p *Peers) dial(ctx context.Context, key, addr, name string) (*peerConn, error) {
	fail := func(err error) (*peerConn, error) {
		return nil, fmt.Errorf("monotonic: forward to %s: %w", addr, err)
	}
	conn, err := (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return fail(err)
	}
	// Socket deadlines are wall-clock times by the net package's API.
	deadline := time.Now().Add(handshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+streamPath+"?name="+url.QueryEscape(name), nil)
	if err != nil {
		conn.Close()
		return fail(err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", streamProto)
	if tok := p.tokenFor(name); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if err := req.Write(conn); err != nil {
		conn.Close()
		return fail(err)
	}
	br := bufio.NewReaderSize(conn, 8<<10)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		return fail(fmt.Errorf("peer stream handshake: %w", err))
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		conn.Close()
		body := strings.TrimSpace(string(b))
		switch resp.StatusCode {
		case http.StatusNotFound:
			return nil, errNoStream
		case http.StatusUnauthorized:
			return fail(errors.New("the leader refused this node's peer token: every node needs the same secret (admin_token, or the key's tokens)"))
		}
		return fail(fmt.Errorf("peer stream handshake: status %d: %s", resp.StatusCode, trunc(body)))
	}
	if !strings.EqualFold(resp.Header.Get("Upgrade"), streamProto) {
		conn.Close()
		return fail(fmt.Errorf("peer stream handshake: upgraded to %q, want %s", trunc(resp.Header.Get("Upgrade")), streamProto))
	}
	_ = conn.SetDeadline(time.Time{})
	c := &peerConn{p: p, key: key, addr: addr, conn: conn, pending: map[uint64]chan peerAnswer{}}
	p.smu.Lock()
	if p.closed {
		p.smu.Unlock()
		conn.Close()
		return fail(ErrClosed)
	}
	p.conns[c] = struct{}{}
	p.smu.Unlock()
	p.dials.Add(1)
	go c.read(br)
	return c, nil
}

func (c *peerConn) broken() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err != nil
}

// call sends one request frame and waits for its answer. A caller that
// gives up (ctx) leaves its IDs, should they come, unused: a gap.
func (c *peerConn) call(ctx context.Context, n int64) (int64, error) {
	ch := make(chan peerAnswer, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return 0, err
	}
	c.sent++
	id := c.sent
	c.pending[id] = ch
	c.mu.Unlock()
	heard := c.frames.Load()
	d, ok := ctx.Deadline()
	judge := ok && time.Until(d) >= silentStream
	c.wmu.Lock()
	c.wbuf = appendFrame(c.wbuf[:0], frame{kind: frameNext, id: id, value: n})
	_ = c.conn.SetWriteDeadline(time.Now().Add(peerWriteTimeout))
	_, err := c.conn.Write(c.wbuf)
	c.wmu.Unlock()
	if err != nil {
		c.fail(fmt.Errorf("write: %w", err)) // answers ch too
	}
	select {
	case a := <-ch:
		return a.first, a.err
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		err := fmt.Errorf("monotonic: forward to %s: %w", c.addr, ctx.Err())
		if judge && errors.Is(ctx.Err(), context.DeadlineExceeded) && c.frames.Load() == heard {
			// Nothing came back for so long: a leader paused or cut off
			// (TCP would take minutes to say so). The next batch dials
			// again.
			c.fail(err)
		}
		return 0, err
	}
}

// read delivers answers until the connection ends or a frame is wrong;
// either way every batch still waiting fails.
func (c *peerConn) read(br *bufio.Reader) {
	buf := make([]byte, frameHeader+frameMaxText)
	for {
		f, err := readFrame(br, buf)
		if err != nil {
			if errors.Is(err, errBadFrame) {
				err = fmt.Errorf("from the leader: %w", err)
			}
			c.fail(err)
			return
		}
		c.frames.Add(1)
		if f.kind == frameNext {
			c.fail(fmt.Errorf("%w from the leader: kind %d is a request", errBadFrame, f.kind))
			return
		}
		if f.id == 0 { // about the connection: the leader closes it
			c.fail(c.refusal(f))
			return
		}
		c.mu.Lock()
		ch, ok := c.pending[f.id]
		delete(c.pending, f.id)
		sent := c.sent
		c.mu.Unlock()
		if !ok {
			if f.id <= sent {
				continue // its caller gave up: those IDs are a gap
			}
			c.fail(fmt.Errorf("%w from the leader: an answer to request %d, never sent", errBadFrame, f.id))
			return
		}
		if f.kind == frameError {
			err := c.refusal(f)
			if errCode(f.value) == codeUnauthorized {
				// The leader ends the stream after this answer. The
				// stream is failed before its caller hears, so a retry
				// dials a new one (and is refused at the handshake)
				// instead of writing to a connection being closed.
				c.fail(err)
				ch <- peerAnswer{err: err}
				return
			}
			ch <- peerAnswer{err: err}
			continue
		}
		if f.value < 0 {
			err := fmt.Errorf("%w from the leader: first ID %d is negative", errBadFrame, f.value)
			ch <- peerAnswer{err: fmt.Errorf("monotonic: forward to %s: %w", c.addr, err)}
			c.fail(err)
			return
		}
		ch <- peerAnswer{first: f.value}
	}
}

// refusal is the error an error frame stands for, as Peers.Forward
// reports it over HTTP.
func (c *peerConn) refusal(f frame) error {
	text := trunc(f.text)
	switch errCode(f.value) {
	case codeUnavailable:
		return fmt.Errorf("%w: %s answered: %s", ErrFenced, c.addr, text)
	case codeBadCount:
		return fmt.Errorf("%w: %s answered: %s", ErrBadCount, c.addr, text)
	case codeUnauthorized:
		return fmt.Errorf("monotonic: forward to %s: the leader refused this node's peer token: every node needs the same secret (admin_token, or the key's tokens)", c.addr)
	case codeNoSource:
		return fmt.Errorf("monotonic: forward to %s: %s", c.addr, text)
	case codeBadFrame:
		return fmt.Errorf("monotonic: forward to %s: the leader refused a frame: %s", c.addr, text)
	}
	return fmt.Errorf("monotonic: forward to %s: error code %d: %s", c.addr, f.value, text)
}

// fail makes the connection unusable, once: it closes it and fails every
// batch waiting on it with err.
func (c *peerConn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	if !strings.HasPrefix(err.Error(), "monotonic: ") {
		err = fmt.Errorf("monotonic: forward to %s: peer stream lost: %w", c.addr, err)
	}
	c.err = err
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	c.conn.Close()
	// Forgotten before anyone hears of the failure, so a caller that
	// retries at once never finds this stream still listed.
	p := c.p
	p.smu.Lock()
	delete(p.conns, c)
	if l := p.links[c.key]; l != nil && l.conn.Load() == c {
		delete(p.links, c.key)
	}
	p.smu.Unlock()
	for _, ch := range pending {
		ch <- peerAnswer{err: err}
	}
}
