package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/idmint/idmint/testkit/tcpproxy"
	"github.com/idmint/idmint/testkit/testserver"
)

// zkTTL is the session timeout of these tests; the servers of
// scripts/servers.sh grant anything from 1 s.
const zkTTL = 3 * time.Second

// zkFixture is an assigner that reaches the shared ZooKeeper through a
// proxy the test can cut, and an observer connected directly.
type zkFixture struct {
	a     *zkAssigner
	proxy *tcpproxy.Proxy
	obs   *zk.Conn
	root  string
}

func newZKFixture(t *testing.T, endpoint string) *zkFixture {
	t.Helper()
	addr := testserver.Addr(t, testserver.ZooKeeper)
	p, err := tcpproxy.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	f := &zkFixture{proxy: p, root: "/" + testserver.Prefix(t) + "/snowflake/recover"}
	f.a = f.assigner(t, endpoint)
	obs, _, err := zk.Connect([]string{addr}, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(obs.Close)
	f.obs = obs
	return f
}

// assigner opens another assigner (another session) through the proxy.
func (f *zkFixture) assigner(t *testing.T, endpoint string) *zkAssigner {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := NewZooKeeper(ctx, []string{f.proxy.Addr()}, f.root, endpoint, WithTTL(zkTTL), WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a.(*zkAssigner)
}

func acquireZK(t *testing.T, a *zkAssigner) *Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := a.Acquire(ctx, 15)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// reacquire retries Acquire (each attempt bounded) until it succeeds
// within d, failing the test otherwise.
func reacquire(t *testing.T, a *zkAssigner, d time.Duration, what string) *Lease {
	t.Helper()
	var last error // the last answer other than our own deadline
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Until(deadline))
		l, err := a.Acquire(ctx, 15)
		cancel()
		if err == nil {
			t.Cleanup(func() { l.Close() })
			return l
		}
		if last == nil || !errors.Is(err, context.DeadlineExceeded) {
			last = err
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no lease within %v; last error: %v", what, d, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitDone(t *testing.T, l *Lease, d time.Duration, what string) {
	t.Helper()
	select {
	case <-l.Done():
		if !errors.Is(l.Err(), ErrLeaseLost) {
			t.Fatalf("%s: Err = %v, want ErrLeaseLost", what, l.Err())
		}
	case <-time.After(d):
		t.Fatalf("%s: the lease was not reported lost within %v", what, d)
	}
}

// holds checks l stays live and valid for d: several keepalives pass.
func holds(t *testing.T, l *Lease, d time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		select {
		case <-l.Done():
			t.Fatalf("%s: the new lease was lost after %v: %v", what, d-time.Until(deadline), l.Err())
		default:
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !l.Valid() {
		t.Fatalf("%s: the new lease is not valid after %v of keepalives (ValidUntil %v, Mono %v)", what, d, l.ValidUntil(), l.Clock().Mono())
	}
}

// TestZooKeeperSessionExpiryRecovers: the connection to ZooKeeper is cut
// until the server expires the session; once it heals, the client gets a
// new session, the old lease is reported lost, and a new lease is granted
// within 2 × TTL and survives its keepalives (it is judged by the session
// that created its lock, not the assigner's first session).
func TestZooKeeperSessionExpiryRecovers(t *testing.T) {
	t.Parallel()
	f := newZKFixture(t, "10.4.0.1:8080")
	l1 := acquireZK(t, f.a)
	lock := f.a.lockPath(l1.ID())

	f.proxy.Cut()
	testserver.Eventually(t, "the server to expire the cut session and its lock", 6*zkTTL, func() bool {
		ok, _, err := f.obs.Exists(lock)
		return err == nil && !ok
	})
	f.proxy.Heal()
	waitDone(t, l1, 2*zkTTL, "after the heal")
	if err := l1.Close(); err != nil {
		t.Fatalf("Close of the lost lease: %v", err)
	}
	l2 := reacquire(t, f.a, 2*zkTTL, "after the heal")
	if l2.ID() != l1.ID() || l2.Generation() <= l1.Generation() {
		t.Fatalf("new lease: id %d generation %d; want id %d, generation above %d", l2.ID(), l2.Generation(), l1.ID(), l1.Generation())
	}
	holds(t, l2, zkTTL, "after a session expiry")
}

// TestZooKeeperVersionMovedRecovers: the node's version moves under the
// lease — an outside `set`, or our own write whose reply was lost, which
// leaves the local version stale. The lease is lost (a write at our
// version cannot be told from a stale holder's), but closing it frees the
// lock of our still-live session, so the ID is acquired again at once.
func TestZooKeeperVersionMovedRecovers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, endpoint string
		move           func(t *testing.T, f *zkFixture, l *Lease)
	}{
		{"outside set", "10.4.0.2:8080", func(t *testing.T, f *zkFixture, l *Lease) {
			b := l.b.(*zkBackend)
			data, _, err := f.obs.Get(b.node)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.obs.Set(b.node, data, -1); err != nil {
				t.Fatal(err)
			}
		}},
		{"lost reply", "10.4.0.3:8080", func(t *testing.T, f *zkFixture, l *Lease) {
			b := l.b.(*zkBackend)
			b.mu.Lock()
			b.version-- // as if our last write landed but its answer did not
			b.mu.Unlock()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newZKFixture(t, c.endpoint)
			l1 := acquireZK(t, f.a)
			c.move(t, f, l1)
			moved := time.Now()
			waitDone(t, l1, 2*zkTTL, "after the version moved")
			if err := l1.Close(); err != nil {
				t.Fatalf("Close of the lost lease: %v", err)
			}
			// Found out and acquired again within 2 × TTL of the move.
			l2 := reacquire(t, f.a, 2*zkTTL-time.Since(moved), "after the version moved")
			if l2.ID() != l1.ID() || l2.Generation() <= l1.Generation() {
				t.Fatalf("new lease: id %d generation %d; want id %d, generation above %d", l2.ID(), l2.Generation(), l1.ID(), l1.Generation())
			}
			holds(t, l2, zkTTL, c.name)
		})
	}
}

// TestZooKeeperReleaseLeavesOthersLock: a lease whose lock was taken from
// it (deleted, then created by another session) does not delete the new
// holder's lock when it is closed.
func TestZooKeeperReleaseLeavesOthersLock(t *testing.T) {
	t.Parallel()
	f := newZKFixture(t, "10.4.0.4:8080")
	l1 := acquireZK(t, f.a)
	lock := f.a.lockPath(l1.ID())
	if err := f.obs.Delete(lock, -1); err != nil {
		t.Fatal(err)
	}
	other := f.assigner(t, "10.4.0.4:8080")
	l2 := acquireZK(t, other)
	if l2.ID() != l1.ID() {
		t.Fatalf("the other process got id %d, want %d", l2.ID(), l1.ID())
	}
	if err := l1.Close(); err != nil {
		t.Fatal(err)
	}
	ok, st, err := f.obs.Exists(lock)
	if err != nil || !ok || st.EphemeralOwner != other.conn.SessionID() {
		t.Fatalf("after the old holder's Close the lock exists=%v owner=%#x (err %v); want it kept, owned by %#x", ok, st.EphemeralOwner, err, other.conn.SessionID())
	}
}

// TestZooKeeperStaleOwnLock: a lock of this process's own session that no
// lease of it holds (its delete did not get through) is taken over, while
// a lock held by a live lease, of this process or another, answers
// ErrHeld.
func TestZooKeeperStaleOwnLock(t *testing.T) {
	t.Parallel()
	f := newZKFixture(t, "10.4.0.5:8080")
	l1 := acquireZK(t, f.a)
	lock := f.a.lockPath(l1.ID())
	if err := l1.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.a.conn.Create(lock, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	l2 := acquireZK(t, f.a)
	if l2.ID() != l1.ID() || l2.Generation() <= l1.Generation() {
		t.Fatalf("over a stale lock: id %d generation %d; want id %d, generation above %d", l2.ID(), l2.Generation(), l1.ID(), l1.Generation())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := f.a.Acquire(ctx, 15); !errors.Is(err, ErrHeld) {
		t.Fatalf("a second Acquire while the lease is live = %v, want ErrHeld", err)
	}
	if _, err := f.assigner(t, "10.4.0.5:8080").Acquire(ctx, 15); !errors.Is(err, ErrHeld) {
		t.Fatalf("another process's Acquire while the lease is live = %v, want ErrHeld", err)
	}
	holds(t, l2, zkTTL/2, "after taking over a stale lock")
}

// TestZooKeeperSilentServerRecovers: ZooKeeper goes away and comes back
// slowly, having accepted the client's reconnection without answering it.
// The client gives up on that connection after 2 × TTL (its read deadline
// is capped), not after go-zookeeper's 10 × ⅔ of the session timeout, so
// the worker ID is held again within 2 × TTL of the server's return plus
// that cap: 12 s here, where the uncapped client took about 16 s.
func TestZooKeeperSilentServerRecovers(t *testing.T) {
	t.Parallel()
	f := newZKFixture(t, "10.6.0.1:8080")
	l1 := acquireZK(t, f.a)
	lock := f.a.lockPath(l1.ID())

	f.proxy.Stall()
	testserver.Eventually(t, "the server to expire the silent client's session", 6*zkTTL, func() bool {
		ok, _, err := f.obs.Exists(lock)
		return err == nil && !ok
	})
	testserver.Eventually(t, "the client to reconnect into the silent server", 2*zkTTL, func() bool { return f.proxy.Held() > 0 })
	back := time.Now()
	f.proxy.Heal()
	waitDone(t, l1, 2*zkTTL+2*zkTTL, "after the server came back")
	l1.Close()
	l2 := reacquire(t, f.a, 2*zkTTL+2*zkTTL-time.Since(back), "after the server came back")
	t.Logf("held again %v after the server came back", time.Since(back).Round(time.Millisecond))
	if l2.ID() != l1.ID() || l2.Generation() <= l1.Generation() {
		t.Fatalf("new lease: id %d generation %d; want id %d, generation above %d", l2.ID(), l2.Generation(), l1.ID(), l1.Generation())
	}
}

// The cap leaves shorter deadlines and "no deadline" alone.
func TestCappedConnDeadlines(t *testing.T) {
	c := &cappedConn{limit: time.Second}
	now := time.Now()
	if got := c.cap(time.Time{}); !got.IsZero() {
		t.Errorf("zero deadline became %v", got)
	}
	if d := now.Add(500 * time.Millisecond); !c.cap(d).Equal(d) {
		t.Errorf("a deadline under the cap moved to %v", c.cap(d))
	}
	if got := c.cap(now.Add(20 * time.Second)); got.After(time.Now().Add(time.Second)) || got.Before(now.Add(time.Second)) {
		t.Errorf("a 20 s deadline became %v, want about 1 s from now", got.Sub(now))
	}
}
