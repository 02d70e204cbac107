package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/idmint/idmint/internal/ctxcall"
)

// zkAssigner grants worker IDs the way Meituan Leaf's snowflake mode does
// (leaf-core SnowflakeZookeeperHolder, github.com/Meituan-Dianping/Leaf):
//
//	{root}/forever/{ip}:{port}-NNNNNNNNNN   persistent sequential node, one per
//	                                        endpoint, reused on restart; the
//	                                        worker ID is the sequence number
//	data: {"ip":"10.0.0.7","port":"8080","timestamp":<ms>}, rewritten every 3 s
//
// where root is "/snowflake/{name}". idmint joins a tree Leaf nodes already
// use: it finds its own endpoint's node or creates one, and never touches
// the others. On top of Leaf's scheme it adds what Leaf lacks:
//
//   - exclusivity: an ephemeral node {root}/idmint/lock/NNNNNNNNNN held by
//     the ZooKeeper session, so two live idmint processes configured with
//     the same endpoint cannot share a worker ID (Leaf nodes do not take it:
//     never run a Leaf node and an idmint node with the same ip:port);
//   - the time horizon: "timestamp" is the highest time the holder may
//     stamp (Leaf writes its current time there and refuses to start when
//     it is ahead of its clock, so a Leaf node taking the endpoint over
//     stays safe too). Every write is versioned (and checks the lock), so a
//     holder whose session expired cannot move it;
//   - fencing on the session: ValidUntil is TTL (the negotiated session
//     timeout, if lower) minus the margin after the last confirmed report.
type zkAssigner struct {
	s        settings
	conn     *zk.Conn
	root     string
	endpoint string       // ip:port
	ip, port string       // endpoint split, for Leaf's report
	timeout  atomic.Int64 // negotiated session timeout, ms

	mu   sync.Mutex
	held map[int64]bool // worker IDs a lease of this assigner holds or is acquiring
}

// leafEndpoint is Leaf's report (SnowflakeZookeeperHolder.Endpoint): the
// port is a string, the timestamp milliseconds since the Unix epoch.
type leafEndpoint struct {
	IP        string `json:"ip"`
	Port      string `json:"port"`
	Timestamp int64  `json:"timestamp"`
}

type zkLock struct {
	Holder string    `json:"holder"`
	Since  time.Time `json:"since"`
}

// zkReport is how often the holder rewrites its node, as Leaf does
// (scheduleWithFixedDelay(..., 1L, 3L, TimeUnit.SECONDS)).
const zkReport = 3 * time.Second

type zkLogger struct{ a *zkAssigner }

func (l zkLogger) Printf(format string, args ...any) {
	// The client logs the negotiated timeout when a session is set up;
	// this is the only place it exposes it.
	if strings.HasPrefix(format, "authenticated: id=%d, timeout=%d") && len(args) == 2 {
		if ms, ok := args[1].(int32); ok {
			l.a.timeout.Store(int64(ms))
		}
		return
	}
	l.a.s.logger.Debug("zookeeper: " + fmt.Sprintf(format, args...))
}

// NewZooKeeper connects to the ZooKeeper ensemble at servers (host:port)
// and returns a Leaf-compatible Assigner under root (Leaf uses
// "/snowflake/{name}"). endpoint is this process's "ip:port" identity, the
// key Leaf reuses a node by; empty means the first private IPv4 and port 0.
// It fails within the configured timeout when no server grants a session.
func NewZooKeeper(ctx context.Context, servers []string, root, endpoint string, opts ...Option) (Assigner, error) {
	s, err := newSettings(opts)
	if err != nil {
		return nil, err
	}
	if len(servers) == 0 {
		return nil, fmt.Errorf("%w: zookeeper servers are empty", ErrBadURL)
	}
	if root == "" || root == "/" || !strings.HasPrefix(root, "/") || path.Clean(root) != root {
		return nil, fmt.Errorf("%w: zookeeper root %q must be an absolute path such as /snowflake/app", ErrBadURL, root)
	}
	if endpoint == "" {
		ip, err := privateIPv4()
		if err != nil {
			return nil, err
		}
		endpoint = ip.String() + ":0"
	}
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil || host == "" || strings.Contains(host+port, "-") {
		return nil, fmt.Errorf("%w: zookeeper endpoint %q must be ip:port without '-'", ErrBadURL, endpoint)
	}
	a := &zkAssigner{s: s, root: root, endpoint: endpoint, ip: host, port: port, held: map[int64]bool{}}
	conn, events, err := zk.Connect(servers, s.ttl, zk.WithLogger(zkLogger{a}), zk.WithDialer(cappedDialer(2*s.ttl)))
	if err != nil {
		return nil, fmt.Errorf("worker: zookeeper %s: %w", strings.Join(servers, ","), err)
	}
	wait, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	for {
		select {
		case ev := <-events:
			if ev.State != zk.StateHasSession {
				continue
			}
			a.conn = conn
			return a, nil
		case <-wait.Done():
			conn.Close()
			return nil, fmt.Errorf("worker: zookeeper %s unreachable within %v: %w", strings.Join(servers, ","), s.timeout, wait.Err())
		}
	}
}

