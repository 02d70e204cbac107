// Package node wires a snowflake generator to a worker-ID lease: the one
// constructor the server and the CLI use to run a snowflake node.
//
// New acquires a lease from the coordinator, builds the generator with the
// lease as its Horizon (design.md U3) and Fence (U4), and watches the lease:
// when it is lost, the node stops issuing, acquires a new lease (perhaps a
// different worker ID), and builds a new generator that starts strictly
// after that ID's recorded horizon. Close releases the lease; the horizon
// stays recorded for the next holder.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/snowflake"
	"github.com/idmint/idmint/worker"
)

// ErrNoLease is returned by Next while the node holds no worker lease: it
// lost its lease and is acquiring a new one. Retrying later succeeds once
// it has.
var ErrNoLease = errors.New("node: no worker lease (re-acquiring)")

// ErrClosed is returned by Next after Close.
var ErrClosed = errors.New("node: closed")

// ErrConfig is wrapped by every error about a Config; the message names the
// field and the value.
var ErrConfig = errors.New("node: bad config")

// Config configures a Node. Zero values have the documented defaults.
type Config struct {
	// Layout is the bit layout. Required.
	Layout snowflake.Layout
	// Coordinator is a worker.Open URL ("etcd://127.0.0.1:2379/idmint?name=app").
	// Exactly one of Coordinator and Assigner must be set.
	Coordinator string
	// Assigner grants the leases when Coordinator is empty. The node does
	// not close it.
	Assigner worker.Assigner
	// WorkerField is the layout's node field the worker ID fills. Empty
	// means the only node field, or the one named "worker".
	WorkerField string
	// Node gives the values of the layout's other node fields (datacenter).
	Node map[string]int64
	// WorkerLimit, when positive, narrows the worker IDs the node may take
	// to 0..WorkerLimit-1 (a subset of the field's range). Zero means every
	// value of the field.
	WorkerLimit int64
	// WorkerBase is added to the leased worker ID to fill the worker
	// field: the coordinator leases 0..WorkerLimit-1 and the IDs carry
	// WorkerBase..WorkerBase+WorkerLimit-1 (a region's slice of the field,
	// when regions split the worker IDs). Zero: the leased ID itself.
	WorkerBase int64
	// Worker options (TTL, margin, timeout, holder) for Coordinator.
	// WithClock is added from Clock.
	Worker []worker.Option
	// Clock is the time source of the generator and the leases; an
	// Assigner must have been built WithClock of the same Clock. Nil means
	// the Assigner's clock, or clock.NewReal() with Coordinator.
	Clock clock.Clock
	// Generator is the template for the generator's settings (overflow and
	// rollback policies, HorizonLead, ...). Node, Clock, Horizon and Fence
	// are set by the node.
	Generator snowflake.Settings
	// AcquireWait is how long New keeps retrying while every worker ID is
	// held (or this process's own ID is still held by a previous, dying
	// session). Zero means one attempt.
	AcquireWait time.Duration
	// Retry is the pause between acquisition attempts. Zero means 500 ms.
	Retry time.Duration
	// Logger receives lease loss and re-acquisition. Nil discards.
	Logger *slog.Logger
	// HorizonDir, when set, is a directory on this node's own disk where
	// the node also keeps the horizon of every worker ID it holds (one
	// snowflake.FileHorizon per ID, horizon-<FILE>-<ID>), a second witness
	// beside the coordinator's record: a coordinator restored from an
	// older snapshot (etcd snapshot restore, a ZooKeeper data directory
	// from backup) cannot make this node stamp at or below what it stamped
	// under that ID before. HorizonFile names the file's middle part
	// (default the worker field's name); nodes of different layouts in
	// one directory need different names.
	HorizonDir, HorizonFile string
}

