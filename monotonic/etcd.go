package monotonic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/internal/mutate"
)

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

	// Mutations puts known, fixed mistakes back, for the module's own
	// simulation tests; its type is internal to the module, so other code
	// can set only nil (no mistakes).
	Mutations *mutate.Set

	// keepAlive renews the lease once (tests slow it down); default
	// Client.KeepAliveOnce.
	keepAlive func(ctx context.Context, id clientv3.LeaseID) error
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
	is := issuing{Form: c.Form, Window: c.Window, TimeWindow: c.TimeWindow, Clock: c.Clock}
	if err := is.setDefaults(); err != nil {
		return err
	}
	c.Form, c.Window, c.TimeWindow, c.Clock = is.Form, is.Window, is.TimeWindow, is.Clock
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
	if c.keepAlive == nil {
		cli := c.Client
		c.keepAlive = func(ctx context.Context, id clientv3.LeaseID) error {
			_, err := cli.KeepAliveOnce(ctx, id)
			return err
		}
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
//
// One leader issues at a time, whatever happens to etcd's keys: a leader
// stops the moment it sees its election key or lease gone (an operator's
// lease revoke, a deleted key), and a new leader does not issue while its
// predecessor could still believe it leads (see handover in election.go).
type Etcd struct {
	cfg    EtcdConfig
	term   atomic.Pointer[term]
	leader atomic.Pointer[string] // last known leader address
	recs   records                // the leader record and the latest term proof, as watched

	failovers atomic.Int64 // terms this node won
	wentBack  atomic.Int64 // terms won whose etcd bound was below the witness's mark
	forwarded atomic.Int64 // requests this node forwarded
	served    atomic.Int64 // forwarded requests this node served as leader

	fw     *coalescer
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool
}

// NewEtcd starts campaigning for leadership in the background and returns
// at once; until a leader is known, Next returns ErrFenced.
func NewEtcd(cfg EtcdConfig) (*Etcd, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	e := &Etcd{cfg: cfg}
	// One forward in flight: the requests that arrive meanwhile go as the
	// next batch. More in flight made smaller batches and, on a busy
	// machine, slower round trips: fewer IDs per second and more CPU per
	// ID (BenchmarkEtcdVia: 1 in flight ~7x the rate of 4, at 1/3 of the
	// CPU per ID).
	// A forwarded round trip is bounded by 3 s, or by Timeout when that is
	// longer (a simulation that keeps time itself sets it very long).
	e.fw = &coalescer{send: e.forwardBatch, max: 1, timeout: max(cfg.Timeout, flushTimeout)}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.wg.Add(2)
	go e.watchRecords(ctx)
	go e.run(ctx)
	return e, nil
}

func (e *Etcd) boundKey() string    { return e.cfg.Prefix + "bound" }
func (e *Etcd) electionKey() string { return e.cfg.Prefix + "election/" }
func (e *Etcd) leaderKey() string   { return e.cfg.Prefix + "leader" }
func (e *Etcd) termKey() string     { return e.cfg.Prefix + "term" }

// Next reserves n consecutive IDs: from memory on the proven leader,
// through the leader otherwise.
func (e *Etcd) Next(ctx context.Context, n int64) (int64, error) {
	if e.closed.Load() {
		return 0, ErrClosed
	}
	if n < 1 || n > MaxCount {
		return 0, fmt.Errorf("%w: %d is not in 1..%d", ErrBadCount, n, MaxCount)
	}
	first, err := e.nextLocal(ctx, n)
	if !errors.Is(err, ErrFenced) || e.cfg.Forward == nil {
		return first, err
	}
	e.forwarded.Add(1)
	return e.fw.submit(ctx, n)
}

// NextLocal reserves n IDs only if this node is the proven leader, and
// returns ErrFenced otherwise. Peers call it for forwarded requests, so a
// request is forwarded at most once; what it serves counts in
// Status.Served.
func (e *Etcd) NextLocal(ctx context.Context, n int64) (int64, error) {
	first, err := e.nextLocal(ctx, n)
	if err == nil {
		e.served.Add(1)
	}
	return first, err
}

func (e *Etcd) nextLocal(ctx context.Context, n int64) (int64, error) {
	if e.closed.Load() {
		return 0, ErrClosed
	}
	t := e.term.Load()
	if t == nil {
		return 0, ErrFenced
	}
	first, err := t.c.next(ctx, n)
	if errors.Is(err, ErrClosed) && !e.closed.Load() {
		// The term ended while this waited for a bound write; the source
		// goes on (another node, or a later term, issues).
		return 0, fmt.Errorf("%w: leadership ended", ErrFenced)
	}
	return first, err
}

// Leader returns the address of the leader this node last knew ("" for
// none) and whether this node is the proven leader now.
func (e *Etcd) Leader() (addr string, self bool) {
	if t := e.term.Load(); t != nil && t.ok() {
		return e.cfg.Advertise, true
	}
	return e.knownLeader(), false
}

// LeaderNode returns the NodeName the leader this node knows published
// (what Leaders lists), "" when none is known, and whether it is this
// node, the proven leader now. A follower learns it from the leader record
// the leader writes just after its election, so for a moment after a
// failover it may be "" (or, until the old leader's record goes with its
// lease, the old one's, when its address is not known yet either).
func (e *Etcd) LeaderNode() (node string, self bool) {
	if t := e.term.Load(); t != nil && t.ok() {
		return e.cfg.NodeName, true
	}
	r := e.recs.leaderRecord()
	if r == nil {
		return "", false
	}
	if addr := e.knownLeader(); addr != "" && addr != r.Advertise {
		return "", false // the record is of another term than the leader followed
	}
	return r.Node, false
}

// Status is a snapshot for metrics.
type Status struct {
	Leader    bool
	Last      int64 // last issued by this node's current term
	Bound     int64 // persisted bound of this node's current term
	Failovers int64 // leadership terms this node won
	Forwarded int64 // requests this node forwarded to a leader
	Served    int64 // forwarded requests this node served as leader
	// WentBack counts the terms this node won whose bound in etcd was
	// below the witness's mark (etcd restored or emptied, the key moved to
	// another prefix): each started above the mark instead.
	WentBack int64
}

// Status returns the node's view.
func (e *Etcd) Status() Status {
	s := Status{Failovers: e.failovers.Load(), Forwarded: e.forwarded.Load(), Served: e.served.Load(), WentBack: e.wentBack.Load()}
	if t := e.term.Load(); t != nil {
		s.Leader = t.ok()
		s.Last, s.Bound = t.c.headroom()
	}
	return s
}

// Close stops issuing, resigns leadership (recording that it resigned and
// revoking its lease, so a successor need not wait) and waits for the
// background work.
func (e *Etcd) Close() error {
	if e.closed.Swap(true) {
		return nil
	}
	if t := e.term.Load(); t != nil {
		t.fence()
	}
	e.cancel()
	e.wg.Wait()
	return nil
}