func (a *zkAssigner) forever() string { return a.root + "/forever" }
func (a *zkAssigner) lockPath(seq int64) string {
	return fmt.Sprintf("%s/idmint/lock/%010d", a.root, seq)
}

// parseLeafNode splits "ip:port-0000000007" as Leaf does (key.split("-")).
func parseLeafNode(name string) (endpoint string, seq int64, ok bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return "", 0, false
	}
	seq, err := strconv.ParseInt(name[i+1:], 10, 64)
	if err != nil || seq < 0 {
		return "", 0, false
	}
	return name[:i], seq, true
}

// createdSeq is the sequence number in the name of the node ZooKeeper
// created at p for a FlagSequence create of "<endpoint>-".
func createdSeq(p string) (int64, error) {
	_, seq, ok := parseLeafNode(path.Base(p))
	if !ok {
		return 0, fmt.Errorf("worker: zookeeper created node %q: its name does not end in -<sequence number>", p)
	}
	return seq, nil
}

func (a *zkAssigner) ensure(p string) error {
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	cur := ""
	for _, part := range parts {
		cur += "/" + part
		if _, err := a.conn.Create(cur, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("worker: zookeeper create %s: %w", cur, err)
		}
	}
	return nil
}

func (a *zkAssigner) Acquire(ctx context.Context, max int64) (*Lease, error) {
	if max < 0 {
		return nil, fmt.Errorf("%w: max worker id %d is negative", ErrBadOption, max)
	}
	ctx, cancel := context.WithTimeout(ctx, a.s.timeout)
	defer cancel()
	// The caller may give up waiting while the client still works; whoever
	// comes second (the late result or the caller) closes a late lease, so
	// its lock does not outlive the request.
	var (
		mu        sync.Mutex
		abandoned bool
		late      *Lease
	)
	l, err := ctxcall.Do(ctx, func() (*Lease, error) {
		l, err := a.acquire(max)
		mu.Lock()
		defer mu.Unlock()
		if abandoned && l != nil {
			l.Close()
		} else {
			late = l
		}
		return l, err
	})
	if err != nil && ctx.Err() != nil {
		mu.Lock()
		abandoned = true
		if late != nil {
			late.Close()
		}
		mu.Unlock()
	}
	return l, err
}