// Node issues snowflake IDs under a worker-ID lease. Safe for concurrent use.
type Node struct {
	cfg      Config
	clk      clock.Clock
	assigner worker.Assigner
	own      bool
	adopted  bool // clk was taken from the Assigner's leases
	field    string
	maxID    int64
	log      *slog.Logger

	cur    atomic.Pointer[binding]
	lastMu sync.Mutex
	last   error // why cur is nil

	// floors holds, per worker ID this node held before, the horizon its
	// last lease on that ID had recorded. Only the goroutine that binds
	// (New, then watch) touches it.
	floors map[int64]time.Time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool
}

// binding is one lease and the generator built on it.
type binding struct {
	lease *worker.Lease
	gen   *snowflake.Generator
}

// New validates cfg, acquires a worker lease (retrying for up to
// cfg.AcquireWait when none is free) and returns a Node ready to issue.
// An ID outside the worker field's range fails with worker.ErrOutOfRange.
func New(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.Layout.IsZero() {
		return nil, fmt.Errorf("%w: Layout is not set", ErrConfig)
	}
	if (cfg.Coordinator == "") == (cfg.Assigner == nil) {
		return nil, fmt.Errorf("%w: set exactly one of Coordinator and Assigner", ErrConfig)
	}
	n := &Node{cfg: cfg, clk: cfg.Clock, assigner: cfg.Assigner, log: cfg.Logger, floors: map[int64]time.Time{}}
	if n.clk == nil {
		n.clk = clock.NewReal()
	}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	if n.cfg.Retry <= 0 {
		n.cfg.Retry = 500 * time.Millisecond
	}
	if err := n.pickField(); err != nil {
		return nil, err
	}
	if n.assigner == nil {
		opts := append([]worker.Option{worker.WithClock(n.clk), worker.WithLogger(n.log)}, cfg.Worker...)
		a, err := worker.Open(ctx, cfg.Coordinator, opts...)
		if err != nil {
			return nil, err
		}
		n.assigner, n.own = a, true
	}
	b, err := n.acquire(ctx, cfg.AcquireWait)
	if err != nil {
		if n.own {
			n.assigner.Close()
		}
		return nil, err
	}
	n.cur.Store(b)
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.wg.Add(1)
	go n.watch(b)
	return n, nil
}

func (n *Node) pickField() error {
	nodes := n.cfg.Layout.NodeFields()
	if n.cfg.WorkerField == "" {
		switch {
		case len(nodes) == 1:
			n.cfg.WorkerField = nodes[0].Name
		default:
			n.cfg.WorkerField = "worker"
		}
	}
	for _, f := range nodes {
		if f.Name != n.cfg.WorkerField {
			continue
		}
		n.field = f.Name
		n.maxID = 1<<f.Bits - 1
		if n.cfg.WorkerLimit < 0 || n.cfg.WorkerLimit-1 > n.maxID {
			return fmt.Errorf("%w: WorkerLimit %d does not fit the %d-bit field %q (at most %d IDs)", ErrConfig, n.cfg.WorkerLimit, f.Bits, f.Name, n.maxID+1)
		}
		if n.cfg.WorkerLimit > 0 {
			n.maxID = n.cfg.WorkerLimit - 1
		}
		if b := n.cfg.WorkerBase; b < 0 || b+n.maxID > 1<<f.Bits-1 {
			return fmt.Errorf("%w: WorkerBase %d with %d worker IDs does not fit the %d-bit field %q", ErrConfig, b, n.maxID+1, f.Bits, f.Name)
		}
		if _, ok := n.cfg.Node[f.Name]; ok {
			return fmt.Errorf("%w: Node[%q] is set, but that field takes the worker ID", ErrConfig, f.Name)
		}
		return nil
	}
	names := make([]string, 0, len(nodes))
	for _, f := range nodes {
		names = append(names, f.Name)
	}
	return fmt.Errorf("%w: WorkerField %q is not a node field of layout %q (node fields: %v)", ErrConfig, n.cfg.WorkerField, n.cfg.Layout.Name(), names)
}

// retryable reports whether waiting may help: IDs held by others, or the
// coordinator unreachable.
func retryable(err error) bool {
	return !errors.Is(err, worker.ErrOutOfRange) && !errors.Is(err, worker.ErrBadURL) &&
		!errors.Is(err, worker.ErrBadOption) && !errors.Is(err, snowflake.ErrInvalidSettings) &&
		!errors.Is(err, snowflake.ErrInvalidNode) && !errors.Is(err, snowflake.ErrLayoutExpired) &&
		!errors.Is(err, ErrConfig)
}

