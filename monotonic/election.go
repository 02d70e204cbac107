package monotonic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/internal/mutate"
)

// The election and the lead loop.
//
// Keys under EtcdConfig.Prefix:
//
//	election/<lease>  the concurrency.Election candidates; the lowest create
//	                  revision leads (attached to each candidate's lease)
//	bound             the persisted bound, written only while the writer's
//	                  election key has the create revision it was elected with
//	leader            the leader record (node name, address, since) for
//	                  Leaders and LeaderNode, attached to the leader's lease
//	term              the latest proof of leadership: written by the leader
//	                  each time it proves it still leads, under the same
//	                  fence, and once more, marked resigned, when it resigns
//
// Proving. A leader's term is valid until sent + TTL - Margin on its own
// monotonic clock, where sent is the time it sent a proof: a keepalive of
// its lease followed by a put of the term key conditional on its election
// key (so the proof is also written after sent, and only while the key
// exists), which counts once the term's watch has delivered it. It stops
// issuing at that deadline unless a later proof moved it, and at once when
// it sees its key deleted or its lease gone (watchTerm, a keepalive
// answering that the lease is not found, a failed bound write) or its
// watch breaks.
//
// Restores. etcd restored from an older snapshot (etcdutl snapshot
// restore --bump-revision --mark-compacted) holds the keys and leases of
// that time, and its revisions go on above every earlier one. A leader
// deposed since the snapshot (its lease revoked or expired while it was
// cut off, a successor elected and issuing) finds its key and lease again,
// with the create revision it was elected with, so a fence on the key
// alone lets it lead beside the values its successor issued. What differs
// is the history: the term's watch runs from the revision of its election,
// and etcd cancels, as compacted, every watch from before the restore
// (--mark-compacted marks the revisions up to the bumped one compacted, so
// that watchers do not resume: etcd's disaster recovery guide,
// https://etcd.io/docs/v3.7/op-guide/recovery/#revision-difference).
// So a proof counts only once that watch delivers it (one written in the
// restored etcd never is), and a broken watch ends the term; the node
// campaigns again, and a new term starts above the witness's mark, after
// a handover wait timed in its own history.
//
// Handing over. etcd deletes the election key when the lease expires, when
// an operator revokes it, or when an operator deletes the key; only in the
// first case is it known that the old leader's own deadline has passed.
// So a new leader waits, before it issues, until TTL after it saw the
// predecessor's last proof (see handover).

// term is one leadership of this node.
type term struct {
	c *core
	// valid is the Mono (ns) until which leadership is proven: 0 not yet
	// proven, -1 fenced for good.
	valid atomic.Int64
	// from is the Mono before which the term must not issue, because a
	// predecessor may still believe it leads. Set before the term is
	// published, never changed.
	from time.Duration
	key  string
	rev  int64
	clk  clock.Clock

	cancel context.CancelFunc // ends the term's work (watch, lead loop)

	// The term's watch (watchTerm) delivers, in order and without a gap,
	// every event of its election key and of the term key from the
	// revision at which the term was elected. seen is the highest revision
	// through which it has delivered them; moved is closed and replaced
	// whenever seen moves.
	wmu   sync.Mutex
	seen  int64
	moved chan struct{}
}

func newTerm(key string, rev int64, clk clock.Clock, cancel context.CancelFunc) *term {
	return &term{key: key, rev: rev, clk: clk, cancel: cancel, moved: make(chan struct{})}
}

// advance records that the term's watch delivered everything through rev.
func (t *term) advance(rev int64) {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if rev > t.seen {
		t.seen = rev
		close(t.moved)
		t.moved = make(chan struct{})
	}
}

// waitSeen returns once the term's watch has delivered everything through
// rev, or an error when the term is fenced (ErrFenced) or ctx ends.
func (t *term) waitSeen(ctx context.Context, rev int64) error {
	for {
		t.wmu.Lock()
		seen, moved := t.seen, t.moved
		t.wmu.Unlock()
		if t.valid.Load() < 0 {
			return ErrFenced
		}
		if seen >= rev {
			return nil
		}
		select {
		case <-moved:
		case <-ctx.Done():
			if t.valid.Load() < 0 {
				return ErrFenced
			}
			return ctx.Err()
		}
	}
}