func (a *zkAssigner) acquire(max int64) (*Lease, error) {
	sent := a.s.clock.Mono()
	if err := a.ensure(a.forever()); err != nil {
		return nil, err
	}
	if err := a.ensure(a.root + "/idmint/lock"); err != nil {
		return nil, err
	}
	kids, _, err := a.conn.Children(a.forever())
	if err != nil {
		return nil, fmt.Errorf("worker: zookeeper list %s: %w", a.forever(), err)
	}
	node, seq, inUse := "", int64(-1), int64(0)
	for _, k := range kids {
		ep, n, ok := parseLeafNode(k)
		if ok && n <= max {
			inUse++
		}
		if ok && ep == a.endpoint && node == "" {
			node, seq = a.forever()+"/"+k, n
		}
	}
	if node == "" {
		data, _ := json.Marshal(leafEndpoint{IP: a.ip, Port: a.port, Timestamp: a.s.clock.Now().UnixMilli()})
		created, err := a.conn.Create(a.forever()+"/"+a.endpoint+"-", data, zk.FlagSequence, zk.WorldACL(zk.PermAll))
		if err != nil {
			return nil, fmt.Errorf("worker: zookeeper create node for %s: %w", a.endpoint, err)
		}
		n, err := createdSeq(created)
		if err != nil {
			_ = a.conn.Delete(created, -1)
			return nil, err
		}
		node, seq = created, n
		if seq > max {
			// Leaf never frees a sequence number: the range is used up.
			_ = a.conn.Delete(created, -1)
			return nil, &NoFreeIDError{InUse: inUse, Max: max}
		}
	}
	if err := checkRange(seq, max, "zookeeper sequence of "+node); err != nil {
		return nil, err
	}
	if !a.hold(seq) {
		return nil, fmt.Errorf("%w: zookeeper worker id %d (%s) is held by another lease of this process; close it first", ErrHeld, seq, a.endpoint)
	}
	ok := false
	defer func() {
		if !ok {
			a.unhold(seq)
		}
	}()
	lock := a.lockPath(seq)
	if err := a.lock(lock, seq); err != nil {
		return nil, err
	}
	defer func() {
		if !ok {
			_ = a.conn.Delete(lock, -1)
		}
	}()
	_, lst, err := a.conn.Exists(lock)
	if err != nil || lst == nil || lst.EphemeralOwner != a.conn.SessionID() || lst.EphemeralOwner == 0 {
		return nil, fmt.Errorf("worker: zookeeper lock %s not confirmed: %v", lock, err)
	}
	// The lock's owner, not whatever session the client has later, is the
	// session this lease lives on.
	b := &zkBackend{a: a, node: node, lock: lock, seq: seq, session: lst.EphemeralOwner, czxid: lst.Czxid}
	data, st, err := a.conn.Get(node)
	if err != nil {
		return nil, fmt.Errorf("worker: zookeeper read %s: %w", node, err)
	}
	var ep leafEndpoint
	if err := json.Unmarshal(data, &ep); err != nil {
		return nil, fmt.Errorf("worker: zookeeper node %s is not Leaf's {\"ip\",\"port\",\"timestamp\"}: %v", node, err)
	}
	b.ep, b.version = ep, st.Version
	// Claim: rewrite the node unchanged to bump its version, so a writer
	// holding an older version (a previous holder whose session expired
	// unnoticed) can no longer move the horizon.
	if err := b.write(ep.Timestamp); err != nil {
		return nil, err
	}
	var horizon time.Time
	if ep.Timestamp > 0 {
		horizon = time.UnixMilli(ep.Timestamp).UTC()
	}
	s := a.s
	if neg := time.Duration(a.timeout.Load()) * time.Millisecond; neg > 0 && neg < s.ttl {
		s.ttl = neg // the server granted less than asked: judge by that
		if s.margin >= s.ttl {
			s.margin = s.ttl / 5
		}
	}
	s.interval = min(s.ttl/3, zkReport)
	ok = true
	return newLease(s, seq, lst.Czxid, horizon, b, sent, true), nil
}

// hold marks seq as taken by a lease of this assigner; false when one
// already holds it.
func (a *zkAssigner) hold(seq int64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.held[seq] {
		return false
	}
	a.held[seq] = true
	return true
}

func (a *zkAssigner) unhold(seq int64) {
	a.mu.Lock()
	delete(a.held, seq)
	a.mu.Unlock()
}

// lock creates the ephemeral lock node of seq. A lock our own session
// owns while no lease of ours holds seq is stale (its lease was closed but
// the delete did not get through): it is deleted and taken afresh, so the
// process never waits on itself. A lock of another session means another
// live process: ErrHeld.
func (a *zkAssigner) lock(lock string, seq int64) error {
	ld, _ := json.Marshal(zkLock{Holder: a.s.holder, Since: a.s.clock.Now().UTC()})
	for attempt := 0; ; attempt++ {
		_, err := a.conn.Create(lock, ld, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		if err == nil {
			return nil
		}
		if !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("worker: zookeeper lock %s: %w", lock, err)
		}
		held := fmt.Errorf("%w: zookeeper worker id %d (%s) is locked by a live session; it frees within the session timeout if that process is gone", ErrHeld, seq, a.endpoint)
		if attempt > 0 {
			return held
		}
		found, st, err := a.conn.Exists(lock)
		if err != nil {
			return fmt.Errorf("worker: zookeeper lock %s: %w", lock, err)
		}
		if found && (st.EphemeralOwner != a.conn.SessionID() || st.EphemeralOwner == 0) {
			return held
		}
		if found {
			a.s.logger.Info("zookeeper: deleting a stale lock of this session", "lock", lock, "czxid", st.Czxid)
			if err := a.conn.Delete(lock, st.Version); err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
				return fmt.Errorf("worker: zookeeper delete stale lock %s: %w", lock, err)
			}
		}
	}
}

