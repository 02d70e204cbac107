package monotonic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/idmint/idmint/clock"
)

// Forwarder carries a follower's request to the leader advertised at addr
// for the source called name, and returns the first of n consecutive IDs.
// It returns an error wrapping ErrFenced when that node is not the proven
// leader. Peers is the HTTP implementation.
type Forwarder interface {
	Forward(ctx context.Context, addr, name string, n int64) (first int64, err error)
}

// EtcdConfig configures an Etcd source. Zero values take the defaults.
type EtcdConfig struct {
	// Client is the etcd client (required); the source does not close it.
	Client *clientv3.Client
	// Prefix is where the source keeps its keys (required), for example
	// "/idmint/monotonic/order/": Prefix+"election/" (the
	// concurrency.Election) and Prefix+"bound" (the persisted bound).
	Prefix string
	// Name names the source to peers (the key name).
	Name string
	// Form is Counter (default) or Timestamp.
	Form Form
	// Window and TimeWindow: see FileConfig.
	Window     int64
	TimeWindow time.Duration
	// TTL is the etcd lease TTL of leadership, whole seconds, at least 2.
	// Default 5s. A killed leader is replaced within about TTL.
	TTL time.Duration
	// Margin is taken off the proven lease, for clock-rate differences
	// and scheduling. Default TTL/5.
	Margin time.Duration
	// Timeout bounds each etcd call. Default min(3s, TTL-Margin).
	Timeout time.Duration
	// Advertise is the address peers forward to (stored as the election
	// value). Required with Forward.
	Advertise string
	// Forward reaches the leader from a follower. Nil: followers answer
	// ErrFenced.
	Forward Forwarder
	// NodeName names this process in Leaders' listing (for example its
	// host name). Default: Advertise.
	NodeName string
	// Clock defaults to clock.NewReal(). Leadership is proven on its Mono.
	Clock clock.Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger

	// Witness, when set, also holds the bound, under Space: every bound
	// the leader persists is raised there too before a value up to it is
	// issued (a failed raise fails like a failed bound write), and a new
	// leader starts strictly above the largest of the etcd bound, the mark
	// and Floor. Values issued under another prefix, from a bound file, or
	// before etcd was restored from an older snapshot are then never
	// issued again.
	Witness Witness
	// Space names the key in the witness; default WitnessSpace(Name).
	// Required with Witness when Name is empty.
	Space string
	// Floor is a value every leader starts above (for example the bound a
	// File source of the key left in the data directory: ReadBoundFile).
	Floor int64
}