// proven reports whether the lease is proven now: the term may write.
func (t *term) proven() bool { return t.clk.Mono() < time.Duration(t.valid.Load()) }

// ok reports whether the term may issue now: proven, and past from.
func (t *term) ok() bool {
	now := t.clk.Mono()
	return now >= t.from && now < time.Duration(t.valid.Load())
}

// confirm raises the proven deadline to v, never once fenced.
func (t *term) confirm(v time.Duration) {
	for {
		old := t.valid.Load()
		if old < 0 || old >= int64(v) {
			return
		}
		if t.valid.CompareAndSwap(old, int64(v)) {
			return
		}
	}
}

// fence ends the term for good: no next that starts afterwards issues.
func (t *term) fence() {
	t.valid.Store(-1)
	t.cancel()
}

// termRecord is the value of Prefix+"term".
type termRecord struct {
	// Revision is the create revision of the writer's election key.
	Revision int64 `json:"revision"`
	// Resigned: the writer fenced itself (it issues nothing any more) after
	// it had passed its own handover wait (no term before it issues
	// either).
	Resigned bool `json:"resigned,omitempty"`
}

// records is what a node last saw, through watchRecords, of the leader
// record and the term key.
type records struct {
	mu     sync.Mutex
	leader *leaderRecord
	proof  int64         // mod revision of the latest term record seen
	seen   time.Duration // Mono when it was seen
	// event: the record was seen as its put, delivered by the watch: it
	// was written in the stream's history, not read as it stood when the
	// stream began (a record read afresh after a restore may be older
	// than what the lost history wrote after it).
	event bool
	// epoch counts the watcher's reads afresh: each starts a stream of its
	// own (after a watch was cancelled, for one because etcd was restored
	// from a snapshot, whose history is another). delivered is the highest
	// revision through which the current stream has delivered every event.
	epoch     uint64
	delivered int64
	moved     chan struct{} // closed and replaced when delivered or epoch moves
}

// sight is what handover uses of a term record seen by watchRecords.
type sight struct {
	at    time.Duration // Mono when it was seen
	epoch uint64        // the stream it was seen in
	event bool          // seen as its put (records.event)
}

func (r *records) leaderRecord() *leaderRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leader
}

// seenAt returns when, and in which stream, the term record of mod
// revision rev was seen.
func (r *records) seenAt(rev int64) (sight, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return sight{at: r.seen, epoch: r.epoch, event: r.event}, r.proof == rev && rev != 0
}

// progress records that the current stream delivered everything through
// rev; fresh starts a new stream, whose reading replaces what the old one
// saw (after a restore, a term record of a lower revision than one seen
// before is the record now).
func (r *records) progress(rev int64, fresh bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if fresh {
		r.epoch++
		r.proof, r.delivered = 0, 0
	}
	r.delivered = max(r.delivered, rev)
	if r.moved != nil {
		close(r.moved)
	}
	r.moved = make(chan struct{})
}

// waitDelivered reports whether the stream of epoch delivered everything
// through rev, waiting until it has, until it is replaced, or until ctx
// ends.
func (r *records) waitDelivered(ctx context.Context, epoch uint64, rev int64) bool {
	for {
		r.mu.Lock()
		ep, delivered, moved := r.epoch, r.delivered, r.moved
		if moved == nil {
			r.moved = make(chan struct{})
			moved = r.moved
		}
		r.mu.Unlock()
		if ep != epoch {
			return false
		}
		if delivered >= rev {
			return true
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return false
		}
	}
}

func (r *records) apply(e *Etcd, kv *mvccpb.KeyValue, deleted, event bool, now time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch string(kv.Key) {
	case e.leaderKey():
		r.leader = nil
		var rec leaderRecord
		if !deleted && json.Unmarshal(kv.Value, &rec) == nil {
			r.leader = &rec
		}
	case e.termKey():
		if !deleted && kv.ModRevision > r.proof {
			r.proof, r.seen, r.event = kv.ModRevision, now, event
		}
	}
}

