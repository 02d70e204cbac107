package tcpproxy_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/idmint/idmint/testkit/tcpproxy"
	"github.com/idmint/idmint/testkit/testserver"
)

// echo starts a line echo server and returns its address.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func start(t *testing.T) *tcpproxy.Proxy {
	t.Helper()
	p, err := tcpproxy.Listen(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

func dial(t *testing.T, p *tcpproxy.Proxy) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip sends a line and returns the answer or the error, within d.
func roundTrip(c net.Conn, d time.Duration) (string, error) {
	c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

func TestForwards(t *testing.T) {
	t.Parallel()
	p := start(t)
	c := dial(t, p)
	if got, err := roundTrip(c, 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("round trip = %q, %v", got, err)
	}
	if p.Conns() != 1 {
		t.Fatalf("Conns = %d, want 1", p.Conns())
	}
}

func TestCutDropsAndRefusesUntilHeal(t *testing.T) {
	t.Parallel()
	p := start(t)
	c := dial(t, p)
	if _, err := roundTrip(c, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	if got, err := roundTrip(c, 5*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("after Cut the old connection answered %q, %v; want it closed at once", got, err)
	}
	if got, err := tryNew(p); err == nil || isTimeout(err) {
		t.Fatalf("a new connection during the cut answered %q, %v; want it closed at once", got, err)
	}
	p.Heal()
	if got, err := roundTrip(dial(t, p), 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("after Heal a new connection answered %q, %v", got, err)
	}
}

func TestBlackholePassesNothingThenHealResets(t *testing.T) {
	t.Parallel()
	p := start(t)
	old := dial(t, p)
	if _, err := roundTrip(old, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Blackhole()
	if got, err := roundTrip(old, 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("during the blackhole the old connection answered %q, %v; want silence", got, err)
	}
	fresh := dial(t, p)
	if got, err := roundTrip(fresh, 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("during the blackhole a new connection answered %q, %v; want silence", got, err)
	}
	p.Heal()
	for name, c := range map[string]net.Conn{"old": old, "fresh": fresh} {
		if got, err := roundTrip(c, 5*time.Second); err == nil || isTimeout(err) {
			t.Fatalf("after Heal the %s connection answered %q, %v; want it reset", name, got, err)
		}
	}
	if got, err := roundTrip(dial(t, p), 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("after Heal a new connection answered %q, %v", got, err)
	}
}

// Stall resets what was open and holds what comes next unanswered, and
// Heal forwards new connections while the held ones stay silent.
func TestStallHoldsThroughHeal(t *testing.T) {
	t.Parallel()
	p := start(t)
	old := dial(t, p)
	if _, err := roundTrip(old, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Stall()
	if got, err := roundTrip(old, 5*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("after Stall the old connection answered %q, %v; want it reset", got, err)
	}
	held := dial(t, p)
	if got, err := roundTrip(held, 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("during the stall a new connection answered %q, %v; want silence", got, err)
	}
	if n := p.Held(); n != 1 {
		t.Fatalf("Held = %d during the stall, want 1", n)
	}
	p.Heal()
	if got, err := roundTrip(held, 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("after Heal the held connection answered %q, %v; want it still silent", got, err)
	}
	if got, err := roundTrip(dial(t, p), 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("after Heal a new connection answered %q, %v", got, err)
	}
	held.Close()
	testserver.Eventually(t, "the held connection to be let go after its client closed", 5*time.Second, func() bool { return p.Held() == 0 })
}

func TestTargetDown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	p, err := tcpproxy.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got, err := tryNew(p); err == nil || isTimeout(err) {
		t.Fatalf("with the target down a connection answered %q, %v; want it closed", got, err)
	}
}

func TestBadTarget(t *testing.T) {
	t.Parallel()
	if _, err := tcpproxy.Listen("no-port"); err == nil {
		t.Fatal("Listen(\"no-port\") succeeded")
	}
}

func TestCloseEndsConnections(t *testing.T) {
	t.Parallel()
	p, err := tcpproxy.Listen(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p)
	if _, err := roundTrip(c, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Blackhole() // Close must end held connections too
	done := make(chan error, 1)
	go func() { done <- p.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10 s")
	}
	if got, err := roundTrip(c, 5*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("after Close the connection answered %q, %v", got, err)
	}
}

// named starts a server that answers each line with its name and the line
// ("a: ping\n"), and returns its address.
func named(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := io.WriteString(c, name+": "+line); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// Retarget resets what is open, as a moved virtual IP does, and sends what
// comes next to the new target; a fault in force stays in force.
func TestRetarget(t *testing.T) {
	t.Parallel()
	a, b := named(t, "a"), named(t, "b")
	p, err := tcpproxy.Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	old := dial(t, p)
	if got, err := roundTrip(old, 5*time.Second); err != nil || got != "a: ping\n" {
		t.Fatalf("before Retarget: %q, %v; want a's answer", got, err)
	}

	p.Retarget(b)
	if got := p.Target(); got != b {
		t.Errorf("Target() = %q after Retarget(%q)", got, b)
	}
	if got, err := roundTrip(old, 5*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("after Retarget the old connection answered %q, %v; want it reset", got, err)
	}
	if got, err := roundTrip(dial(t, p), 5*time.Second); err != nil || got != "b: ping\n" {
		t.Fatalf("after Retarget a new connection answered %q, %v; want b's answer", got, err)
	}
	testserver.Eventually(t, "the reset connection to leave the count", 5*time.Second, func() bool { return p.Conns() == 1 })

	// During a stall: the held connection is reset too, the stall goes on,
	// and Heal forwards to the new target.
	p.Stall()
	held := dial(t, p)
	testserver.Eventually(t, "the connection made during the stall to be held", 5*time.Second, func() bool { return p.Held() == 1 })
	p.Retarget(a)
	if got, err := roundTrip(held, 5*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("after Retarget the held connection answered %q, %v; want it reset", got, err)
	}
	if got, err := roundTrip(dial(t, p), 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("after Retarget during a stall a new connection answered %q, %v; want silence", got, err)
	}
	p.Heal()
	if got, err := roundTrip(dial(t, p), 5*time.Second); err != nil || got != "a: ping\n" {
		t.Fatalf("after Heal a new connection answered %q, %v; want a's answer", got, err)
	}
}

func TestRetargetBadTarget(t *testing.T) {
	t.Parallel()
	p := start(t)
	defer func() {
		if recover() == nil {
			t.Error("Retarget(\"no-port\") did not panic")
		}
		if got, err := roundTrip(dial(t, p), 5*time.Second); err != nil || got != "ping\n" {
			t.Errorf("after the refused Retarget: %q, %v; want the old target's answer", got, err)
		}
	}()
	p.Retarget("no-port")
}

// tryNew opens a new connection and round-trips a line on it: the error
// is the dial's or the round trip's (a reset may reach the dial already).
func tryNew(p *tcpproxy.Proxy) (string, error) {
	c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return roundTrip(c, 5*time.Second)
}

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
