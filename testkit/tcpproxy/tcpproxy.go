// Package tcpproxy is a loopback TCP proxy for tests. It forwards every
// connection it accepts to one target and can stage network faults between
// a client and a real server: Cut resets every connection, Blackhole lets
// nothing through while keeping connections open, Stall stands in for a
// server that died and came back without answering, and Heal ends each.
// Retarget moves the proxy to another server and resets what was open, as
// a virtual IP or DNS name moved in a failover does.
//
// A test points its client at Proxy.Addr instead of the server:
//
//	p, err := tcpproxy.Listen("127.0.0.1:2181")
//	...
//	defer p.Close()
//	conn := connect(p.Addr())
//	p.Cut()  // the client loses its connection and cannot get another
//	p.Heal() // it can again
package tcpproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// state is what the proxy does with traffic.
type state int

const (
	open      state = iota // forward
	cut                    // reset every connection at once
	blackhole              // keep connections, pass nothing
	stall                  // reset every connection, hold new ones unanswered
)

// DialTimeout bounds connecting to the target for each accepted connection;
// when it fails, the accepted connection is closed.
const DialTimeout = 5 * time.Second

// Proxy forwards TCP connections from a loopback address to a target. Its
// methods are safe for concurrent use.
type Proxy struct {
	ln net.Listener

	mu     sync.Mutex
	target string
	gen    int // bumped by each Retarget
	state  state
	conns  map[net.Conn]struct{} // every open connection, both sides
	held   map[net.Conn]struct{} // accepted during a Stall, never answered
	closed bool

	wg sync.WaitGroup
}

// Listen starts a proxy on 127.0.0.1 on a free port forwarding to target
// (host:port). The target need not be up yet: each accepted connection
// dials it afresh.
func Listen(target string) (*Proxy, error) {
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, errors.New("tcpproxy: target " + target + " is not host:port: " + err.Error())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}, held: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the address clients connect to ("127.0.0.1:port").
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address connections are forwarded to.
func (p *Proxy) Target() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.target
}

// Retarget forwards the connections accepted from now on to target
// (host:port) and resets every connection open through the proxy, held
// ones included, as a virtual IP or DNS name moved to another server
// would: clients notice, reconnect, and reach the new target. A
// connection accepted before Retarget and still dialing the old target is
// reset too. A Cut, Blackhole or Stall in force stays in force. Retarget
// panics if target is not host:port.
func (p *Proxy) Retarget(target string) {
	if _, _, err := net.SplitHostPort(target); err != nil {
		panic("tcpproxy: Retarget: target " + target + " is not host:port: " + err.Error())
	}
	p.mu.Lock()
	p.target = target
	p.gen++
	drop := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		drop = append(drop, c)
	}
	p.mu.Unlock()
	for _, c := range drop {
		reset(c)
	}
}

// Cut closes every connection through the proxy (with a TCP reset where
// the platform allows) and, until Heal, resets each new connection as soon
// as it is accepted: the client sees its connection drop and every
// reconnection fail at once.
func (p *Proxy) Cut() { p.set(cut) }

// Blackhole stops all traffic without closing anything: bytes sent either
// way are read and discarded, and new connections are accepted but never
// answered. Heal resets the connections that lived through the blackhole,
// as a middlebox that lost their state would, so clients reconnect.
func (p *Proxy) Blackhole() { p.set(blackhole) }

// Stall resets every connection, as a server that dies does, and then
// accepts new connections without ever answering them, as its successor
// does when it accepts before it can serve: unlike after a Blackhole, Heal
// leaves those connections held, unanswered, until their client gives up.
func (p *Proxy) Stall() { p.set(stall) }

// Heal ends a Cut, a Blackhole or a Stall: new connections are forwarded
// again. Connections open during a Blackhole are reset; those accepted
// during a Stall stay held.
func (p *Proxy) Heal() { p.set(open) }

// Held returns how many connections accepted during a Stall are still
// open, waiting for an answer that never comes.
func (p *Proxy) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.held)
}

// Conns returns how many client connections are open through the proxy.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns) / 2
}

func (p *Proxy) set(s state) {
	p.mu.Lock()
	prev := p.state
	p.state = s
	var drop []net.Conn
	if s == cut || s == stall || (s == open && prev == blackhole) {
		for c := range p.conns {
			if _, held := p.held[c]; !held || s == cut {
				drop = append(drop, c)
			}
		}
	}
	p.mu.Unlock()
	for _, c := range drop {
		reset(c)
	}
}

// Close stops the proxy, closes every connection and waits for its
// goroutines to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	var drop []net.Conn
	for c := range p.conns {
		drop = append(drop, c)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	for _, c := range drop {
		reset(c)
	}
	p.wg.Wait()
	return err
}

// reset closes c, with RST instead of FIN for TCP connections.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// track adds c to the open connections; false when c must be closed now.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.state == cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

// trackServer is track for a connection dialed to the target of
// generation gen: false also when a Retarget came in between.
func (p *Proxy) trackServer(c net.Conn, gen int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.state == cut || p.gen != gen {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

// dest returns the target to dial and its generation.
func (p *Proxy) dest() (string, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.target, p.gen
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *Proxy) passing() bool { return p.current() == open }

func (p *Proxy) current() state {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	if !p.track(client) {
		reset(client)
		return
	}
	defer p.untrack(client)
	if st := p.current(); st != open {
		// Accepted during a Blackhole: swallow what the client sends
		// until Heal or Cut resets the connection. During a Stall: the
		// same, until the client gives up or Cut or Close resets it.
		if st == stall {
			p.mu.Lock()
			p.held[client] = struct{}{}
			p.mu.Unlock()
			defer func() {
				p.mu.Lock()
				delete(p.held, client)
				p.mu.Unlock()
			}()
		}
		_, _ = io.Copy(io.Discard, client)
		reset(client)
		return
	}
	target, gen := p.dest()
	server, err := net.DialTimeout("tcp", target, DialTimeout)
	if err != nil {
		reset(client)
		return
	}
	if !p.trackServer(server, gen) {
		reset(server)
		reset(client)
		return
	}
	defer p.untrack(server)
	done := make(chan struct{}, 2)
	go func() { p.pipe(server, client); done <- struct{}{} }()
	go func() { p.pipe(client, server); done <- struct{}{} }()
	<-done
	// One direction ended: end the other, so neither side waits forever.
	reset(client)
	reset(server)
	<-done
}

// pipe copies from src to dst while the proxy is open, discarding what it
// reads during a blackhole.
func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && p.passing() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