// watchRecords follows the leader record and the term key for the life of
// the source: LeaderNode reads the first, handover the second.
func (e *Etcd) watchRecords(ctx context.Context) {
	defer e.wg.Done()
	cli := e.cfg.Client
	from, end := e.leaderKey(), e.termKey()+"\x00" // [leader, term]: nothing else lies between
	for ctx.Err() == nil {
		gctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
		resp, err := cli.Get(gctx, from, clientv3.WithRange(end))
		cancel()
		if err != nil {
			_ = e.cfg.Clock.Sleep(ctx, 200*time.Millisecond)
			continue
		}
		now := e.cfg.Clock.Mono()
		e.recs.progress(resp.Header.Revision, true)
		var leader *mvccpb.KeyValue
		for _, kv := range resp.Kvs {
			if string(kv.Key) == e.leaderKey() {
				leader = kv
			}
			e.recs.apply(e, kv, false, false, now)
		}
		if leader == nil {
			e.recs.apply(e, &mvccpb.KeyValue{Key: []byte(e.leaderKey())}, true, false, now)
		}
		wctx, wcancel := context.WithCancel(ctx)
		for wr := range cli.Watch(wctx, from, clientv3.WithRange(end), clientv3.WithRev(resp.Header.Revision+1)) {
			if wr.Err() != nil || wr.Canceled {
				break // compacted or refused: read afresh
			}
			now := e.cfg.Clock.Mono()
			for _, ev := range wr.Events {
				e.recs.apply(e, ev.Kv, ev.Type == mvccpb.DELETE, true, now)
				// Events arrive in revision order, so one delivered
				// means every one before it was (the header's revision
				// may run ahead of a batch still being caught up).
				e.recs.progress(ev.Kv.ModRevision, false)
			}
		}
		wcancel()
	}
}

func (e *Etcd) run(ctx context.Context) {
	defer e.wg.Done()
	for ctx.Err() == nil && !e.closed.Load() {
		if err := e.campaign(ctx); err != nil && ctx.Err() == nil {
			e.cfg.Logger.Warn("monotonic leadership ended", "name", e.cfg.Name, "err", err)
		}
		_ = e.cfg.Clock.Sleep(ctx, 200*time.Millisecond)
	}
}

