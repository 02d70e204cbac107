// Package sim is a deterministic simulation of a few idmint nodes
// sharing worker IDs through one coordinator. Each node runs the real
// worker.Lease (acquire, keepalive, fence, horizon writes) and the real
// snowflake.Generator against its own clock.Fake, whose monotonic time runs
// at global time × (1 + drift) and whose wall clock adds an offset and
// random NTP steps. The coordinator is simulated with etcd-like semantics:
// leases with a TTL counted in its own (global) time, writes conditional on
// the holding's generation, recorded horizons. Messages are delayed or lost,
// nodes pause, crash and restart. One seed fixes every choice; a single
// event loop moves global time, and it waits until every goroutine of the
// real code is parked (on its fake clock or on a coordinator call) before
// it takes the next step, so a seed always replays the same run.
//
// After every issued ID the simulator checks that no ID was issued twice,
// that each generator's IDs strictly increase, that no ID is stamped after
// the horizon the coordinator records for its worker ID, nor at or before
// the horizon recorded when the holding began, and that the coordinator's
// lease for the worker ID was live and of the issuing holding's generation.
package sim

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/internal/mutate"
	"github.com/idmint/idmint/snowflake"
	"github.com/idmint/idmint/worker"
)

// Bugs re-introduces known mistakes through the simulator's seams, to show
// that the checks catch them.
type Bugs struct {
	// NoFence gives the generator no Fence: the node issues without
	// checking its lease.
	NoFence bool
	// StartAtHorizon makes a new holding start at the recorded horizon's
	// tick instead of strictly after it (the Horizon's Load is reported
	// one tick early).
	StartAtHorizon bool
	// DeadlineFromReply starts the lease's validity at the Mono reading
	// taken when the acquire reply arrived instead of before the request
	// was sent. (Keepalive deadlines are computed inside worker.Lease and
	// have no seam; only the acquiring one can be broken this way.)
	DeadlineFromReply bool
	// KeepaliveFromReply takes each keepalive's validity from the time its
	// reply arrived (mutate.LeaseDeadlineFromReply, inside worker.Lease).
	KeepaliveFromReply bool
	// ReviveAfterLoss lets a late keepalive confirmation revive a lease
	// already lost (mutate.LeaseReviveAfterLoss, inside worker.Lease).
	ReviveAfterLoss bool
	// PastHorizon lets the generator stamp one tick past the recorded
	// horizon (mutate.PastHorizon, inside snowflake.Generator).
	PastHorizon bool
}

// mutations are the Bugs that live inside the real code.
func (b Bugs) lease() *mutate.Set {
	var f []mutate.Flag
	if b.KeepaliveFromReply {
		f = append(f, mutate.LeaseDeadlineFromReply)
	}
	if b.ReviveAfterLoss {
		f = append(f, mutate.LeaseReviveAfterLoss)
	}
	if len(f) == 0 {
		return nil
	}
	return mutate.New(f...)
}

func (b Bugs) generator() *mutate.Set {
	if b.PastHorizon {
		return mutate.New(mutate.PastHorizon)
	}
	return nil
}

// Config sets the simulated world. Zero fields take the defaults noted.
type Config struct {
	Nodes    int           // 2..4 by seed when 0
	Duration time.Duration // global time simulated; 0: 25 s
	TTL      time.Duration // 0: 10 s
	Margin   time.Duration // 0: TTL/5 (worker's default)
	MaxDrift float64       // largest |drift| of a node's clock; 0: 500e-6
	// MaxOffset bounds a node's initial wall-clock offset and each NTP
	// step; 0: 300 ms.
	MaxOffset time.Duration
	Bugs      Bugs

	// Dir, when set, gives every node a directory of its own below it,
	// kept across its restarts, where it keeps each worker ID's horizon in
	// a file beside the coordinator's record (snowflake.Floored with a
	// FileHorizon, as idmint serve does in its data directory).
	Dir string
	// Restores snapshots the coordinator at random times and restores it
	// from an older snapshot later (etcd's snapshot restore, with its
	// revisions bumped past the old ones, and every lease refreshed).
	Restores bool
	// LyingDisk loses, at a crash, every write a node's files took since
	// the process started (a disk that acknowledged fsync and lied).
	LyingDisk bool
}

// Result is what one run found.
type Result struct {
	World     string // "snowflake" or "monotonic"
	Seed      uint64
	Issued    int      // IDs issued
	Events    int      // events processed
	Violation string   // empty when every check held
	Trace     []string // the last events before the violation (or the end)
	Hash      uint64   // FNV-1a of the whole trace, for determinism checks
}

// Failed reports whether a check was violated.
func (r Result) Failed() bool { return r.Violation != "" }

// Report is the seed, the violation and the last events, for a failing run.
func (r Result) Report() string {
	var b strings.Builder
	flag := "-sim.seed"
	if r.World == "monotonic" {
		flag = "-sim.monoseed"
	}
	fmt.Fprintf(&b, "sim %s seed %d: %s\n(replay: go test ./testkit/sim -run TestOneSeed %s=%d -v)\nlast %d events:\n", r.World, r.Seed, r.Violation, flag, r.Seed, len(r.Trace))
	for _, e := range r.Trace {
		b.WriteString("  " + e + "\n")
	}
	return b.String()
}