func (c *EtcdConfig) setDefaults() error {
	if c.Client == nil {
		return fmt.Errorf("%w: etcd client is nil", ErrBadConfig)
	}
	if c.Prefix == "" {
		return fmt.Errorf("%w: prefix is empty", ErrBadConfig)
	}
	if !strings.HasSuffix(c.Prefix, "/") {
		c.Prefix += "/"
	}
	fc := FileConfig{Path: "-", Form: c.Form, Window: c.Window, TimeWindow: c.TimeWindow, Clock: c.Clock}
	if err := fc.setDefaults(); err != nil {
		return err
	}
	c.Window, c.TimeWindow, c.Clock = fc.Window, fc.TimeWindow, fc.Clock
	if c.TTL == 0 {
		c.TTL = 5 * time.Second
	}
	if c.TTL < 2*time.Second || c.TTL%time.Second != 0 {
		return fmt.Errorf("%w: ttl %v must be whole seconds, at least 2s", ErrBadConfig, c.TTL)
	}
	if c.Margin == 0 {
		c.Margin = c.TTL / 5
	}
	if c.Margin <= 0 || c.Margin >= c.TTL {
		return fmt.Errorf("%w: margin %v must be in (0, ttl %v)", ErrBadConfig, c.Margin, c.TTL)
	}
	if c.Timeout == 0 {
		c.Timeout = min(3*time.Second, c.TTL-c.Margin)
	}
	if c.Timeout <= 0 {
		return fmt.Errorf("%w: timeout %v must be positive", ErrBadConfig, c.Timeout)
	}
	if c.Forward != nil && c.Advertise == "" {
		return fmt.Errorf("%w: advertise is empty: followers could not forward to this node", ErrBadConfig)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.NodeName == "" {
		c.NodeName = c.Advertise
	}
	if c.Witness != nil && c.Space == "" {
		if c.Name == "" {
			return fmt.Errorf("%w: a witness needs a space (or a name)", ErrBadConfig)
		}
		c.Space = WitnessSpace(c.Name)
	}
	if c.Floor < 0 {
		return fmt.Errorf("%w: floor %d is negative", ErrBadConfig, c.Floor)
	}
	return nil
}

// Etcd is the cluster Source: every node sharing the etcd prefix runs one;
// the elected leader issues from memory below a fenced, persisted bound,
// followers forward through Forward (coalescing concurrent requests).
type Etcd struct {
	cfg    EtcdConfig
	term   atomic.Pointer[term]
	leader atomic.Pointer[string] // last known leader address

	failovers atomic.Int64 // terms this node won
	forwarded atomic.Int64 // requests this node forwarded
	served    atomic.Int64 // forwarded requests this node served as leader

	fw     *coalescer
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool
}

// term is one leadership of this node.
type term struct {
	c     *core
	valid atomic.Int64 // Mono ns until which leadership is proven; 0: lost
	key   string
	rev   int64
	clk   clock.Clock
}

func (t *term) ok() bool { return t.clk.Mono() < time.Duration(t.valid.Load()) }

// confirm raises the proven deadline to sent+d, never from 0.
func (t *term) confirm(v time.Duration) {
	for {
		old := t.valid.Load()
		if old == 0 || old >= int64(v) {
			return
		}
		if t.valid.CompareAndSwap(old, int64(v)) {
			return
		}
	}
}

// NewEtcd starts campaigning for leadership in the background and returns
// at once; until a leader is known, Next returns ErrFenced.
func NewEtcd(cfg EtcdConfig) (*Etcd, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	e := &Etcd{cfg: cfg}
	e.fw = &coalescer{send: e.forwardBatch, max: 4}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.wg.Add(1)
	go e.run(ctx)
	return e, nil
}

func (e *Etcd) boundKey() string    { return e.cfg.Prefix + "bound" }
func (e *Etcd) electionKey() string { return e.cfg.Prefix + "election/" }
func (e *Etcd) leaderKey() string   { return e.cfg.Prefix + "leader" }

// Next reserves n consecutive IDs: from memory on the proven leader,
// through the leader otherwise.
func (e *Etcd) Next(ctx context.Context, n int64) (int64, error) {
	if e.closed.Load() {
		return 0, ErrClosed
	}
	if n < 1 || n > MaxCount {
		return 0, fmt.Errorf("%w: %d is not in 1..%d", ErrBadCount, n, MaxCount)
	}
	first, err := e.NextLocal(ctx, n)
	if !errors.Is(err, ErrFenced) || e.cfg.Forward == nil {
		return first, err
	}
	e.forwarded.Add(1)
	return e.fw.submit(ctx, n)
}

// NextLocal reserves n IDs only if this node is the proven leader, and
// returns ErrFenced otherwise. Peers call it for forwarded requests, so a
// request is forwarded at most once.
func (e *Etcd) NextLocal(ctx context.Context, n int64) (int64, error) {
	if e.closed.Load() {
		return 0, ErrClosed
	}
	t := e.term.Load()
	if t == nil {
		return 0, ErrFenced
	}
	return t.c.next(ctx, n)
}

func (e *Etcd) serveForwarded(ctx context.Context, n int64) (int64, error) {
	first, err := e.NextLocal(ctx, n)
	if err == nil {
		e.served.Add(1)
	}
	return first, err
}

// forwardBatch sends one coalesced request to the leader, finding it
// again (up to a few times, within ctx) when the one known is not.
func (e *Etcd) forwardBatch(ctx context.Context, n int64) (int64, error) {
	var last error
	for attempt := 0; attempt < 4; attempt++ {
		if attempt > 0 {
			if err := e.cfg.Clock.Sleep(ctx, time.Duration(attempt)*50*time.Millisecond); err != nil {
				break
			}
		}
		// The leader may be this node, elected meanwhile.
		if first, err := e.NextLocal(ctx, n); err == nil || !errors.Is(err, ErrFenced) {
			return first, err
		}
		addr := e.knownLeader()
		if addr == "" || attempt > 0 {
			a, err := e.findLeader(ctx)
			if err != nil {
				last = err
				continue
			}
			addr = a
		}
		if addr == "" || addr == e.cfg.Advertise {
			last = fmt.Errorf("%w: no other leader known", ErrFenced)
			continue
		}
		first, err := e.cfg.Forward.Forward(ctx, addr, e.cfg.Name, n)
		if err == nil {
			return first, nil
		}
		last = err
		e.leader.Store(nil)
	}
	if last == nil {
		last = ctx.Err()
	}
	if !errors.Is(last, ErrFenced) {
		last = fmt.Errorf("%w: forward to leader: %v", ErrFenced, last)
	}
	return 0, last
}

func (e *Etcd) knownLeader() string {
	if p := e.leader.Load(); p != nil {
		return *p
	}
	return ""
}

// findLeader reads the election's leader (the key with the lowest create
// revision, as concurrency.Election.Leader does).
func (e *Etcd) findLeader(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	resp, err := e.cfg.Client.Get(ctx, e.electionKey(), clientv3.WithFirstCreate()...)
	if err != nil {
		return "", fmt.Errorf("monotonic: find leader: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	a := string(resp.Kvs[0].Value)
	e.leader.Store(&a)
	return a, nil
}

// Leader returns the address of the leader this node last knew ("" for
// none) and whether this node is the proven leader now.
func (e *Etcd) Leader() (addr string, self bool) {
	if t := e.term.Load(); t != nil && t.ok() {
		return e.cfg.Advertise, true
	}
	return e.knownLeader(), false
}

// Status is a snapshot for metrics.
type Status struct {
	Leader    bool
	Last      int64 // last issued by this node's current term
	Bound     int64 // persisted bound of this node's current term
	Failovers int64 // leadership terms this node won
	Forwarded int64 // requests this node forwarded to a leader
	Served    int64 // forwarded requests this node served as leader
}

// Status returns the node's view.
func (e *Etcd) Status() Status {
	s := Status{Failovers: e.failovers.Load(), Forwarded: e.forwarded.Load(), Served: e.served.Load()}
	if t := e.term.Load(); t != nil {
		s.Leader = t.ok()
		s.Last, s.Bound = t.c.headroom()
	}
	return s
}

// Close stops issuing, resigns leadership (revoking its lease, so a
// successor need not wait for the TTL) and waits for the background work.
func (e *Etcd) Close() error {
	if e.closed.Swap(true) {
		return nil
	}
	if t := e.term.Load(); t != nil {
		t.valid.Store(0)
	}
	e.cancel()
	e.wg.Wait()
	return nil
}

func (e *Etcd) run(ctx context.Context) {
	defer e.wg.Done()
	for ctx.Err() == nil {
		if err := e.campaign(ctx); err != nil && ctx.Err() == nil {
			e.cfg.Logger.Warn("monotonic leadership ended", "name", e.cfg.Name, "err", err)
		}
		_ = e.cfg.Clock.Sleep(ctx, 200*time.Millisecond)
	}
}

// campaign runs one session: wait to be elected, lead until the lease is
// lost, and give the lease back.
func (e *Etcd) campaign(ctx context.Context) error {
	cli := e.cfg.Client
	gctx, gcancel := context.WithTimeout(ctx, e.cfg.Timeout)
	grant, err := cli.Grant(gctx, int64(e.cfg.TTL/time.Second))
	gcancel()
	if err != nil {
		return fmt.Errorf("monotonic: etcd grant: %w", err)
	}
	defer func() {
		rctx, rcancel := context.WithTimeout(context.Background(), e.cfg.Timeout)
		_, _ = cli.Revoke(rctx, grant.ID)
		rcancel()
	}()
	sess, err := concurrency.NewSession(cli, concurrency.WithLease(grant.ID), concurrency.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("monotonic: etcd session: %w", err)
	}
	defer sess.Orphan() // the deferred Revoke above ends the lease
	el := concurrency.NewElection(sess, e.electionKey())
	// Follow the leader while waiting.
	octx, ocancel := context.WithCancel(ctx)
	defer ocancel()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for resp := range el.Observe(octx) {
			if len(resp.Kvs) > 0 {
				a := string(resp.Kvs[0].Value)
				e.leader.Store(&a)
			}
		}
	}()
	if err := el.Campaign(ctx, e.cfg.Advertise); err != nil {
		return fmt.Errorf("monotonic: campaign: %w", err)
	}
	t := &term{key: el.Key(), rev: el.Rev(), clk: e.cfg.Clock}
	// Prove the lease afresh: the campaign may have waited for long.
	sent := e.cfg.Clock.Mono()
	kctx, kcancel := context.WithTimeout(ctx, e.cfg.Timeout)
	_, err = cli.KeepAliveOnce(kctx, grant.ID)
	kcancel()
	if err != nil {
		return fmt.Errorf("monotonic: keepalive after election: %w", err)
	}
	t.valid.Store(int64(sent + e.cfg.TTL - e.cfg.Margin))
	bctx, bcancel := context.WithTimeout(ctx, e.cfg.Timeout)
	resp, err := cli.Get(bctx, e.boundKey())
	bcancel()
	if err != nil {
		return fmt.Errorf("monotonic: read bound: %w", err)
	}
	var start int64
	if len(resp.Kvs) == 1 {
		start, err = strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
		if err != nil || start < 0 {
			return fmt.Errorf("monotonic: bound %s is corrupt (%q)", e.boundKey(), trunc(string(resp.Kvs[0].Value)))
		}
	}
	// Start above what this key may have issued elsewhere: from a bound
	// file, under another prefix, or before etcd went back.
	wctx, wcancel := context.WithTimeout(ctx, e.cfg.Timeout)
	mark, err := readMark(wctx, e.cfg.Witness, e.cfg.Space)
	wcancel()
	if err != nil {
		return err
	}
	if known := max(mark, e.cfg.Floor); known > start {
		e.cfg.Logger.Info("monotonic: source starts above a bound known elsewhere", "name", e.cfg.Name,
			"source_bound", start, "known_bound", known, "witness_mark", mark, "floor", e.cfg.Floor, "source", "etcd "+e.boundKey())
		start = known
	}
	persist := func(ctx context.Context, bound int64) error {
		r, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(t.key), "=", t.rev)).
			Then(clientv3.OpPut(e.boundKey(), strconv.FormatInt(bound, 10))).
			Commit()
		if err != nil {
			return fmt.Errorf("monotonic: persist bound: %w", err)
		}
		if !r.Succeeded {
			t.valid.Store(0)
			return fmt.Errorf("%w: election key %s (revision %d) is gone; bound not moved", ErrFenced, t.key, t.rev)
		}
		if e.cfg.Witness != nil {
			return raiseMark(ctx, e.cfg.Witness, e.cfg.Space, bound)
		}
		return nil
	}
	t.c = newCore(e.cfg.Form, e.cfg.Clock, e.cfg.Window, e.cfg.TimeWindow, e.cfg.Timeout, start, persist, t.ok)
	defer t.c.close()
	// Persist a first window before serving, so the first requests do not
	// wait for a write.
	if err := t.c.extend(ctx, t.c.target(start+1)); err != nil {
		return err
	}
	e.failovers.Add(1)
	e.term.Store(t)
	self := e.cfg.Advertise
	e.leader.Store(&self)
	e.cfg.Logger.Info("monotonic leader elected", "name", e.cfg.Name, "start_above", start, "revision", t.rev)
	e.publish(ctx, t, grant.ID)
	defer func() {
		t.valid.Store(0)
		e.term.CompareAndSwap(t, nil)
	}()
	return e.lead(ctx, t, sess, grant.ID)
}