// campaign runs one session: wait to be elected, wait out the predecessor,
// lead until the lease or the key is lost, and give the lease back.
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
	key, rev, elected, err := e.elect(ctx, grant.ID)
	if err != nil {
		return fmt.Errorf("monotonic: campaign: %w", err)
	}
	tctx, tcancel := context.WithCancel(ctx)
	defer tcancel()
	t := newTerm(key, rev, e.cfg.Clock, tcancel)
	defer t.fence()
	// From here on, the key's deletion (or the lease's), or a break in the
	// watch's history, ends the term.
	e.wg.Add(1)
	go e.watchTerm(tctx, t, elected)
	// Read the predecessor's last proof before this term writes its own.
	h, err := e.handover(tctx)
	if err != nil {
		return err
	}
	// Prove the lease afresh: the campaign may have waited for long (this
	// also checks that the key is still there: Campaign returns when the
	// keys before it are gone, even when its own went too).
	proof, err := e.prove(tctx, t, grant.ID)
	if err != nil {
		return fmt.Errorf("monotonic: prove leadership after election: %w", err)
	}
	from, proofFound := h.from, h.found
	if h.sight != nil {
		// The predecessor's last proof was timed by when the record
		// watcher saw it. That holds only if it saw it in this term's
		// history: its stream, unbroken since, delivered this proof.
		wctx, wcancel := context.WithTimeout(tctx, e.cfg.Timeout)
		if !e.recs.waitDelivered(wctx, h.sight.epoch, proof) {
			from = h.read + e.cfg.TTL
		}
		wcancel()
	}
	bctx, bcancel := context.WithTimeout(tctx, e.cfg.Timeout)
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
	wctx, wcancel := context.WithTimeout(tctx, e.cfg.Timeout)
	mark, err := readMark(wctx, e.cfg.Witness, e.cfg.Space)
	wcancel()
	if err != nil {
		return err
	}
	known := max(mark, e.cfg.Floor)
	if e.cfg.Mutations.Has(mutate.IgnoreWitness) {
		known = 0
	}
	if known > start {
		if mark > start && !e.cfg.Mutations.Has(mutate.IgnoreWitness) {
			e.wentBack.Add(1) // a floor alone is a migration's start, not a source that went back
		}
		e.cfg.Logger.Info("monotonic: source starts above a bound known elsewhere", "name", e.cfg.Name,
			"source_bound", start, "known_bound", known, "witness_mark", mark, "floor", e.cfg.Floor, "source", "etcd "+e.boundKey())
		start = known
	}
	if !proofFound && len(resp.Kvs) == 0 && start == 0 {
		// Nothing was ever issued for this key (no proof, no bound, no
		// mark, no floor): no earlier leader has anything to answer.
		from = 0
	}
	t.from = from
	persist := func(ctx context.Context, bound int64) error {
		if !t.proven() {
			return ErrFenced
		}
		r, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(t.key), "=", t.rev)).
			Then(clientv3.OpPut(e.boundKey(), strconv.FormatInt(bound, 10))).
			Commit()
		if err != nil {
			return fmt.Errorf("monotonic: persist bound: %w", err)
		}
		if !r.Succeeded {
			t.fence()
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
	if err := t.c.extend(tctx, t.c.target(start+1)); err != nil {
		return err
	}
	e.failovers.Add(1)
	e.term.Store(t)
	defer e.term.CompareAndSwap(t, nil)
	self := e.cfg.Advertise
	e.leader.Store(&self)
	if wait := from - e.cfg.Clock.Mono(); wait > 0 {
		e.cfg.Logger.Info("monotonic leader elected; waiting out the predecessor's lease before issuing", "name", e.cfg.Name,
			"start_above", start, "revision", t.rev, "wait", wait)
	} else {
		e.cfg.Logger.Info("monotonic leader elected", "name", e.cfg.Name, "start_above", start, "revision", t.rev)
	}
	e.publish(tctx, t, grant.ID)
	err = e.lead(tctx, t, sess, grant.ID)
	e.resign(t)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// elect puts this node's candidate key, attached to lease, and returns
// once every key created before it is gone: concurrency.Election's
// Campaign rule. Unlike Campaign, giving up (ctx done) leaves the key to
// the lease's revoke, bounded by Timeout, instead of resigning with the
// client's own context, which never ends while etcd is unreachable (Close
// would hang).
//
// elected is the revision at which no key created before this one was
// left: the term's history starts there.
func (e *Etcd) elect(ctx context.Context, lease clientv3.LeaseID) (key string, rev, elected int64, err error) {
	cli := e.cfg.Client
	// The key concurrency.Election uses (it adds a "/" to the prefix), so
	// that nodes of earlier versions, which campaign through it, share the
	// election.
	pfx := e.electionKey() + "/"
	key = fmt.Sprintf("%s%x", pfx, int64(lease))
	pctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	resp, err := cli.Txn(pctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, e.cfg.Advertise, clientv3.WithLease(lease))).
		Else(clientv3.OpGet(key)).
		Commit()
	cancel()
	if err != nil {
		return "", 0, 0, err
	}
	rev = resp.Header.Revision
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return "", 0, 0, errors.New("candidate key vanished as it was created")
		}
		rev = kvs[0].CreateRevision
	}
	for {
		gctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
		r, err := cli.Get(gctx, pfx, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1))...)
		cancel()
		if err != nil {
			return "", 0, 0, err
		}
		if len(r.Kvs) == 0 {
			return key, rev, r.Header.Revision, nil
		}
		if err := e.waitDelete(ctx, string(r.Kvs[0].Key), r.Header.Revision); err != nil {
			return "", 0, 0, err
		}
	}
}

