package sim

import (
	"bytes"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sort"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/internal/mutate"
	"github.com/idmint/idmint/monotonic"
	"github.com/idmint/idmint/witness"
)

// The monotonic world: N nodes run the real monotonic.Etcd source (the
// election, the leader's proofs and handover wait, the fenced bound, the
// in-memory issuing) against the simulated etcd of etcd.go, each on its own
// drifting clock. Callers on every node ask for values at random times;
// every answer is checked against every answer given before it began (real
// time order, in global time) and against every other (no value twice).
//
// The real code here has goroutines this simulator does not start itself
// (the etcd session's keepalive loop, the election's observer, watches), so
// it cannot count them as the snowflake world does: it waits until the Go
// runtime reports every goroutine but its own blocked, which is exact (only
// the event loop can wake them) but costs a stack dump per step. Runs of
// this world are therefore fewer and must not share the process with other
// runs.

// MonoConfig sets the monotonic world. Zero fields take the defaults noted.
type MonoConfig struct {
	Nodes    int           // 0: 3
	Duration time.Duration // 0: 12 s
	TTL      time.Duration // whole seconds; 0: 2 s
	MaxDrift float64       // 0: 500e-6
	Bugs     MonoBugs
	// Dir, when set, gives each node a data directory below it (kept
	// across its restarts) holding its witness marks, as idmint serve
	// keeps them; every leader also raises the mark in the cluster
	// witness (Witness).
	Dir string
	// Witness names the cluster witness: "etcd", the coordinator's own
	// etcd (what serve uses with an etcd:// coordinator), or "separate", a
	// store of its own (serve's witness: option); "" none.
	Witness string
	// Restores snapshots the coordinator's etcd at random times and
	// restores it later from the older snapshot.
	Restores bool
	// Issued, when above 0, is how far the key issued before the run,
	// somewhere etcd does not show (a File source on one node, or another
	// prefix): every value of the run must be above it. IssuedIn says
	// where the nodes learn it: "floor", as EtcdConfig.Floor (what serve
	// passes from a File source's bound), or "mark", in every node's data
	// directory witness (needs Dir).
	Issued   int64
	IssuedIn string
}

// MonoBugs re-introduces known mistakes of the monotonic leader.
type MonoBugs struct {
	// SecondLeader: a deposed leader does not fence on its key's deletion
	// and a new one does not wait out its predecessor (mutate.SecondLeader).
	SecondLeader bool
	// NoHandoverWait: a new leader issues at once instead of waiting one
	// TTL after its predecessor's last proof (mutate.NoHandoverWait).
	NoHandoverWait bool
	// IgnoreWitness: a new leader starts above the etcd bound alone,
	// ignoring the witness's mark and the floor (mutate.IgnoreWitness).
	IgnoreWitness bool
	// TrustRestoredKey: a leader whose watch broke goes on leading when it
	// finds its election key again, and counts a proof without waiting
	// for its watch to deliver it (mutate.TrustRestoredKey).
	TrustRestoredKey bool
}

func (b MonoBugs) mutations() *mutate.Set {
	var f []mutate.Flag
	if b.SecondLeader {
		f = append(f, mutate.SecondLeader)
	}
	if b.NoHandoverWait {
		f = append(f, mutate.NoHandoverWait)
	}
	if b.IgnoreWitness {
		f = append(f, mutate.IgnoreWitness)
	}
	if b.TrustRestoredKey {
		f = append(f, mutate.TrustRestoredKey)
	}
	if len(f) == 0 {
		return nil
	}
	return mutate.New(f...)
}

type proc struct {
	n    *mnode
	inc  int
	dead bool // under msim.mu
}

type mnode struct {
	machine
	p       *proc
	e       *monotonic.Etcd
	all     []*monotonic.Etcd // every source started, for the final close
	open    int               // calls begun and not returned (event loop)
	clks    []*clock.Fake     // every process's clock, to let its sleepers go at the end
	closers []io.Closer       // witness files, closed at the end
}

type ereq struct {
	p        *proc
	desc     string
	exec     func(st *etcdState) (any, error)
	db       int   // which store exec runs on (etcdClient.db)
	to       int   // a forwarded request: the target node (exec nil)
	n        int64 // its count
	reply    chan ereply
	answered bool // under msim.mu
}

type ereply struct {
	v   any
	err error
}

// fwdResult is a forwarded request answered by its target's real code,
// to be carried back.
type fwdResult struct {
	r    *ereq
	h    hop
	rep  ereply
	node int
}

// forwarder carries a follower's forwarded request to another simulated
// node, where the real NextLocal answers it.
type forwarder struct {
	w *msim
	p *proc
}