// publish records who leads, since when, for Leaders: under the term's
// fence, attached to its lease so it goes with it. Best effort: a failure
// is logged and the listing falls back to the election's address.
func (e *Etcd) publish(ctx context.Context, t *term, lease clientv3.LeaseID) {
	rec, err := json.Marshal(leaderRecord{Node: e.cfg.NodeName, Advertise: e.cfg.Advertise, Since: e.cfg.Clock.Now().UTC(), Revision: t.rev})
	if err != nil {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	_, err = e.cfg.Client.Txn(pctx).
		If(clientv3.Compare(clientv3.CreateRevision(t.key), "=", t.rev)).
		Then(clientv3.OpPut(e.leaderKey(), string(rec), clientv3.WithLease(lease))).
		Commit()
	if err != nil && ctx.Err() == nil {
		e.cfg.Logger.Warn("monotonic leader record not written", "name", e.cfg.Name, "err", err)
	}
}

// lead keeps the lease proven until it is lost.
func (e *Etcd) lead(ctx context.Context, t *term, sess *concurrency.Session, lease clientv3.LeaseID) error {
	every := e.cfg.TTL / 3
	next := every
	for {
		select {
		case <-sess.Done():
			return errors.New("monotonic: etcd session ended")
		default:
		}
		if t.valid.Load() == 0 {
			return errors.New("monotonic: leadership fenced by a failed bound write")
		}
		if err := e.cfg.Clock.Sleep(ctx, next); err != nil {
			return nil
		}
		sent := e.cfg.Clock.Mono()
		kctx, kcancel := context.WithTimeout(ctx, e.cfg.Timeout)
		_, err := e.cfg.Client.KeepAliveOnce(kctx, lease)
		kcancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil:
			t.confirm(sent + e.cfg.TTL - e.cfg.Margin)
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			return fmt.Errorf("monotonic: lease lost: %w", err)
		default:
			e.cfg.Logger.Warn("monotonic keepalive failed; leading until the proven deadline", "name", e.cfg.Name, "err", err)
		}
		next = max(every-(e.cfg.Clock.Mono()-sent), every/10)
	}
}