// waitDelete returns once key is deleted after revision rev.
func (e *Etcd) waitDelete(ctx context.Context, key string, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for wr := range e.cfg.Client.Watch(wctx, key, clientv3.WithRev(rev+1)) {
		if err := wr.Err(); err != nil {
			return err
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("watch of the candidate before this one ended")
}

// handover returns the Mono time from which this node, just elected, may
// issue, and whether a term record was found.
//
// The rule, and why it is safe. Every deadline a leader P sets itself is
// d = s + TTL - Margin on its own clock, where s is the send time of a
// proof whose put of the term key succeeded, so the put took effect after
// s and while P's election key existed. This node won the election, so P's
// key is gone, and P can put no proof any more; every put of P precedes
// the term record's latest value (later puts could only come from a
// leader after P, and there is none before this node). Let p be a reading
// of this node's clock taken after that latest put took effect: the
// moment the record watcher received it, or else the moment a read of it
// returned (a read's send time is not enough: the put may have taken
// effect between send and answer). Then every deadline of P, and of any
// term before P (whose puts all precede P's), lies before p + TTL - Margin,
// give or take the rates of the two clocks, which Margin covers (it is
// TTL/5 by default: a 20 % difference over one TTL). So this node issues
// from p + TTL on.
//
// This holds whatever removed P's key: a lease expiry (P's keepalives
// stopped: then p + TTL is about when the lease expired anyway, and the
// wait is nearly nothing), an operator's revoke or delete (P may have
// proven itself just before: the wait is up to a TTL, during which P, if it
// cannot see its key gone, runs out on its own clock). A predecessor that
// resigned (Close) marks the record resigned after fencing itself, so its
// successor starts at once, if it saw that put arrive through its record
// watcher, or etcd still serves the revision it was written at (unbroken):
// a record only read as it stood (by a node that started since, or after
// a watch was cancelled) may be one that etcd, restored from an older
// snapshot, shows again, and the terms the restore dropped came after it.
//
// After a restore. p must be taken in the new term's history: a sighting
// by the record watcher counts only if the watcher's stream, unbroken
// since, also delivers the new term's first proof (checked in campaign;
// else the wait counts from handover's own read). A restore cancels every
// watch from before it (--mark-compacted), so a sighting from before is
// dropped, and p is after the restore, which is after every proof of the
// terms the restore dropped.
//
// Measuring from this node's campaign start instead would not be safe: a
// node that campaigned long before P's last proof would start too early.
func (e *Etcd) handover(ctx context.Context) (handoff, error) {
	gctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	resp, err := e.cfg.Client.Get(gctx, e.termKey())
	cancel()
	if err != nil {
		return handoff{}, fmt.Errorf("monotonic: read the last term: %w", err)
	}
	got := e.cfg.Clock.Mono()
	if e.cfg.Mutations.Has(mutate.SecondLeader) || e.cfg.Mutations.Has(mutate.NoHandoverWait) {
		return handoff{found: len(resp.Kvs) > 0}, nil
	}
	if len(resp.Kvs) == 0 {
		return handoff{from: got + e.cfg.TTL, read: got}, nil
	}
	kv := resp.Kvs[0]
	h := handoff{from: got + e.cfg.TTL, found: true, read: got}
	seen, ok := e.recs.seenAt(kv.ModRevision)
	var rec termRecord
	resigned := json.Unmarshal(kv.Value, &rec) == nil && rec.Resigned
	if resigned && !(ok && seen.event) {
		// The read may have outrun the record watcher: give it until
		// Timeout to deliver the put.
		wctx, wcancel := context.WithTimeout(ctx, e.cfg.Timeout)
		e.recs.waitDelivered(wctx, seen.epoch, kv.ModRevision)
		wcancel()
		seen, ok = e.recs.seenAt(kv.ModRevision)
	}
	if resigned && !(ok && seen.event) && e.unbroken(ctx, kv.ModRevision) {
		return handoff{found: true}, nil
	}
	if resigned && ok && seen.event {
		// Trusted only as a put seen in this term's history (checked
		// after the first proof): a resigned record that etcd, restored
		// from a snapshot, shows again says nothing of the terms after it
		// that the restore dropped.
		h.from, h.sight = 0, &seen
		return h, nil
	}
	if ok && seen.at < got {
		h.from, h.sight = seen.at+e.cfg.TTL, &seen
	}
	return h, nil
}

// unbroken reports whether etcd still serves the term key as it stood at
// revision rev: then no restore with --mark-compacted came after rev (it
// marks every revision up to the restored etcd's first one compacted), and
// a resigned record written at rev is the latest of an unbroken history.
// An ordinary compaction past rev answers false too: the caller then waits
// out a TTL for nothing.
func (e *Etcd) unbroken(ctx context.Context, rev int64) bool {
	gctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	r, err := e.cfg.Client.Get(gctx, e.termKey(), clientv3.WithRev(rev))
	return err == nil && len(r.Kvs) == 1 && r.Kvs[0].ModRevision == rev
}

// handoff is what handover found.
type handoff struct {
	from  time.Duration // Mono from which the new term may issue
	found bool          // a term record was there
	read  time.Duration // Mono when handover's read of it returned
	// sight, when from was timed by the record watcher's sighting of the
	// record: the campaign checks, after its first proof, that the
	// sighting belongs to its history, and else issues from read + TTL.
	sight *sight
}

// prove renews the lease and, conditional on the election key, records the
// proof in the term key; only then is leadership proven until the send
// time + TTL - Margin. A lease etcd no longer has, or a key gone, fences
// the term.
//
// The proof counts only once the term's watch has delivered it: a put that
// succeeded because a restore brought the election key back is in another
// history than the term's, and the watch breaks instead (watchTerm). It
// returns the proof's revision.
func (e *Etcd) prove(ctx context.Context, t *term, lease clientv3.LeaseID) (int64, error) {
	sent := e.cfg.Clock.Mono()
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	if err := e.cfg.keepAlive(ctx, lease); err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			t.fence()
			return 0, fmt.Errorf("%w: lease lost: %v", ErrFenced, err)
		}
		return 0, fmt.Errorf("monotonic: keepalive: %w", err)
	}
	rec, _ := json.Marshal(termRecord{Revision: t.rev})
	r, err := e.cfg.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(t.key), "=", t.rev)).
		Then(clientv3.OpPut(e.termKey(), string(rec))).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("monotonic: record proof: %w", err)
	}
	if !r.Succeeded {
		t.fence()
		return 0, fmt.Errorf("%w: election key %s (revision %d) is gone", ErrFenced, t.key, t.rev)
	}
	if !e.cfg.Mutations.Has(mutate.TrustRestoredKey) {
		if err := t.waitSeen(ctx, r.Header.Revision); err != nil {
			if errors.Is(err, ErrFenced) {
				return 0, fmt.Errorf("%w: the term's watch broke or saw the key go before the proof at revision %d arrived", ErrFenced, r.Header.Revision)
			}
			return 0, fmt.Errorf("monotonic: proof at revision %d not delivered by the term's watch: %w", r.Header.Revision, err)
		}
	}
	t.confirm(sent + e.cfg.TTL - e.cfg.Margin)
	return r.Header.Revision, nil
}