func (a *zkAssigner) List(ctx context.Context) ([]Holder, error) {
	ctx, cancel := context.WithTimeout(ctx, a.s.timeout)
	defer cancel()
	return ctxcall.Do(ctx, func() ([]Holder, error) {
		kids, _, err := a.conn.Children(a.forever())
		if errors.Is(err, zk.ErrNoNode) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("worker: zookeeper list %s: %w", a.forever(), err)
		}
		byID := map[int64]*Holder{}
		for _, k := range kids {
			ep, seq, ok := parseLeafNode(k)
			if !ok {
				continue
			}
			h := &Holder{ID: seq, Holder: ep}
			if data, st, err := a.conn.Get(a.forever() + "/" + k); err == nil {
				var e leafEndpoint
				if json.Unmarshal(data, &e) == nil && e.Timestamp > 0 {
					h.Horizon = time.UnixMilli(e.Timestamp).UTC()
				}
				h.Since = time.UnixMilli(st.Ctime).UTC()
			}
			if data, st, err := a.conn.Get(a.lockPath(seq)); err == nil {
				var lk zkLock
				if err := json.Unmarshal(data, &lk); err != nil {
					// Still live: the lock node exists. Say what is wrong with it.
					lk.Holder = fmt.Sprintf("(lock unreadable: %v)", err)
				}
				h.Live, h.Generation, h.Since = true, st.Czxid, lk.Since
				h.Holder = ep + " " + lk.Holder
			}
			byID[seq] = h
		}
		return sortHolders(byID), nil
	})
}

func (a *zkAssigner) Close() error { a.conn.Close(); return nil }

type zkBackend struct {
	a          *zkAssigner
	node, lock string
	seq        int64
	session    int64 // the session that created the lock (its EphemeralOwner)
	czxid      int64 // the lock's creation zxid: the lease's generation

	mu      sync.Mutex
	ep      leafEndpoint
	version int32
}

// ours reports whether the client still runs the session that created
// the lock. Once the client has replaced it (after an expiry), the lock is
// gone: ZooKeeper deletes a session's ephemeral nodes when it expires.
func (b *zkBackend) ours() bool { return b.a.conn.SessionID() == b.session }

// write sets the node's timestamp to ts (ms) if the lock is still ours and
// the node still at our version. Callers hold mu or own b exclusively.
//
// A write whose reply was lost may have been applied: the next write then
// meets a version newer than ours and reports the lease lost. The holder
// closes it (which deletes the lock) and acquires again, reading the
// recorded horizon afresh; nothing stays stuck.
func (b *zkBackend) write(ts int64) error {
	if !b.ours() {
		return fmt.Errorf("%w: zookeeper session %#x of worker id %d expired (the client now runs %#x)", ErrLeaseLost, b.session, b.seq, b.a.conn.SessionID())
	}
	ep := b.ep
	ep.Timestamp = ts
	data, _ := json.Marshal(ep)
	res, err := b.a.conn.Multi(
		&zk.CheckVersionRequest{Path: b.lock, Version: -1},
		&zk.SetDataRequest{Path: b.node, Data: data, Version: b.version},
	)
	for _, r := range res {
		if errors.Is(r.Error, zk.ErrNoNode) || errors.Is(r.Error, zk.ErrBadVersion) || errors.Is(r.Error, zk.ErrSessionExpired) {
			return fmt.Errorf("%w: zookeeper worker id %d: %v (lock %s, node %s at version %d)", ErrLeaseLost, b.seq, r.Error, b.lock, b.node, b.version)
		}
	}
	if errors.Is(err, zk.ErrSessionExpired) {
		return fmt.Errorf("%w: zookeeper session %#x of worker id %d expired", ErrLeaseLost, b.session, b.seq)
	}
	if err != nil {
		return fmt.Errorf("worker: zookeeper write %s: %w", b.node, err)
	}
	if len(res) == 2 && res[1].Stat != nil {
		b.version = res[1].Stat.Version
	} else {
		b.version++
	}
	b.ep = ep
	return nil
}