func (f *forwarder) Forward(ctx context.Context, addr, name string, n int64) (int64, error) {
	var to int
	if _, err := fmt.Sscanf(addr, "node%d", &to); err != nil {
		return 0, fmt.Errorf("sim: bad peer address %q", addr)
	}
	r := &ereq{p: f.p, desc: fmt.Sprintf("forward %d to node %d", n, to), to: to, n: n, reply: make(chan ereply, 1)}
	v, err := f.w.submit(ctx, r)
	if err != nil {
		return 0, err
	}
	return v.(int64), nil
}

type mop struct {
	node      int
	inc       int
	n         int64
	inv, resp time.Duration
	first     int64
	err       error
}

type msim struct {
	cfg  MonoConfig
	seed uint64
	r    *rand.Rand
	// r2 draws the faults added after the world's first version, so the
	// draws of r, and the runs of every seed without those faults, stay
	// as they were.
	r2 *rand.Rand
	// r3 draws the restore around a revoke of a cut-off leader (Restores
	// only), for the same reason.
	r3 *rand.Rand
	events
	st   *etcdState // the coordinator's etcd
	wdb  *etcdState // the separate witness store (Witness)
	snap *etcdState
	dir  string

	nodes []*mnode
	loss  float64
	slow  float64
	cut   []partition // a node cut off from etcd and its peers

	mu        sync.Mutex
	fwdDone   []fwdResult
	submitted []*ereq
	newWatch  []*ewatch
	done      []*mop
	sent      []*ereq

	// answered: completions by response time, with the running maximum of
	// their last values, for the real-time check.
	answered []mop
	prefix   []int64
	ranges   [][2]int64

	log     ring
	woke    bool // the loop may have woken real code since it last settled
	base    int  // goroutines before the run: all of its own are gone after it
	trace   []string
	failure string
	calls   int
	values  int64
}

// ring is the last events of a run.
type ring struct {
	lines [traceKeep]string
	n     int
	hash  uint64
}

func (w *msim) logf(format string, args ...any) {
	line := fmt.Sprintf("%11.6fs ", w.now.Seconds()) + fmt.Sprintf(format, args...)
	for i := 0; i < len(line); i++ {
		w.log.hash ^= uint64(line[i])
		w.log.hash *= 1099511628211
	}
	w.log.lines[w.log.n%traceKeep] = line
	w.log.n++

}

func (w *msim) lines() []string {
	var out []string
	for i := max(0, w.log.n-traceKeep); i < w.log.n; i++ {
		out = append(out, w.log.lines[i%traceKeep])
	}
	return out
}

func (w *msim) fail(format string, args ...any) {
	if w.failure == "" {
		w.failure = fmt.Sprintf(format, args...)
		w.logf("VIOLATION: %s", w.failure)
	}
}

// monoMu keeps runs of the monotonic world one at a time in a process:
// their quiescence test looks at every goroutine.
var monoMu sync.Mutex