const (
	traceKeep   = 30
	simTimeout  = worker.DefaultTimeout // the sim's request timeout, in node time
	maxWorker   = 7                     // 3-bit worker field
	seqBits     = 4
	issueBurst  = 6
	quiesceWait = 20 * time.Second // real time; only a bug in the sim takes this long
)

var (
	wallStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	layout    = mustLayout()
	errLost   = errors.New("sim: request lost or timed out")
	errDead   = errors.New("sim: process crashed")
)

func mustLayout() snowflake.Layout {
	l, err := snowflake.NewLayout(snowflake.LayoutSpec{Name: "sim", TimeBits: 41, Unit: time.Millisecond,
		Epoch:  time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC),
		Fields: []snowflake.Field{{Name: "worker", Bits: 3}, {Name: snowflake.Seq, Bits: seqBits}}})
	if err != nil {
		panic(err)
	}
	return l
}

func tickOf(id int64) int64 { return id >> (3 + seqBits) }
func tickTime(t int64) time.Time {
	return layout.Epoch().Add(time.Duration(t) * layout.Unit())
}

// ---- events ----

type event struct {
	at  time.Duration // global time
	seq int64
	do  func()
}

type queue []*event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *queue) Pop() any     { o := *q; e := o[len(o)-1]; *q = o[:len(o)-1]; return e }

// ---- coordinator ----

// The coordinator follows etcd's worker-ID layout (see worker/etcd.go): a
// claim key per worker ID attached to its holder's lease, whose create
// revision is the holding's generation, and a persistent horizon key that
// only the holder of the current claim may write. Leases are kept in the
// coordinator's own (global) time.

type slot struct {
	gen     int64 // generation of the current claim; 0 when the key was deleted
	node    int   // its node
	horizon time.Time
}

// lease is one etcd lease: expiry is when it dies (0 once revoked or
// released); granted is the latest expiry it was ever given, which a
// revoke does not take back: what its holder could have been told.
type lease struct {
	id      int64
	expiry  time.Duration
	granted time.Duration
}

type coordinator struct {
	rev    int64
	slots  [maxWorker + 1]slot
	leases map[int64]*lease // by generation (the claim's create revision)
}

// claimed reports whether worker ID id has a claim key: one not deleted,
// whose lease is alive.
func (c *coordinator) claimed(id int64, now time.Duration) bool {
	g := c.slots[id].gen
	return g != 0 && c.alive(g, now)
}

func (c *coordinator) alive(gen int64, now time.Duration) bool {
	l := c.leases[gen]
	return l != nil && l.expiry > now
}

// holds reports whether generation gen holds worker ID id's claim now.
func (c *coordinator) holds(id, gen int64, now time.Duration) bool {
	return c.slots[id].gen == gen && c.claimed(id, now)
}

// ---- nodes ----

type request struct {
	n        *node
	b        *backend
	kind     string // keepalive, store, lower, release
	until    time.Time
	reply    chan result
	answered bool // under sim.mu
}

// slot is the index of r's kind in node.blocked.
func (r *request) slot() int {
	if r.kind == "keepalive" {
		return 0
	}
	return 1
}

type result struct {
	t   time.Time
	err error
}

// backend is one holding's connection to the simulated coordinator; the
// real Lease calls it from its goroutines.
type backend struct {
	s    *sim
	n    *node
	id   int64
	gen  int64
	inc  int // the node's incarnation
	dead bool
}

func (b *backend) call(ctx context.Context, kind string, until time.Time) (time.Time, error) {
	r := &request{n: b.n, b: b, kind: kind, until: until, reply: make(chan result, 1)}
	s := b.s
	s.mu.Lock()
	if b.dead {
		s.mu.Unlock()
		return time.Time{}, errDead
	}
	s.submitted = append(s.submitted, r)
	b.n.blocked[r.slot()]++
	s.mu.Unlock()
	select {
	case res := <-r.reply:
		return res.t, res.err
	case <-ctx.Done():
		s.mu.Lock()
		if !r.answered {
			r.answered = true
			b.n.blocked[r.slot()]--
		}
		s.mu.Unlock()
		return time.Time{}, ctx.Err()
	}
}

func (b *backend) Keepalive(ctx context.Context) error {
	_, err := b.call(ctx, "keepalive", time.Time{})
	return err
}
func (b *backend) Store(ctx context.Context, until time.Time) (time.Time, error) {
	return b.call(ctx, "store", until)
}
func (b *backend) Lower(ctx context.Context, last time.Time) (time.Time, error) {
	return b.call(ctx, "lower", last)
}

// StoreConfirms: in a ZooKeeper-like run a horizon write renews the lease.
func (b *backend) StoreConfirms() bool { return b.s.zk }

func (b *backend) Release(ctx context.Context) error {
	_, err := b.call(ctx, "release", time.Time{})
	return err
}