func (n *Node) acquire(ctx context.Context, wait time.Duration) (*binding, error) {
	deadline := n.clk.Mono() + wait
	for {
		b, err := n.bind(ctx)
		if err == nil {
			return b, nil
		}
		if !retryable(err) || (wait >= 0 && n.clk.Mono()+n.cfg.Retry > deadline) {
			return nil, err
		}
		n.log.Info("node: waiting for a worker id", "err", err)
		if serr := n.clk.Sleep(ctx, n.cfg.Retry); serr != nil {
			return nil, fmt.Errorf("%w (last: %w)", serr, err)
		}
	}
}

func (n *Node) bind(ctx context.Context) (*binding, error) {
	l, err := n.assigner.Acquire(ctx, n.maxID)
	if err != nil {
		return nil, err
	}
	s := n.cfg.Generator
	s.Node = make(map[string]int64, len(n.cfg.Node)+1)
	for k, v := range n.cfg.Node {
		s.Node[k] = v
	}
	s.Node[n.field] = n.cfg.WorkerBase + l.ID()
	if n.cfg.Clock == nil && !n.own && n.cur.Load() == nil && !n.adopted {
		// An Assigner given without Config.Clock: run on its clock.
		n.clk, n.adopted = l.Clock(), true
	}
	if l.Clock() != n.clk {
		l.Close()
		return nil, fmt.Errorf("%w: the Assigner's clock is not Config.Clock: the lease's fence would be judged on another monotonic clock (give both the same clock.Clock)", ErrConfig)
	}
	s.Clock, s.Horizon, s.Fence = n.clk, l, l
	f, ok := n.floors[l.ID()]
	if ok || n.cfg.HorizonDir != "" {
		// The lease answers at least what this node's earlier leases on the
		// ID recorded, and what its own file keeps.
		fl := snowflake.Floored{Horizon: l, Floor: f}
		if n.cfg.HorizonDir != "" {
			name := n.cfg.HorizonFile
			if name == "" {
				name = n.field
			}
			fl.Local = snowflake.NewFileHorizon(filepath.Join(n.cfg.HorizonDir, fmt.Sprintf("horizon-%s-%d", name, l.ID())))
		}
		s.Horizon = fl
	}
	g, err := snowflake.New(n.cfg.Layout, s)
	if err != nil {
		l.Close()
		return nil, err
	}
	n.log.Info("node: worker lease acquired", "worker_id", l.ID(), "generation", l.Generation())
	return &binding{lease: l, gen: g}, nil
}

// retire closes a binding's generator and lease and remembers the horizon
// the lease recorded, every ID the generator issued being stamped at or
// below it.
func (n *Node) retire(b *binding) {
	b.gen.Close()
	if h, err := b.lease.Load(context.Background()); err == nil && h.After(n.floors[b.lease.ID()]) {
		n.floors[b.lease.ID()] = h
	}
	b.lease.Close()
}

// watch replaces the binding when its lease is lost.
func (n *Node) watch(b *binding) {
	defer n.wg.Done()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-b.lease.Done():
		}
		lost := b.lease.Err()
		n.setLast(fmt.Errorf("%w: worker id %d generation %d: %w", ErrNoLease, b.lease.ID(), b.lease.Generation(), lost))
		n.cur.CompareAndSwap(b, nil)
		n.retire(b)
		n.log.Warn("node: worker lease lost; re-acquiring", "worker_id", b.lease.ID(), "err", lost)
		nb, err := n.acquire(n.ctx, -1)
		if err != nil {
			if n.ctx.Err() == nil {
				n.setLast(fmt.Errorf("%w: %w", ErrNoLease, err))
				n.log.Error("node: cannot re-acquire a worker id", "err", err)
			}
			return
		}
		if n.closed.Load() {
			nb.gen.Close()
			nb.lease.Close()
			return
		}
		n.cur.Store(nb)
		b = nb
	}
}