// RunMonotonic simulates one monotonic world under seed.
func RunMonotonic(seed uint64, cfg MonoConfig) Result {
	monoMu.Lock()
	defer monoMu.Unlock()
	// One processor: goroutines the loop wakes together (callers a term's
	// end releases at once, racing into the follower's batch) then run in
	// the order they were woken, not in whatever order two processors
	// happen to take them, so their effects replay. The race detector
	// shuffles that order on purpose: under it runs are checked, not
	// replayable.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	w := &msim{cfg: cfg, seed: seed, r: rand.New(rand.NewPCG(seed, 0x6d6f6e6f)), r2: rand.New(rand.NewPCG(seed, 0x63757472)), r3: rand.New(rand.NewPCG(seed, 0x72657374)), st: newEtcdState(), wdb: newEtcdState(), base: runtime.NumGoroutine()}
	if cfg.Dir != "" {
		d, err := os.MkdirTemp(cfg.Dir, "mono-")
		if err != nil {
			panic(err)
		}
		w.dir = d
		defer os.RemoveAll(d)
	}
	w.log.hash = 14695981039346656037
	if w.cfg.Nodes == 0 {
		w.cfg.Nodes = 3
	}
	if w.cfg.Duration == 0 {
		w.cfg.Duration = 12 * time.Second
	}
	if w.cfg.TTL == 0 {
		w.cfg.TTL = 2 * time.Second
	}
	if w.cfg.MaxDrift == 0 {
		w.cfg.MaxDrift = 500e-6
	}
	if w.cfg.Issued > 0 && (w.cfg.IssuedIn != "floor" && w.cfg.IssuedIn != "mark" || w.cfg.IssuedIn == "mark" && w.dir == "") {
		panic(fmt.Sprintf("sim: Issued %d in %q: want \"floor\", or \"mark\" with Dir", w.cfg.Issued, w.cfg.IssuedIn))
	}
	w.loss = []float64{0, 0.02, 0.1}[w.r.IntN(3)]
	w.slow = []float64{0, 0.05, 0.2}[w.r.IntN(3)]
	w.cut = make([]partition, w.cfg.Nodes)
	for i := range w.cfg.Nodes {
		n := &mnode{machine: machine{i: i, drift: (2*w.r.Float64() - 1) * w.cfg.MaxDrift}}
		if w.r.IntN(3) == 0 {
			n.drift = w.cfg.MaxDrift * float64(1-2*w.r.IntN(2))
		}
		w.nodes = append(w.nodes, n)
		w.logf("node %d drift %+.0fppm", i, n.drift*1e6)
		w.start(n)
	}
	if w.cfg.Issued > 0 {
		// Answered before the run began: every call must be above it.
		w.answered = append(w.answered, mop{node: -1, first: 1, n: w.cfg.Issued, inv: -1, resp: -1})
		w.prefix = append(w.prefix, w.cfg.Issued)
		w.ranges = append(w.ranges, [2]int64{1, w.cfg.Issued})
		w.logf("values 1..%d issued before the run (known from the %s)", w.cfg.Issued, w.cfg.IssuedIn)
	}
	w.plan()
	for w.q.Len() > 0 && w.failure == "" {
		e := heap.Pop(&w.q).(*event)
		if e.at > w.cfg.Duration {
			break
		}
		w.advance(e.at)
		e.do()
		w.settle()
	}
	w.shutdown()
	return Result{World: "monotonic", Seed: seed, Issued: int(w.values), Events: w.log.n, Violation: w.failure, Trace: w.lines(), Hash: w.log.hash}
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

func (w *msim) start(n *mnode) {
	n.inc++
	n.down = false
	n.open = 0
	n.born = w.now
	n.clk = clock.NewFake(wallStart.Add(w.now))
	n.clks = append(n.clks, n.clk)
	p := &proc{n: n, inc: n.inc}
	n.p = p
	cli := clientv3.NewCtxClient(context.Background())
	ec := &etcdClient{p: p, w: w}
	cli.KV, cli.Lease, cli.Watcher = ec, ec, ec
	mut := w.cfg.Bugs.mutations()
	var wit monotonic.Witness
	if w.dir != "" {
		local, err := witness.OpenFile(filepath.Join(w.dir, fmt.Sprintf("node%d", n.i)))
		if err != nil {
			panic(err)
		}
		n.closers = append(n.closers, local)
		wit = local
		if w.cfg.IssuedIn == "mark" && n.inc == 1 {
			space := monotonic.WitnessSpace("sim")
			if _, ok, err := local.Claim(context.Background(), space, 0, w.cfg.Issued); err != nil || !ok {
				panic(fmt.Sprintf("sim: node %d's witness: mark %d: %v %v", n.i, w.cfg.Issued, ok, err))
			}
		}
		var cl *witness.Etcd
		switch w.cfg.Witness {
		case "etcd":
			cl = witness.NewEtcd(cli, "/witness/")
		case "separate":
			wcli := clientv3.NewCtxClient(context.Background())
			wc := &etcdClient{p: p, w: w, db: 1}
			wcli.KV, wcli.Lease, wcli.Watcher = wc, wc, wc
			cl = witness.NewEtcd(wcli, "/witness/")
		}
		if cl != nil {
			wit = witness.Multi{local, cl}
		}
	}
	var floor int64
	if w.cfg.IssuedIn == "floor" {
		floor = w.cfg.Issued
	}
	e, err := monotonic.NewEtcd(monotonic.EtcdConfig{Client: cli, Prefix: "/sim/", Name: "sim", TTL: w.cfg.TTL, Witness: wit,
		// The network's own timeout (simTimeout) bounds every call in
		// simulated time; a real-time deadline must never fire.
		Timeout: time.Hour, Advertise: fmt.Sprintf("node%d", n.i), Clock: n.clk, Logger: discard, Mutations: mut, Window: 50,
		Forward: &forwarder{w: w, p: p}, Floor: floor})
	if err != nil {
		panic(err)
	}
	n.e = e
	n.all = append(n.all, e)
	w.woke = true
	w.logf("node %d inc %d starts", n.i, n.inc)
	w.settle()
}

func (w *msim) plan() {
	d := w.cfg.Duration
	for _, n := range w.nodes {
		for t := time.Duration(0); t < d; {
			t += time.Duration(20+w.r.IntN(200)) * time.Millisecond
			w.at(t, func() { w.issue(n) })
		}
		if w.r.IntN(3) == 0 {
			t, long := time.Duration(w.r.Int64N(int64(d))), time.Duration(w.r.Int64N(int64(w.cfg.TTL*3/2)))
			w.at(t, func() { w.pause(n, long) })
		}
		if w.r.IntN(4) == 0 {
			w.at(time.Duration(w.r.Int64N(int64(d))), func() { w.crash(n) })
		}
		if w.r.IntN(4) == 0 {
			t, long := time.Duration(w.r.Int64N(int64(d))), time.Duration(w.r.Int64N(int64(w.cfg.TTL*3/2)))
			way := w.r.IntN(3) // both ways, requests only, replies only
			w.at(t, func() {
				w.cut[n.i] = partition{until: w.now + long, way: way}
				w.logf("node %d partitioned for %v (%s)", n.i, long, []string{"both ways", "requests lost", "replies lost"}[way])
			})
		}
	}
	for range w.r.IntN(3) {
		w.at(time.Duration(w.r.Int64N(int64(d))), w.revokeLeader)
	}
	for range w.r.IntN(2) {
		w.at(time.Duration(w.r.Int64N(int64(d))), w.deleteLeaderKey)
	}
	if w.r2.IntN(2) == 0 {
		t := time.Duration(w.r2.Int64N(int64(d)))
		long := w.cfg.TTL/2 + time.Duration(w.r2.Int64N(int64(w.cfg.TTL)))
		way := 2 * w.r2.IntN(2) // both ways, or replies lost: either hides the deletion
		after := time.Duration(w.r2.Int64N(int64(w.cfg.TTL / 2)))
		w.at(t, func() { w.revokeCutLeader(long, way, after) })
	}
	if w.cfg.Restores {
		for range 1 + w.r.IntN(2) {
			t1 := time.Duration(w.r.Int64N(int64(d)))
			t2 := t1 + time.Duration(w.r.Int64N(int64(d-t1)))
			w.at(t1, w.snapshot)
			w.at(t2, w.restore)
		}
		if w.r3.IntN(4) != 0 {
			// A snapshot while the leader holds its lease, the leader cut
			// off and its lease revoked, a successor elected, and etcd
			// restored while the old leader is still cut off: the restore
			// brings its key and lease back, and it reconnects to them.
			t := time.Duration(w.r3.Int64N(int64(d)))
			after := time.Duration(w.r3.Int64N(int64(w.cfg.TTL / 2)))
			back := after + w.cfg.TTL + time.Duration(w.r3.Int64N(int64(w.cfg.TTL)))
			long := back + time.Duration(w.r3.Int64N(int64(w.cfg.TTL/2)))
			way := 2 * w.r3.IntN(2)
			w.at(t, func() {
				w.snapshot()
				w.revokeCutLeader(long, way, after)
				w.at(w.now+back, w.restore)
			})
		}
	}
}

// leaderKey is the election key with the lowest create revision: the
// leader's.
func (w *msim) leaderKey() *ekv {
	var best *ekv
	for _, k := range w.st.kvs {
		if strings.HasPrefix(k.key, "/sim/election/") && (best == nil || k.create < best.create) {
			best = k
		}
	}
	return best
}

// snapshot copies the coordinator's etcd (`etcdctl snapshot save`).
func (w *msim) snapshot() {
	w.snap = w.st.clone()
	w.logf("operator takes a snapshot of etcd (revision %d)", w.snap.rev)
}

// restore puts the last snapshot back, as `etcdutl snapshot restore
// --bump-revision --mark-compacted` and a restart do: the keys and leases of
// that time, leases refreshed to a full TTL, revisions above every earlier
// one, every watch cancelled (its client reads afresh). A watch learns of
// its cancellation as a client does, when it reconnects: through the
// network, after the node's partition ends; the events etcd had not yet
// delivered to it are lost with the old cluster.
func (w *msim) restore() {
	if w.snap == nil {
		return
	}
	st := w.snap.clone()
	st.rev = w.st.rev + 1000
	st.compacted = st.rev
	st.lastID = max(st.lastID, w.st.lastID)
	for _, wt := range w.st.watches {
		wt.mu.Lock()
		wt.gen++ // deliveries scheduled before are lost
		wt.mu.Unlock()
		n, inc, wt, resp := wt.p.n, wt.p.inc, wt, clientv3.WatchResponse{Header: st.header(), Canceled: true, CompactRevision: st.rev}
		// After the partition, if any, and up to a TTL later: the watch
		// stream is re-established after a backoff of its own, and the
		// requests of the same client may get through before. Drawn from
		// r3, so that the runs' other draws stay as they were.
		d := 10*time.Millisecond + time.Duration(w.r3.Int64N(int64(w.cfg.TTL)))
		if c := w.cut[n.i]; w.now < c.until {
			d += c.until - w.now
		}
		at := max(wt.last, w.now+d)
		wt.last = at
		w.at(at, func() {
			n.deliver(inc, func() {
				w.woke = true
				wt.send(resp)
				wt.close()
			})
		})
	}
	st.watches = nil
	w.st = st
	ids := make([]int64, 0, len(st.leases))
	for id := range st.leases {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		w.renew(id, st.leases[id])
	}
	w.logf("operator restores etcd from the snapshot of revision %d", w.snap.rev)
}

// revokeLeader is `etcdctl lease revoke` of the leader's lease.
func (w *msim) revokeLeader() {
	if k := w.leaderKey(); k != nil {
		w.logf("operator revokes lease %d (election key %s)", k.lse, k.key)
		w.st.dropLease(k.lse)
		w.notify()
	}
}

// revokeCutLeader cuts the leader off from etcd for long (way: as in
// partition) and, after, revokes its lease, as an operator might who sees
// it unreachable: the leader cannot see its key go, and answers from
// memory until its own deadline, which its successor must wait out.
func (w *msim) revokeCutLeader(long time.Duration, way int, after time.Duration) {
	k := w.leaderKey()
	i, ok := w.leaderNode()
	if !ok {
		return
	}
	w.cut[i] = partition{until: w.now + long, way: way}
	w.logf("node %d (leader, election key %s) partitioned for %v (%s)", i, k.key, long, []string{"both ways", "requests lost", "replies lost"}[way])
	w.at(w.now+after, func() {
		if l := w.leaderKey(); l != nil && l.key == k.key && l.create == k.create {
			w.revokeLeader()
		}
	})
}

// leaderNode is the node the leading election key names.
func (w *msim) leaderNode() (int, bool) {
	k := w.leaderKey()
	var i int
	if k == nil {
		return 0, false
	}
	if _, err := fmt.Sscanf(string(k.val), "node%d", &i); err != nil || i < 0 || i >= len(w.nodes) {
		return 0, false
	}
	return i, true
}

// deleteLeaderKey is `etcdctl del` of the leader's election key.
func (w *msim) deleteLeaderKey() {
	if k := w.leaderKey(); k != nil {
		w.logf("operator deletes election key %s", k.key)
		w.st.rev++
		w.st.del(k.key)
		w.notify()
	}
}

// advance moves global time and every running node's clock.
func (w *msim) advance(t time.Duration) {
	w.now = t
	for _, n := range w.nodes {
		if n.paused || n.down {
			continue
		}
		if d := n.mono(t) - n.clk.Mono(); d > 0 {
			before := n.clk.Sleepers()
			n.clk.Advance(d)
			if n.clk.Sleepers() != before {
				w.woke = true
			}
		}
	}
	w.settle()
}

// quiet reports whether every goroutine but the caller is blocked: then
// nothing in the real code can move until the event loop acts.
func quiet(buf []byte) bool {
	// The scheduler's counts are approximate but cheap: when they show
	// another goroutine running or ready, the stack dump (exact, but a
	// stop of the world) is not worth taking yet.
	metrics.Read(schedSamples)
	if schedSamples[0].Value.Uint64() > 0 || schedSamples[1].Value.Uint64() > 1 || schedSamples[2].Value.Uint64() > 0 {
		return false
	}
	n := runtime.Stack(buf, true)
	if n == len(buf) {
		panic("sim: stack buffer too small")
	}
	// Goroutine blocks are separated by blank lines; the first is the
	// caller's own.
	blocks := bytes.Split(buf[:n], []byte("\n\n"))
	for _, g := range blocks[1:] {
		j := bytes.IndexByte(g, '[')
		k := bytes.IndexByte(g, ']')
		if j < 0 || k < j {
			continue
		}
		state := string(g[j+1 : k])
		if c := strings.IndexByte(state, ','); c >= 0 {
			state = state[:c]
		}
		switch state {
		case "running", "runnable", "syscall", "preempted", "sleep", "GC assist wait", "GC assist marking":
			if bytes.Contains(g, []byte("runtime/pprof.")) {
				continue // the profiler's own goroutine, when profiling
			}
			return false
		}
	}
	return true
}

var (
	stackBuf     = make([]byte, 8<<20)
	schedSamples = []metrics.Sample{
		{Name: "/sched/goroutines/runnable:goroutines"},
		{Name: "/sched/goroutines/running:goroutines"},
		{Name: "/sched/goroutines/not-in-go:goroutines"},
	}
)

// settle waits for the real code to block, then sends what it asked of
// etcd in a fixed order and collects answered calls, until nothing moves.
func (w *msim) settle() {
	for {
		w.mu.Lock()
		pending := len(w.submitted)+len(w.newWatch)+len(w.done)+len(w.fwdDone) > 0
		w.mu.Unlock()
		if !w.woke && !pending {
			return
		}
		w.woke = false
		for range 3 {
			runtime.Gosched()
		}
		deadline := time.Now().Add(quiesceWait)
		for i := 0; !quiet(stackBuf); i++ {
			if time.Now().After(deadline) {
				panic(fmt.Sprintf("sim monotonic seed %d: the real code did not block within %v (trace: %s)", w.seed, quiesceWait, strings.Join(w.lines(), " | ")))
			}
			runtime.Gosched()
			if i > 50 {
				time.Sleep(20 * time.Microsecond)
			}
		}
		w.mu.Lock()
		reqs, watches, done, fwd := w.submitted, w.newWatch, w.done, w.fwdDone
		w.submitted, w.newWatch, w.done, w.fwdDone = nil, nil, nil, nil
		w.mu.Unlock()
		if len(reqs)+len(watches)+len(done)+len(fwd) == 0 {
			return
		}
		sort.SliceStable(fwd, func(i, j int) bool {
			if fwd[i].node != fwd[j].node {
				return fwd[i].node < fwd[j].node
			}
			return fwd[i].r.p.n.i < fwd[j].r.p.n.i
		})
		for _, f := range fwd {
			w.forwarded(f)
		}
		sort.SliceStable(reqs, func(i, j int) bool {
			if reqs[i].p.n.i != reqs[j].p.n.i {
				return reqs[i].p.n.i < reqs[j].p.n.i
			}
			return reqs[i].desc < reqs[j].desc
		})
		sort.SliceStable(watches, func(i, j int) bool {
			if watches[i].p.n.i != watches[j].p.n.i {
				return watches[i].p.n.i < watches[j].p.n.i
			}
			return watches[i].key < watches[j].key
		})
		sort.SliceStable(done, func(i, j int) bool {
			if done[i].node != done[j].node {
				return done[i].node < done[j].node
			}
			return done[i].inv < done[j].inv
		})
		for _, wt := range watches {
			w.addWatch(wt)
		}
		// Requests alike in every respect (two goroutines renewing the
		// same lease) cannot be told apart, so their order in reqs is the
		// scheduler's: they share one fate on the network.
		var h hop
		for i, r := range reqs {
			if i == 0 || r.p != reqs[i-1].p || r.desc != reqs[i-1].desc {
				h = w.hop(r.p.n)
			}
			w.send(r, h)
		}
		for _, o := range done {
			w.answer(o)
		}
	}
}

// call is a process's request to etcd, answered by the event loop.
func (w *msim) submit(ctx context.Context, r *ereq) (any, error) {
	p := r.p
	w.mu.Lock()
	if p.dead {
		w.mu.Unlock()
		return nil, errDead
	}
	w.submitted = append(w.submitted, r)
	w.mu.Unlock()
	select {
	case rep := <-r.reply:
		return rep.v, rep.err
	case <-ctx.Done():
		w.mu.Lock()
		r.answered = true
		w.mu.Unlock()
		return nil, ctx.Err()
	}
}

func (w *msim) reply(r *ereq, rep ereply) {
	w.mu.Lock()
	if r.answered {
		w.mu.Unlock()
		return
	}
	r.answered = true
	w.mu.Unlock()
	w.woke = true
	r.reply <- rep
}

// delay draws the delay of one message from node n (reply false) or to it
// (reply true), or reports it lost.
func (w *msim) delay(n *mnode, reply bool) (time.Duration, bool) {
	p := w.cut[n.i]
	if (w.now < p.until && (p.way == 0 || (p.way == 2) == reply)) || w.r.Float64() < w.loss {
		return 0, false
	}
	if w.r.Float64() < w.slow {
		return time.Duration(w.r.Int64N(int64(time.Second))), true
	}
	return time.Duration(1+w.r.IntN(10)) * time.Millisecond, true
}

// maxOpenCalls bounds the calls in flight on one node.
const maxOpenCalls = 4

// mTimeout is how long a process waits for an etcd answer (the real
// client's request timeout, in simulated time).
const mTimeout = 1500 * time.Millisecond

// hop is one request's fate on the network: delays there and back, and
// whether each way arrives.
type hop struct {
	d1, d2   time.Duration
	ok1, ok2 bool
}

func (w *msim) hop(n *mnode) hop {
	var h hop
	h.d1, h.ok1 = w.delay(n, false)
	h.d2, h.ok2 = w.delay(n, true)
	return h
}

// send carries r to etcd and its answer back along h.
func (w *msim) send(r *ereq, h hop) {
	n, inc := r.p.n, r.p.inc
	w.sent = append(w.sent, r)
	w.logf("node %d sends %s", n.i, r.desc)
	deliver := func(rep ereply) {
		n.deliver(inc, func() { w.reply(r, rep) })
	}
	sent := w.now
	w.at(sent+mTimeout, func() { deliver(ereply{err: errLost}) })
	if !h.ok1 {
		return
	}
	if r.exec == nil {
		w.at(sent+h.d1, func() { w.forward(r, h) })
		return
	}
	w.at(sent+h.d1, func() {
		st := w.st
		if r.db != 0 {
			st = w.wdb
		}
		v, err := r.exec(st)
		if !h.ok2 || h.d1+h.d2 >= mTimeout {
			return
		}
		w.at(w.now+h.d2, func() { deliver(ereply{v, err}) })
	})
}

// forward hands a forwarded request to its target's real code, as the
// target's peer listener would; a paused target takes it when it resumes,
// a crashed one never answers.
func (w *msim) forward(r *ereq, h hop) {
	t := w.nodes[r.to]
	t.deliver(t.inc, func() {
		e := t.e
		w.woke = true
		go func() {
			first, err := e.NextLocal(context.Background(), r.n)
			w.mu.Lock()
			w.fwdDone = append(w.fwdDone, fwdResult{r: r, h: h, rep: ereply{first, err}, node: t.i})
			w.mu.Unlock()
		}()
	})
}

// watch registers a watch; the event loop starts it at its next step.
func (w *msim) watch(wt *ewatch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if wt.p.dead {
		wt.close()
		return
	}
	w.newWatch = append(w.newWatch, wt)
}

func (w *msim) addWatch(wt *ewatch) {
	if wt.next == 0 {
		wt.next = w.st.rev + 1
	}
	if wt.next <= w.st.compacted {
		wt.send(clientv3.WatchResponse{Header: w.st.header(), Canceled: true, CompactRevision: w.st.compacted})
		wt.close()
		w.woke = true
		return
	}
	w.st.watches = append(w.st.watches, wt)
	w.flush(wt)
}

// notify sends the events written since each watch's last delivery.
func (w *msim) notify() {
	for _, wt := range w.st.watches {
		w.flush(wt)
	}
}

func (w *msim) flush(wt *ewatch) {
	h := w.st.history
	i := sort.Search(len(h), func(i int) bool { return h[i].rev >= wt.next })
	for i < len(h) {
		rev := h[i].rev
		var evs []*clientv3.Event
		for ; i < len(h) && h[i].rev == rev; i++ {
			if inRange(string(h[i].ev.Kv.Key), wt.key, wt.end) {
				evs = append(evs, (*clientv3.Event)(h[i].ev))
			}
		}
		wt.next = rev + 1
		if len(evs) == 0 {
			continue
		}
		resp := clientv3.WatchResponse{Header: w.st.header(), Events: evs}
		resp.Header.Revision = rev
		n, inc := wt.p.n, wt.p.inc
		wt.mu.Lock()
		gen := wt.gen
		wt.mu.Unlock()
		// A watch is a stream: in order, late while cut off, never lost
		// (but for a restore: see restore).
		d, ok := w.delay(n, true)
		if !ok {
			d = max(w.cut[n.i].until-w.now, 0) + 10*time.Millisecond
		}
		at := max(wt.last, w.now+d)
		wt.last = at
		w.at(at, func() {
			n.deliver(inc, func() {
				wt.mu.Lock()
				lost := wt.gen != gen
				wt.mu.Unlock()
				if lost {
					return
				}
				w.woke = true
				wt.send(resp)
			})
		})
	}
}

// forwarded carries a forwarded request's answer back to the follower.
func (w *msim) forwarded(f fwdResult) {
	r := f.r
	n, inc := r.p.n, r.p.inc
	if f.rep.err == nil {
		w.logf("node %d answers node %d's forwarded %d: %d", f.node, n.i, r.n, f.rep.v)
	} else {
		w.logf("node %d refuses node %d's forwarded %d: %s", f.node, n.i, r.n, shortMonoErr(f.rep.err))
	}
	if !f.h.ok2 {
		return
	}
	w.at(w.now+f.h.d2, func() { n.deliver(inc, func() { w.reply(r, f.rep) }) })
}

// renew sets a lease's expiry a TTL from now and checks it then.
func (w *msim) renew(id int64, l *elease) {
	l.expiry = w.now + l.ttl
	w.at(l.expiry, func() {
		if w.st.leases[id] == l && l.expiry <= w.now {
			w.logf("etcd: lease %d expires", id)
			w.st.dropLease(id)
			w.notify()
		}
	})
}

// issue starts a caller on node n: Next of 1 to 4 values.
func (w *msim) issue(n *mnode) {
	// Callers are a few per node, as a client with bounded concurrency.
	if n.paused || n.down || n.open >= maxOpenCalls {
		return
	}
	n.open++
	k := int64(1 + w.r.IntN(4))
	o := &mop{node: n.i, inc: n.inc, n: k, inv: w.now}
	e := n.e
	w.calls++
	w.woke = true
	go func() {
		o.first, o.err = e.Next(context.Background(), k)
		w.mu.Lock()
		w.done = append(w.done, o)
		w.mu.Unlock()
	}()
}

// answer checks one returned call against every call answered before.
func (w *msim) answer(o *mop) {
	n := w.nodes[o.node]
	if o.inc == n.inc {
		n.open--
	}
	if o.inc != n.inc || n.down {
		return // the process died: its caller never heard the answer
	}
	if o.err != nil {
		w.logf("node %d call of %d: %s", o.node, o.n, shortMonoErr(o.err))
		return
	}
	o.resp = w.now
	last := o.first + o.n - 1
	w.values += o.n
	w.logf("node %d call of %d begun %.3fs: [%d, %d]", o.node, o.n, o.inv.Seconds(), o.first, last)
	// Real-time order: every call answered before this one began got
	// smaller values.
	i := sort.Search(len(w.answered), func(i int) bool { return w.answered[i].resp >= o.inv })
	if i > 0 && w.prefix[i-1] >= o.first {
		j := 0
		for ; j < i && w.answered[j].first+w.answered[j].n-1 < o.first; j++ {
		}
		a := w.answered[j]
		if a.node < 0 {
			w.fail("node %d's call begun at %.3fs got [%d, %d], not above [%d, %d] issued before the run (known from the %s)",
				o.node, o.inv.Seconds(), o.first, last, a.first, a.first+a.n-1, w.cfg.IssuedIn)
		} else {
			w.fail("node %d's call begun at %.3fs got [%d, %d], not above [%d, %d] that node %d answered at %.3fs, before it began",
				o.node, o.inv.Seconds(), o.first, last, a.first, a.first+a.n-1, a.node, a.resp.Seconds())
		}
	}
	// No value twice.
	r := [2]int64{o.first, last}
	k := sort.Search(len(w.ranges), func(k int) bool { return w.ranges[k][0] > o.first })
	if (k > 0 && w.ranges[k-1][1] >= o.first) || (k < len(w.ranges) && w.ranges[k][0] <= last) {
		w.fail("node %d issued [%d, %d], overlapping values issued before", o.node, o.first, last)
	}
	w.ranges = append(w.ranges, [2]int64{})
	copy(w.ranges[k+1:], w.ranges[k:])
	w.ranges[k] = r
	top := last
	if len(w.prefix) > 0 {
		top = max(top, w.prefix[len(w.prefix)-1])
	}
	w.answered = append(w.answered, *o)
	w.prefix = append(w.prefix, top)
}

func shortMonoErr(err error) string {
	switch {
	case errors.Is(err, monotonic.ErrFenced):
		return "fenced"
	case errors.Is(err, monotonic.ErrClosed):
		return "closed"
	}
	return err.Error()
}

func (w *msim) pause(n *mnode, d time.Duration) {
	if n.pause(&w.events, d, func(held []func()) {
		w.logf("node %d resumes", n.i)
		w.advance(w.now)
		for _, f := range held {
			f()
			w.settle()
		}
	}) {
		w.logf("node %d pauses for %v", n.i, d)
	}
}

// crash is kill -9: the process's calls fail at once, its clock stops, its
// goroutines stay blocked until the run ends; a new process starts later.
func (w *msim) crash(n *mnode) {
	if n.down {
		return
	}
	w.logf("node %d inc %d crashes", n.i, n.inc)
	n.down, n.paused, n.held = true, false, nil
	w.kill(n.p)
	// Its goroutines would stay blocked to the end of the run; closing the
	// source lets them go (every call they make fails: the process is
	// dead), which changes nothing in the world and keeps the stack dumps
	// small.
	e := n.e
	go func() { _ = e.Close() }()
	// kill -9 releases the data directory's lock.
	for _, c := range n.closers {
		_ = c.Close()
	}
	n.closers = nil
	w.at(w.now+time.Duration(w.r.Int64N(int64(2*time.Second))), func() { w.start(n) })
}

func (w *msim) kill(p *proc) {
	w.mu.Lock()
	p.dead = true
	var open []*ereq
	for _, r := range append(w.sent, w.submitted...) {
		if r.p == p && !r.answered {
			open = append(open, r)
		}
	}
	w.mu.Unlock()
	for _, r := range open {
		w.reply(r, ereply{err: errDead})
	}
	w.woke = true
	var kept []*ewatch
	for _, wt := range w.st.watches {
		if wt.p == p {
			wt.close()
		} else {
			kept = append(kept, wt)
		}
	}
	w.st.watches = kept
}

// shutdown ends every process: the dead ones' goroutines, blocked since
// their crash, and the live ones, without a word to etcd.
func (w *msim) shutdown() {
	for _, n := range w.nodes {
		w.kill(n.p)
	}
	var wg sync.WaitGroup
	for _, n := range w.nodes {
		for _, e := range n.all {
			wg.Add(1)
			go func() { defer wg.Done(); _ = e.Close() }()
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	deadline := time.After(quiesceWait)
	for {
		w.mu.Lock()
		reqs := w.submitted
		w.submitted, w.newWatch = nil, nil
		for _, r := range reqs {
			r.answered = true
		}
		w.mu.Unlock()
		for _, r := range reqs {
			r.reply <- ereply{err: errDead}
		}
		// Retry loops (a follower's forwarding) sleep on their clocks
		// before they see the source closed.
		for _, n := range w.nodes {
			for _, c := range n.clks {
				c.Advance(100 * time.Millisecond)
			}
		}
		closed := false
		select {
		case <-done:
			closed = true
		default:
		}
		// Close waits for the sources' own goroutines; a follower's
		// forwarding batch and its callers end on their own, once their
		// clocks let them.
		if closed && runtime.NumGoroutine() <= w.base {
			for _, n := range w.nodes {
				for _, c := range n.closers {
					_ = c.Close()
				}
			}
			return
		}
		select {
		case <-deadline:
			panic(fmt.Sprintf("sim monotonic seed %d: sources did not close within %v", w.seed, quiesceWait))
		case <-time.After(time.Millisecond):
		}
	}
}