// earlyLoad is the StartAtHorizon bug: Load reports the horizon one tick
// early, so the generator starts at the recorded horizon's tick.
type earlyLoad struct{ *worker.Lease }

func (e earlyLoad) Load(ctx context.Context) (time.Time, error) {
	h, err := e.Lease.Load(ctx)
	if err != nil || h.IsZero() {
		return h, err
	}
	return h.Add(-layout.Unit()), nil
}

type node struct {
	machine
	steps time.Duration // wall offset, including NTP steps

	acquiring bool
	closing   bool
	closer    atomic.Int32 // 1 while the closing goroutine runs
	ext       atomic.Int32 // generator goroutines alive
	blocked   [2]int       // goroutines parked in a backend call, keepalive or other (sim.mu)

	lease     *worker.Lease
	b         *backend
	gen       *snowflake.Generator
	last      int64     // last ID of this generator
	startHz   time.Time // horizon recorded when the holding began
	issued    int
	holding   int // index in sim.holdings
	wantClose bool
	files     map[string][]byte // horizon files as the process found them (LyingDisk)
}

func (n *node) wall(global time.Duration) time.Time {
	return wallStart.Add(time.Duration(float64(global)*(1+n.drift)) + n.steps)
}

// ---- the simulation ----

type sim struct {
	cfg  Config
	seed uint64
	r    *rand.Rand
	events
	coord coordinator
	nodes []*node

	mu        sync.Mutex
	submitted []*request
	sent      []*request // sent by the event loop, possibly unanswered

	zk          bool    // ZooKeeper-like: a horizon write renews the lease
	loss        float64 // per message
	slow        float64 // chance a message takes up to 4 s
	partitioned []partition
	issuedBy    map[int64]int            // ID -> index in holdings
	grantedTo   map[int64]time.Duration  // generation -> latest lease expiry ever granted (survives restores)
	recorded    [maxWorker + 1]time.Time // highest horizon ever recorded per worker ID (survives restores)
	snap        *coordinator
	dir         string
	holdings    []string // who issued: node, incarnation, generation
	ring        [traceKeep]entry
	logged      int
	hash        uint64
	processed   int
	issued      int
	violation   string
	canceled    context.Context
}