// resign records, after the term is fenced, that it issues nothing any
// more, so a successor starts at once; only when the term had passed its
// own handover wait (else a term before it may still be issuing), and only
// while its key is there (conditional, like every write of the term).
func (e *Etcd) resign(t *term) {
	t.fence()
	// A next that saw the term valid assigns its values under the core's
	// lock: once the lock is free, none is left.
	t.c.mu.Lock()
	t.c.mu.Unlock() //nolint:staticcheck // an empty critical section, on purpose
	t.c.close()
	if e.cfg.Clock.Mono() < t.from {
		return
	}
	rec, _ := json.Marshal(termRecord{Revision: t.rev, Resigned: true})
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.Timeout)
	defer cancel()
	_, _ = e.cfg.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(t.key), "=", t.rev)).
		Then(clientv3.OpPut(e.termKey(), string(rec))).
		Commit()
}

// watchTerm fences the term the moment its election key is deleted (a
// lease expiry or revoke deletes it too), and when the watch breaks: a
// watch is cancelled when the revisions it must deliver are compacted, as
// after etcd was restored from a snapshot (--bump-revision
// --mark-compacted). A restore can bring the election key back with its
// create revision, after a term elected meanwhile issued values this one
// never saw: only an unbroken watch from the revision of the election
// tells the two histories apart. It also follows the term key, so that
// prove can wait for its own proof to arrive through the watch.
func (e *Etcd) watchTerm(ctx context.Context, t *term, elected int64) {
	defer e.wg.Done()
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	// [the election key, the term key]: other candidates' keys and the
	// leader record lie between, and are ignored.
	for wr := range e.cfg.Client.Watch(wctx, t.key, clientv3.WithRange(e.termKey()+"\x00"), clientv3.WithRev(elected+1)) {
		if wr.Err() != nil || wr.Canceled {
			break
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE && string(ev.Kv.Key) == t.key && !e.cfg.Mutations.Has(mutate.SecondLeader) {
				e.cfg.Logger.Warn("monotonic leader's election key deleted (lease revoked or expired, or key deleted): stopped issuing",
					"name", e.cfg.Name, "key", t.key, "revision", t.rev)
				t.fence()
				return
			}
			// In revision order: every event before this one was
			// delivered (not so for the header's revision while a
			// watch catches up in batches).
			t.advance(ev.Kv.ModRevision)
		}
	}
	if ctx.Err() != nil {
		return
	}
	if e.cfg.Mutations.Has(mutate.TrustRestoredKey) {
		e.trustRestoredKey(ctx, t)
		return
	}
	e.cfg.Logger.Warn("monotonic leader's watch broke (compacted: etcd restored from a snapshot?): stopped issuing; campaigning again",
		"name", e.cfg.Name, "key", t.key, "revision", t.rev)
	t.fence()
}