// coalescer merges concurrent forwarded requests into batches, at most
// max round trips in flight.
type coalescer struct {
	send func(ctx context.Context, n int64) (int64, error)
	max  int

	mu       sync.Mutex
	pending  []*fwdReq
	inflight int
}

type fwdReq struct {
	n     int64
	first int64
	err   error
	done  chan struct{}
}

func (c *coalescer) submit(ctx context.Context, n int64) (int64, error) {
	r := &fwdReq{n: n, done: make(chan struct{})}
	c.mu.Lock()
	c.pending = append(c.pending, r)
	start := c.inflight < c.max
	if start {
		c.inflight++
	}
	c.mu.Unlock()
	if start {
		go c.flush()
	}
	select {
	case <-r.done:
		return r.first, r.err
	case <-ctx.Done():
		return 0, ctx.Err() // the values, if any arrive, become a gap
	}
}

// flushTimeout bounds one forwarded round trip, whatever the callers'
// deadlines (a batch serves several callers).
const flushTimeout = 3 * time.Second

func (c *coalescer) flush() {
	for {
		c.mu.Lock()
		var batch []*fwdReq
		var total int64
		for len(c.pending) > 0 && (len(batch) == 0 || total+c.pending[0].n <= MaxCount) {
			batch = append(batch, c.pending[0])
			total += c.pending[0].n
			c.pending[0] = nil
			c.pending = c.pending[1:]
		}
		if len(batch) == 0 {
			c.inflight--
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		first, err := c.send(ctx, total)
		cancel()
		off := int64(0)
		for _, r := range batch {
			if err != nil {
				r.err = err
			} else if first > math.MaxInt64-off {
				r.err = ErrExhausted
			} else {
				r.first = first + off
				off += r.n
			}
			close(r.done)
		}
	}
}