func (n *Node) setLast(err error) {
	n.lastMu.Lock()
	n.last = err
	n.lastMu.Unlock()
}

func (n *Node) noLease() error {
	if n.closed.Load() {
		return ErrClosed
	}
	n.lastMu.Lock()
	defer n.lastMu.Unlock()
	if n.last != nil {
		return n.last
	}
	return ErrNoLease
}

// Next returns a new ID. While the lease cannot be proven valid it returns
// snowflake.ErrFenced; while the node is re-acquiring a lease, an error
// wrapping ErrNoLease; see snowflake.Generator.Next for the rest. On error
// the ID is 0.
func (n *Node) Next(ctx context.Context) (int64, error) {
	b := n.cur.Load()
	if b == nil {
		return 0, n.noLease()
	}
	return b.gen.Next(ctx)
}

// NextN fills dst with new, strictly increasing IDs and returns how many it
// wrote; on error, those written are valid.
func (n *Node) NextN(ctx context.Context, dst []int64) (int, error) {
	b := n.cur.Load()
	if b == nil {
		return 0, n.noLease()
	}
	return b.gen.NextN(ctx, dst)
}

// LeaseLeft returns how long the current worker lease stays proven on the
// node's monotonic clock (its fence: send time of the last confirmed
// keepalive + TTL - margin, minus now), and whether it can expire at all
// (file and static leases cannot). It is 0 while no lease is held or once
// the fence has closed.
func (n *Node) LeaseLeft() (left time.Duration, expires bool) {
	b := n.cur.Load()
	if b == nil {
		return 0, true
	}
	until := b.lease.ValidUntil()
	if until == time.Duration(math.MaxInt64) {
		return 0, false
	}
	return max(0, until-b.lease.Clock().Mono()), true
}

// Layout returns the node's layout.
func (n *Node) Layout() snowflake.Layout { return n.cfg.Layout }

// WorkerID returns the worker ID held now and the lease's generation;
// ok is false while the node holds no lease.
func (n *Node) WorkerID() (id, generation int64, ok bool) {
	b := n.cur.Load()
	if b == nil {
		return 0, 0, false
	}
	return b.lease.ID(), b.lease.Generation(), true
}

// Ahead returns how far the time stamped on the current generator's last
// ID runs ahead of the wall clock (snowflake.Generator.Ahead): 0 normally,
// positive after borrowing future ticks or bridging a rollback. It is 0
// while the node holds no lease. Cheap enough for every metrics scrape.
func (n *Node) Ahead() time.Duration {
	if b := n.cur.Load(); b != nil {
		return b.gen.Ahead()
	}
	return 0
}

// Horizon returns the latest time the current generator may stamp under
// the horizon recorded in its lease (snowflake.Generator.Horizon), or the
// zero time while the node holds no lease or no horizon is recorded yet.
func (n *Node) Horizon() time.Time {
	if b := n.cur.Load(); b != nil {
		return b.gen.Horizon()
	}
	return time.Time{}
}

// WorkerPool returns how many worker IDs the node may take: 0..n-1, the
// worker field's range narrowed by Config.WorkerLimit.
func (n *Node) WorkerPool() int64 { return n.maxID + 1 }

// Workers lists the worker IDs the node's coordinator knows (for
// `idmint workers`).
func (n *Node) Workers(ctx context.Context) ([]worker.Holder, error) {
	return n.assigner.List(ctx)
}

// Close stops issuing, releases the lease (its horizon stays recorded for
// the next holder) and closes the assigner if the node opened it.
// Idempotent.
func (n *Node) Close() error {
	if !n.closed.CompareAndSwap(false, true) {
		return nil
	}
	n.cancel()
	n.wg.Wait()
	var err error
	if b := n.cur.Swap(nil); b != nil {
		b.gen.Close()
		err = b.lease.Close()
	}
	if n.own {
		err = errors.Join(err, n.assigner.Close())
	}
	return err
}