// trustRestoredKey is the mistake mutate.TrustRestoredKey puts back: after
// the watch broke, the term goes on while its key is found again.
func (e *Etcd) trustRestoredKey(ctx context.Context, t *term) {
	cli := e.cfg.Client
	for ctx.Err() == nil {
		gctx, gcancel := context.WithTimeout(ctx, e.cfg.Timeout)
		resp, err := cli.Get(gctx, t.key)
		gcancel()
		if err != nil {
			_ = e.cfg.Clock.Sleep(ctx, 200*time.Millisecond)
			continue
		}
		if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != t.rev {
			t.fence()
			return
		}
		wctx, wcancel := context.WithCancel(ctx)
		for wr := range cli.Watch(wctx, t.key, clientv3.WithRev(resp.Header.Revision+1)) {
			if wr.Err() != nil || wr.Canceled {
				break
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE {
					wcancel()
					t.fence()
					return
				}
			}
		}
		wcancel()
	}
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

// lead keeps the lease proven until it is lost, the term is fenced or ctx
// (the term's) ends.
func (e *Etcd) lead(ctx context.Context, t *term, sess *concurrency.Session, lease clientv3.LeaseID) error {
	every := e.cfg.TTL / 3
	next := every
	for {
		select {
		case <-sess.Done():
			return errors.New("monotonic: etcd session ended")
		default:
		}
		if t.valid.Load() < 0 {
			return errors.New("monotonic: leadership fenced: the election key or lease is gone, or the term's watch broke")
		}
		if err := e.cfg.Clock.Sleep(ctx, next); err != nil {
			if t.valid.Load() < 0 {
				return errors.New("monotonic: leadership fenced: the election key or lease is gone, or the term's watch broke")
			}
			return nil
		}
		sent := e.cfg.Clock.Mono()
		_, err := e.prove(ctx, t, lease)
		switch {
		case ctx.Err() != nil:
			continue // the checks above say why
		case errors.Is(err, ErrFenced):
			return err
		case err != nil:
			e.cfg.Logger.Warn("monotonic proof failed; leading until the proven deadline", "name", e.cfg.Name, "err", err)
		}
		next = max(every-(e.cfg.Clock.Mono()-sent), every/10)
	}
}