// Run simulates one world under seed.
func Run(seed uint64, cfg Config) Result {
	s := &sim{cfg: cfg, seed: seed, r: rand.New(rand.NewPCG(seed, 0x1d3a17)), issuedBy: map[int64]int{}, hash: 14695981039346656037}
	s.coord.leases = map[int64]*lease{}
	s.grantedTo = map[int64]time.Duration{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.canceled = ctx
	if s.cfg.Nodes == 0 {
		s.cfg.Nodes = 2 + s.r.IntN(3)
	}
	if s.cfg.Duration == 0 {
		s.cfg.Duration = 25 * time.Second
	}
	if s.cfg.TTL == 0 {
		s.cfg.TTL = 10 * time.Second
	}
	if s.cfg.Margin == 0 {
		s.cfg.Margin = s.cfg.TTL / 5
	}
	if s.cfg.MaxDrift == 0 {
		s.cfg.MaxDrift = 500e-6
	}
	if s.cfg.MaxOffset == 0 {
		s.cfg.MaxOffset = 300 * time.Millisecond
	}
	s.zk = s.r.IntN(2) == 0
	if s.cfg.Dir != "" {
		d, err := os.MkdirTemp(s.cfg.Dir, "sim-")
		if err != nil {
			panic(err)
		}
		s.dir = d
		defer os.RemoveAll(d)
	}
	s.loss = []float64{0, 0.02, 0.1, 0.3}[s.r.IntN(4)]
	s.slow = []float64{0, 0.05, 0.2}[s.r.IntN(3)]
	s.partitioned = make([]partition, s.cfg.Nodes)
	for i := range s.cfg.Nodes {
		n := &node{machine: machine{i: i, drift: (2*s.r.Float64() - 1) * s.cfg.MaxDrift}, steps: s.offset()}
		if s.r.IntN(3) == 0 { // the extremes are where bugs hide
			n.drift = s.cfg.MaxDrift * float64(1-2*s.r.IntN(2))
		}
		s.nodes = append(s.nodes, n)
		s.logf("node %d drift %+.0fppm offset %v", i, n.drift*1e6, n.steps)
		s.start(n)
	}
	s.plan()
	defer s.shutdown()
	for s.q.Len() > 0 && s.violation == "" {
		e := heap.Pop(&s.q).(*event)
		if e.at > s.cfg.Duration {
			break
		}
		s.advance(e.at)
		s.processed++
		e.do()
		s.settle()
	}
	res := Result{World: "snowflake", Seed: seed, Issued: s.issued, Events: s.processed, Violation: s.violation, Hash: s.hash}
	res.Trace = s.traceLines()
	return res
}

func (s *sim) offset() time.Duration {
	return time.Duration((2*s.r.Float64() - 1) * float64(s.cfg.MaxOffset))
}

// logf records an event: it feeds the trace hash cheaply and keeps the
// last traceKeep events unformatted, formatted only when reported.
func (s *sim) logf(format string, args ...any) {
	s.mix(uint64(s.now))
	for i := 0; i < len(format); i++ {
		s.mix(uint64(format[i]))
	}
	for _, a := range args {
		switch v := a.(type) {
		case int:
			s.mix(uint64(v))
		case int64:
			s.mix(uint64(v))
		case time.Duration:
			s.mix(uint64(v))
		case float64:
			s.mix(math.Float64bits(v))
		case time.Time:
			s.mix(uint64(v.UnixNano()))
		case hm:
			s.mix(uint64(time.Time(v).UnixNano()))
		case string:
			for i := 0; i < len(v); i++ {
				s.mix(uint64(v[i]))
			}
		case error:
			e := v.Error()
			for i := 0; i < len(e); i++ {
				s.mix(uint64(e[i]))
			}
		default:
			panic(fmt.Sprintf("sim: logf argument %T", a))
		}
	}
	s.ring[s.logged%traceKeep] = entry{s.now, format, args}
	s.logged++
}

type entry struct {
	at     time.Duration
	format string
	args   []any
}

func (s *sim) mix(v uint64) {
	s.hash ^= v
	s.hash *= 1099511628211
}

// traceLines formats the last events kept.
func (s *sim) traceLines() []string {
	var out []string
	n := min(s.logged, traceKeep)
	for i := s.logged - n; i < s.logged; i++ {
		e := s.ring[i%traceKeep]
		out = append(out, fmt.Sprintf("%11.6fs ", e.at.Seconds())+fmt.Sprintf(e.format, e.args...))
	}
	return out
}

func (s *sim) fail(format string, args ...any) {
	if s.violation == "" {
		s.violation = fmt.Sprintf(format, args...)
		s.logf("VIOLATION: %s", s.violation)
	}
}

// plan schedules the faults and the issuing.
func (s *sim) plan() {
	d := s.cfg.Duration
	for _, n := range s.nodes {
		for t := time.Duration(0); t < d; {
			t += time.Duration(20+s.r.IntN(500)) * time.Millisecond
			s.at(t, func() { s.issue(n) })
		}
		for range s.r.IntN(3) {
			t := time.Duration(s.r.Int64N(int64(d)))
			step := s.offset()
			s.at(t, func() {
				if n.clk != nil {
					n.clk.Step(step)
				}
				n.steps += step
				s.logf("node %d NTP step %v", n.i, step)
			})
		}
		if s.r.IntN(3) == 0 {
			t := time.Duration(s.r.Int64N(int64(d)))
			long := time.Duration(s.r.Int64N(int64(s.cfg.TTL * 3 / 2)))
			s.at(t, func() { s.pause(n, long) })
		}
		if s.r.IntN(4) == 0 {
			t := time.Duration(s.r.Int64N(int64(d)))
			s.at(t, func() { s.crash(n) })
		}
		if s.r.IntN(3) == 0 {
			t := time.Duration(s.r.Int64N(int64(d)))
			s.at(t, func() { s.gracefulRestart(n) })
		}
		if s.r.IntN(4) == 0 {
			t := time.Duration(s.r.Int64N(int64(d)))
			long := time.Duration(s.r.Int64N(int64(s.cfg.TTL * 3 / 2)))
			way := s.r.IntN(3) // both ways, requests only, replies only
			s.at(t, func() {
				s.partitioned[n.i] = partition{until: s.now + long, way: way}
				s.logf("node %d partitioned from the coordinator for %v (%s)", n.i, long, []string{"both ways", "requests lost", "replies lost"}[way])
			})
		}
	}
	for range s.r.IntN(3) {
		s.at(time.Duration(s.r.Int64N(int64(d))), s.revoke)
	}
	if s.cfg.Restores {
		for range 1 + s.r.IntN(2) {
			t1 := time.Duration(s.r.Int64N(int64(d)))
			t2 := t1 + time.Duration(s.r.Int64N(int64(d-t1)))
			s.at(t1, s.snapshot)
			s.at(t2, s.restore)
		}
	}
	for range s.r.IntN(3) {
		s.at(time.Duration(s.r.Int64N(int64(d))), s.deleteClaim)
	}
}

// advance moves global time to t and every running node's clock with it,
// in node order, then waits for the real code to park again.
func (s *sim) advance(t time.Duration) {
	s.now = t
	for _, n := range s.nodes {
		if n.clk == nil || n.paused || n.down {
			continue
		}
		if d := n.mono(t) - n.clk.Mono(); d > 0 {
			n.clk.Advance(d)
		}
	}
	s.settle()
}

// parked reports whether every goroutine of n's process is waiting on
// something only the event loop can give: its fake clock or a reply. The
// keepalive goroutine sleeps on the clock or waits in a keepalive while the
// lease is open, and is gone (neither) once it is done; every generator
// goroutine and the closing goroutine must wait in another call.
func (s *sim) parked(n *node) bool {
	others := int(n.ext.Load() + n.closer.Load())
	runner := 0
	if n.lease != nil {
		select {
		case <-n.lease.Done():
		default:
			runner = 1
		}
	}
	sleepers := 0
	if n.clk != nil {
		sleepers = n.clk.Sleepers()
	}
	s.mu.Lock()
	ka, other := n.blocked[0], n.blocked[1]
	s.mu.Unlock()
	return sleepers+ka == runner && other == others
}

// settle waits until every node is parked, then sends the requests they
// made, in a fixed order, and follows up finished closes.
func (s *sim) settle() {
	for {
		var deadline time.Time
		for i := 0; ; i++ {
			all := true
			for _, n := range s.nodes {
				if !s.parked(n) {
					all = false
					break
				}
			}
			if all {
				break
			}
			if i == 0 {
				deadline = time.Now().Add(quiesceWait)
			} else if time.Now().After(deadline) {
				panic(fmt.Sprintf("sim seed %d: the real code did not park within %v (trace: %s)", s.seed, quiesceWait, strings.Join(s.traceLines(), " | ")))
			}
			if i < 200 {
				runtime.Gosched()
			} else {
				time.Sleep(10 * time.Microsecond)
			}
		}
		s.mu.Lock()
		reqs := s.submitted
		s.submitted = nil
		s.mu.Unlock()
		progressed := len(reqs) > 0
		order := map[string]int{"keepalive": 0, "store": 1, "lower": 2, "release": 3}
		sort.SliceStable(reqs, func(i, j int) bool {
			if reqs[i].n.i != reqs[j].n.i {
				return reqs[i].n.i < reqs[j].n.i
			}
			return order[reqs[i].kind] < order[reqs[j].kind]
		})
		for _, r := range reqs {
			s.send(r)
		}
		for _, n := range s.nodes {
			if n.closing && n.closer.Load() == 0 {
				s.closed(n)
				progressed = true
			}
		}
		if !progressed {
			return
		}
	}
}

// partition cuts a node off from the coordinator until a global time, both
// ways (way 0), or only its requests (1) or only the replies (2).
type partition struct {
	until time.Duration
	way   int
}

// delay draws the network delay of one message to (reply false) or from
// (reply true) the coordinator, or reports it lost.
func (s *sim) delay(n *node, reply bool) (time.Duration, bool) {
	p := s.partitioned[n.i]
	cut := s.now < p.until && (p.way == 0 || (p.way == 2) == reply)
	if cut || s.r.Float64() < s.loss {
		return 0, false
	}
	if s.r.Float64() < s.slow {
		return time.Duration(s.r.Int64N(int64(4 * time.Second))), true
	}
	return time.Duration(1+s.r.IntN(20)) * time.Millisecond, true
}

// send carries r to the coordinator and its answer back; a request not
// answered within the timeout fails with errLost.
func (s *sim) send(r *request) {
	sent := s.now
	n := r.n
	s.sent = append(s.sent, r)
	s.logf("node %d inc %d sends %s (id %d gen %d)", n.i, r.b.inc, r.kind, r.b.id, r.b.gen)
	answer := func(res result) {
		n.deliver(r.b.inc, func() {
			s.mu.Lock()
			if r.answered {
				s.mu.Unlock()
				return
			}
			r.answered = true
			n.blocked[r.slot()]--
			s.mu.Unlock()
			r.reply <- res
		})
	}
	s.at(sent+simTimeout, func() { answer(result{err: errLost}) })
	d1, ok := s.delay(n, false)
	if !ok {
		return
	}
	s.at(sent+d1, func() {
		res := s.process(r)
		d2, ok := s.delay(n, true)
		if !ok || d1+d2 >= simTimeout {
			return
		}
		s.at(s.now+d2, func() { answer(res) })
	})
}

// process is the coordinator's handling of a lease request, at global now:
// a keepalive renews the etcd lease (whatever became of the claim), a
// horizon write is a transaction conditional on the claim's generation.
func (s *sim) process(r *request) result {
	c := &s.coord
	b := r.b
	l := c.leases[b.gen]
	lost := func(what string) result {
		s.logf("coordinator: %s from node %d: %s", r.kind, r.n.i, what)
		return result{err: fmt.Errorf("%w: simulated %s", worker.ErrLeaseLost, what)}
	}
	switch r.kind {
	case "keepalive":
		if !c.alive(b.gen, s.now) {
			return lost(fmt.Sprintf("lease gen %d not found", b.gen))
		}
		l.expiry = s.now + s.cfg.TTL
		l.granted = max(l.granted, l.expiry)
		s.grantedTo[b.gen] = max(s.grantedTo[b.gen], l.expiry)
	case "store", "lower":
		if !c.holds(b.id, b.gen, s.now) {
			return lost(fmt.Sprintf("claim on worker id %d gen %d gone", b.id, b.gen))
		}
		c.slots[b.id].horizon = r.until
		if r.until.After(s.recorded[b.id]) {
			s.recorded[b.id] = r.until
		}
		if s.zk {
			l.expiry = s.now + s.cfg.TTL
			l.granted = max(l.granted, l.expiry)
			s.grantedTo[b.gen] = max(s.grantedTo[b.gen], l.expiry)
		}
	case "release":
		if l != nil {
			l.expiry = 0
		}
		return result{}
	}
	sl := &c.slots[b.id]
	s.logf("coordinator: %s from node %d id %d gen %d ok (expiry %.3fs horizon %s)", r.kind, r.n.i, b.id, b.gen, l.expiry.Seconds(), hm(sl.horizon))
	return result{t: sl.horizon}
}

// snapshot copies the coordinator, as `etcdctl snapshot save` does.
func (s *sim) snapshot() {
	c := s.coord
	c.leases = map[int64]*lease{}
	for g, l := range s.coord.leases {
		cp := *l
		c.leases[g] = &cp
	}
	s.snap = &c
	s.logf("operator takes a snapshot of the coordinator (revision %d)", c.rev)
}

// restore puts the last snapshot back, as `etcdutl snapshot restore
// --bump-revision` and a restart do: the claims and horizons of that time,
// revisions above every earlier one, every lease refreshed to a full TTL.
func (s *sim) restore() {
	if s.snap == nil {
		return
	}
	c := *s.snap
	c.leases = map[int64]*lease{}
	for g, l := range s.snap.leases {
		cp := *l
		if cp.expiry > 0 {
			cp.expiry = s.now + s.cfg.TTL
			cp.granted = max(cp.granted, cp.expiry)
			s.grantedTo[g] = max(s.grantedTo[g], cp.expiry)
		}
		c.leases[g] = &cp
	}
	c.rev = s.coord.rev + 1000
	s.coord = c
	s.logf("operator restores the coordinator from the snapshot of revision %d", s.snap.rev)
}

// horizonFile is where node n keeps worker ID id's horizon.
func (s *sim) horizonFile(n *node, id int64) string {
	return filepath.Join(s.dir, fmt.Sprintf("node%d-horizon-%d", n.i, id))
}

// synced records n's files as they are when its process starts; a lying
// disk brings them back to that at a crash.
func (s *sim) synced(n *node) {
	if s.dir == "" {
		return
	}
	n.files = map[string][]byte{}
	for id := range int64(maxWorker + 1) {
		p := s.horizonFile(n, id)
		if b, err := os.ReadFile(p); err == nil {
			n.files[p] = b
		} else {
			n.files[p] = nil
		}
	}
}

func (s *sim) loseWrites(n *node) {
	for p, b := range n.files {
		if b == nil {
			_ = os.Remove(p)
		} else if err := os.WriteFile(p, b, 0o600); err != nil {
			panic(err)
		}
	}
	s.logf("node %d's disk lost every write since its process started", n.i)
}

// revoke is an operator's `etcdctl lease revoke` of a random live lease:
// its claim vanishes with it, its holder learns it only from its next
// keepalive or write.
func (s *sim) revoke() {
	c := &s.coord
	for id := range int64(maxWorker + 1) {
		if g := c.slots[id].gen; c.claimed(id, s.now) && s.r.IntN(2) == 0 {
			c.leases[g].expiry = 0
			s.logf("operator revokes the lease of worker id %d gen %d", id, g)
			return
		}
	}
}

// deleteClaim is an operator's `etcdctl del` of a random claim key: the
// holder's lease stays alive (its keepalives succeed), but its horizon
// writes fail and another node may claim the worker ID.
func (s *sim) deleteClaim() {
	c := &s.coord
	for id := range int64(maxWorker + 1) {
		if g := c.slots[id].gen; c.claimed(id, s.now) && s.r.IntN(2) == 0 {
			c.slots[id].gen = 0
			s.logf("operator deletes the claim key of worker id %d gen %d", id, g)
			return
		}
	}
}

// start begins a process on n: a fresh monotonic clock, then an acquire.
func (s *sim) start(n *node) {
	n.inc++
	n.down = false
	n.born = s.now
	n.clk = clock.NewFake(n.wall(s.now))
	s.synced(n)
	s.logf("node %d inc %d starts", n.i, n.inc)
	s.acquire(n)
}

func (s *sim) acquire(n *node) {
	if n.acquiring || n.down || n.lease != nil || n.closing {
		return
	}
	n.acquiring = true
	inc := n.inc
	sent := n.clk.Mono()
	s.logf("node %d inc %d sends acquire", n.i, inc)
	done := false
	retry := func() {
		if done || n.inc != inc || n.down {
			return
		}
		done = true
		n.acquiring = false
		s.at(s.now+time.Duration(100+s.r.IntN(900))*time.Millisecond, func() { s.acquire(n) })
	}
	s.at(s.now+simTimeout, func() { n.deliver(inc, retry) })
	d1, ok := s.delay(n, false)
	if !ok {
		return
	}
	s.at(s.now+d1, func() {
		c := &s.coord
		id := int64(0)
		for ; id <= maxWorker && c.claimed(id, s.now); id++ {
		}
		if id > maxWorker {
			s.logf("coordinator: no free worker id for node %d", n.i)
			return
		}
		c.rev++
		sl := &c.slots[id]
		*sl = slot{gen: c.rev, node: n.i, horizon: sl.horizon}
		exp := s.now + s.cfg.TTL
		c.leases[c.rev] = &lease{id: id, expiry: exp, granted: exp}
		s.grantedTo[c.rev] = exp
		s.logf("coordinator: node %d inc %d acquires id %d gen %d (expiry %.3fs horizon %s)", n.i, inc, id, sl.gen, exp.Seconds(), hm(sl.horizon))
		gen, hz := sl.gen, sl.horizon
		d2, ok := s.delay(n, true)
		if !ok || d1+d2 >= simTimeout {
			return // the orphaned lease expires on the coordinator
		}
		s.at(s.now+d2, func() {
			n.deliver(inc, func() {
				if done {
					return
				}
				done = true
				n.acquiring = false
				s.granted(n, id, gen, hz, sent)
			})
		})
	})
}

// granted builds the real Lease and Generator, the way node.Node does.
func (s *sim) granted(n *node, id, gen int64, hz time.Time, sent time.Duration) {
	if s.cfg.Bugs.DeadlineFromReply {
		sent = n.clk.Mono()
	}
	b := &backend{s: s, n: n, id: id, gen: gen, inc: n.inc}
	l, err := worker.NewLease(id, gen, hz, b, sent, worker.WithClock(n.clk), worker.WithTTL(s.cfg.TTL),
		worker.WithMargin(s.cfg.Margin), worker.WithHolder(fmt.Sprintf("node%d", n.i)), worker.WithMutations(s.cfg.Bugs.lease()))
	if err != nil {
		panic(err)
	}
	set := snowflake.Settings{Node: map[string]int64{"worker": id}, Clock: n.clk, Horizon: l, Fence: l,
		Mutations: s.cfg.Bugs.generator(),
		Go: func(f func()) {
			n.ext.Add(1)
			go func() { defer n.ext.Add(-1); f() }()
		}}
	if s.cfg.Bugs.NoFence {
		set.Fence = nil
	}
	if s.cfg.Bugs.StartAtHorizon {
		set.Horizon = earlyLoad{l}
	}
	if s.dir != "" {
		set.Horizon = snowflake.Floored{Horizon: set.Horizon, Local: snowflake.NewFileHorizon(s.horizonFile(n, id))}
	}
	g, err := snowflake.New(layout, set)
	if err != nil {
		panic(err)
	}
	n.lease, n.b, n.gen, n.last, n.startHz = l, b, g, -1, hz
	n.holding = len(s.holdings)
	s.holdings = append(s.holdings, fmt.Sprintf("node %d inc %d gen %d", n.i, n.inc, gen))
	s.logf("node %d inc %d holds id %d gen %d, valid until mono %v (now %v)", n.i, n.inc, id, gen, l.ValidUntil(), n.clk.Mono())
	s.settle()
}

// issue asks n's generator for a few IDs, as clients would, without
// waiting (the context is already cancelled), and checks each.
func (s *sim) issue(n *node) {
	if n.paused || n.down || n.gen == nil || n.closing {
		return
	}
	// The process learns of a lost lease from Done, like node.Node, and
	// closes to re-acquire; requests that arrive before it reacts still
	// reach the generator, which must refuse them (its fence is 0).
	lost := n.lease.Err()
	k := 1 + s.r.IntN(issueBurst)
	var errs []string
	got := 0
	for range k {
		id, err := n.gen.Next(s.canceled)
		s.settle()
		if err != nil {
			errs = append(errs, shortErr(err))
			continue
		}
		got++
		if lost != nil {
			s.fail("%s issued %d after its lease reported itself lost (%v)", s.holdings[n.holding], id, lost)
		}
		s.check(n, id)
	}
	s.logf("node %d issues %d of %d (wall %s mono %v valid until %v) %s", n.i, got, k,
		hm(n.clk.Now()), n.clk.Mono(), n.lease.ValidUntil(), strings.Join(errs, ","))
	if lost != nil {
		s.logf("node %d lease lost (%v); closing to re-acquire", n.i, lost)
		s.closeProcess(n, true)
	}
}

func shortErr(err error) string {
	switch {
	case errors.Is(err, snowflake.ErrFenced):
		return "fenced"
	case errors.Is(err, snowflake.ErrClockBehind):
		return "behind"
	case errors.Is(err, snowflake.ErrHorizon):
		return "horizon"
	case errors.Is(err, context.Canceled):
		return "wait"
	}
	return err.Error()
}

func (s *sim) check(n *node, id int64) {
	s.issued++
	n.issued++
	who := s.holdings[n.holding]
	if prev, dup := s.issuedBy[id]; dup {
		s.fail("ID %d issued twice: by %s and by %s", id, s.holdings[prev], who)
	}
	s.issuedBy[id] = n.holding
	if id <= n.last {
		s.fail("%s issued %d after %d: not increasing", who, id, n.last)
	}
	n.last = id
	wid := n.b.id
	stamp := tickTime(tickOf(id))
	if stamp.After(s.recorded[wid]) {
		s.fail("%s issued %d stamped %s, past the horizon %s the coordinator ever recorded for worker id %d",
			who, id, stamp.Format("15:04:05.000"), s.recorded[wid].Format("15:04:05.000"), wid)
	}
	if !n.startHz.IsZero() && !stamp.After(n.startHz) {
		s.fail("%s issued %d stamped %s, not after the horizon %s recorded when its holding of worker id %d began",
			who, id, stamp.Format("15:04:05.000"), n.startHz.Format("15:04:05.000"), wid)
	}
	if g := s.grantedTo[n.b.gen]; s.now >= g {
		s.fail("%s issued %d at %.3fs, after the coordinator's lease on worker id %d ran out (granted until %.3fs)",
			who, id, s.now.Seconds(), wid, g.Seconds())
	}
}

// pause stops n's process for d: its clocks keep running but nothing in
// it runs; replies wait for the resume.
func (s *sim) pause(n *node, d time.Duration) {
	if n.pause(&s.events, d, func(held []func()) {
		s.logf("node %d resumes", n.i)
		s.advance(s.now)
		for _, f := range held {
			f()
			s.settle()
		}
	}) {
		s.logf("node %d pauses for %v", n.i, d)
	}
}

// crash kills n's process: no release reaches the coordinator, pending
// calls fail; it restarts later from what the coordinator holds.
func (s *sim) crash(n *node) {
	if n.down {
		return
	}
	s.logf("node %d inc %d crashes", n.i, n.inc)
	n.down, n.paused, n.held, n.acquiring, n.wantClose = true, false, nil, false, false
	s.kill(n)
	if s.cfg.LyingDisk && s.r.IntN(2) == 0 {
		s.loseWrites(n)
	}
	s.at(s.now+time.Duration(s.r.Int64N(int64(3*time.Second))), func() { s.start(n) })
}

// kill stops the real code of n's process without a word to the
// coordinator.
func (s *sim) kill(n *node) {
	if n.b != nil {
		s.mu.Lock()
		n.b.dead = true
		s.mu.Unlock()
		s.failPending(n.b)
		if n.gen != nil {
			_ = n.gen.Close()
		}
		_ = n.lease.Close()
		s.settle()
	}
	n.lease, n.b, n.gen, n.closing = nil, nil, nil, false
}

// failPending answers every call n's backend has open with errDead.
func (s *sim) failPending(b *backend) {
	// Requests already sent are answered through their events; answering
	// them here makes the crash immediate.
	for _, r := range s.open(b) {
		s.mu.Lock()
		if !r.answered {
			r.answered = true
			b.n.blocked[r.slot()]--
			s.mu.Unlock()
			r.reply <- result{err: errDead}
			continue
		}
		s.mu.Unlock()
	}
}

// open lists b's requests not answered yet; the event loop records them
// as it sends them.
func (s *sim) open(b *backend) []*request {
	var out []*request
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.sent[:0]
	for _, r := range s.sent {
		if r.answered {
			continue
		}
		kept = append(kept, r)
		if r.b == b {
			out = append(out, r)
		}
	}
	s.sent = kept
	return out
}

func (s *sim) gracefulRestart(n *node) {
	if n.down || n.paused || n.gen == nil || n.closing {
		return
	}
	s.logf("node %d closes its generator and lease to restart", n.i)
	s.closeProcess(n, true)
	if s.r.IntN(2) == 0 {
		// A restart is when a clock set back bites: the next holding must
		// start after the released horizon whatever the clock says.
		step := -time.Duration(s.r.Int64N(int64(s.cfg.MaxOffset)))
		n.clk.Step(step)
		n.steps += step
		s.logf("node %d NTP step %v", n.i, step)
	}
}

// closeProcess closes n's generator (which releases the horizon) and lease
// in a goroutine, as a clean shutdown does; settle follows up when done.
func (s *sim) closeProcess(n *node, reacquire bool) {
	n.closing, n.wantClose = true, reacquire
	g, l := n.gen, n.lease
	n.closer.Store(1)
	go func() {
		defer n.closer.Store(0)
		_ = g.Close()
		_ = l.Close()
	}()
	s.settle()
}

func (s *sim) closed(n *node) {
	s.logf("node %d inc %d closed id %d gen %d", n.i, n.inc, n.b.id, n.b.gen)
	n.lease, n.b, n.gen, n.closing = nil, nil, nil, false
	if n.wantClose {
		inc := n.inc
		s.at(s.now+time.Duration(s.r.Int64N(int64(200*time.Millisecond))), func() {
			if n.inc == inc {
				s.acquire(n)
			}
		})
	}
}

func (s *sim) shutdown() {
	for _, n := range s.nodes {
		n.paused = false
		if n.closing {
			// Let the close finish: fail whatever it waits for.
			for n.closer.Load() != 0 {
				s.mu.Lock()
				s.sent = append(s.sent, s.submitted...)
				s.submitted = nil
				if n.b != nil {
					n.b.dead = true
				}
				s.mu.Unlock()
				if n.b != nil {
					s.failPending(n.b)
				}
				runtime.Gosched()
			}
		}
		if n.b != nil {
			s.kill(n)
		}
	}
}

// hm prints a wall time as hours to milliseconds in traces.
type hm time.Time

func (t hm) String() string { return time.Time(t).Format("15:04:05.000") }