// keepalive is Leaf's 3-second report: the timestamp becomes the larger of
// the recorded horizon and now.
func (b *zkBackend) keepalive(ctx context.Context) error {
	_, err := ctxcall.Do(ctx, func() (struct{}, error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		return struct{}{}, b.write(max(b.ep.Timestamp, b.a.s.clock.Now().UnixMilli()))
	})
	return err
}

func (b *zkBackend) store(ctx context.Context, until time.Time) (time.Time, error) {
	ms := until.UnixMilli()
	if time.UnixMilli(ms).Before(until) {
		ms++ // round up: the horizon may only be over-stated
	}
	return ctxcall.Do(ctx, func() (time.Time, error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		if ms <= b.ep.Timestamp {
			return time.UnixMilli(b.ep.Timestamp).UTC(), nil
		}
		if err := b.write(ms); err != nil {
			return time.Time{}, err
		}
		return time.UnixMilli(ms).UTC(), nil
	})
}

func (b *zkBackend) lower(ctx context.Context, last time.Time) (time.Time, error) {
	ms := last.UnixMilli()
	if time.UnixMilli(ms).Before(last) {
		ms++ // round up: the horizon may only be over-stated
	}
	return ctxcall.Do(ctx, func() (time.Time, error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		if err := b.write(ms); err != nil {
			return time.Time{}, err
		}
		return time.UnixMilli(ms).UTC(), nil
	})
}

// storeConfirms: a horizon write is a request on the lock's session, which
// renews it as a keepalive does.
func (b *zkBackend) storeConfirms() bool { return true }

// release deletes the lock only if this lease's session still owns it
// (same owner and creation zxid): a lock another session took, or one this
// session created for a later lease, is left alone. It frees the worker ID
// for this assigner even when the delete cannot get through in time; the
// next Acquire then deletes the stale lock itself.
//
// ZooKeeper has no delete conditional on the owner: between the check and
// the delete (conditional on the data version) another holder could, in
// theory, replace the lock. It would then lose its lease at its next write,
// before issuing past the horizon recorded under its own claim.
func (b *zkBackend) release(ctx context.Context) error {
	defer b.a.unhold(b.seq)
	_, err := ctxcall.Do(ctx, func() (struct{}, error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		if !b.ours() {
			return struct{}{}, nil // the lock ended with its session
		}
		found, st, err := b.a.conn.Exists(b.lock)
		if err != nil {
			return struct{}{}, fmt.Errorf("worker: zookeeper release %s: %w", b.lock, err)
		}
		if !found || st.EphemeralOwner != b.session || st.Czxid != b.czxid {
			return struct{}{}, nil
		}
		err = b.a.conn.Delete(b.lock, st.Version)
		if err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
			return struct{}{}, fmt.Errorf("worker: zookeeper release %s: %w", b.lock, err)
		}
		return struct{}{}, nil
	})
	return err
}

// cappedDialer dials as go-zookeeper's default does (net.DialTimeout) and
// caps every read and write deadline the client sets on the connection at
// limit from when it sets it. The client waits 10 × ⅔ of the session
// timeout for the answer to a connect request (go-zookeeper v1.0.4,
// authenticate): a server that accepts a connection and does not answer
// (a restarting, overloaded JVM; a black hole) kept it from trying again
// for that long, 20 s at a 3 s TTL, while the worker ID could have been
// re-acquired in 2 × TTL. Its other deadlines are ⅔ of the session
// timeout, under a cap of 2 × TTL even when the server negotiates up to
// three times the requested timeout.
func cappedDialer(limit time.Duration) zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return &cappedConn{Conn: c, limit: limit}, nil
	}
}

type cappedConn struct {
	net.Conn
	limit time.Duration
}

func (c *cappedConn) SetDeadline(t time.Time) error      { return c.Conn.SetDeadline(c.cap(t)) }
func (c *cappedConn) SetReadDeadline(t time.Time) error  { return c.Conn.SetReadDeadline(c.cap(t)) }
func (c *cappedConn) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(c.cap(t)) }

// cap returns t, or now + limit if t is later; the zero time (no
// deadline) stays.
func (c *cappedConn) cap(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	if m := time.Now().Add(c.limit); t.After(m) {
		return m
	}
	return t
}
