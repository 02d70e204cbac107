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
// exists). It stops issuing at that deadline unless a later proof moved it,
// and at once when it sees its key deleted or its lease gone (watchTerm, a
// keepalive answering that the lease is not found, a failed bound write).
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
}

func (r *records) leaderRecord() *leaderRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leader
}

// seenAt returns when the term record of mod revision rev was seen.
func (r *records) seenAt(rev int64) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen, r.proof == rev && rev != 0
}

func (r *records) apply(e *Etcd, kv *mvccpb.KeyValue, deleted bool, now time.Duration) {
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
			r.proof, r.seen = kv.ModRevision, now
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
		var leader *mvccpb.KeyValue
		for _, kv := range resp.Kvs {
			if string(kv.Key) == e.leaderKey() {
				leader = kv
			}
			e.recs.apply(e, kv, false, now)
		}
		if leader == nil {
			e.recs.apply(e, &mvccpb.KeyValue{Key: []byte(e.leaderKey())}, true, now)
		}
		wctx, wcancel := context.WithCancel(ctx)
		for wr := range cli.Watch(wctx, from, clientv3.WithRange(end), clientv3.WithRev(resp.Header.Revision+1)) {
			if wr.Err() != nil || wr.Canceled {
				break // compacted or refused: read afresh
			}
			now := e.cfg.Clock.Mono()
			for _, ev := range wr.Events {
				e.recs.apply(e, ev.Kv, ev.Type == mvccpb.DELETE, now)
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
	key, rev, err := e.elect(ctx, grant.ID)
	if err != nil {
		return fmt.Errorf("monotonic: campaign: %w", err)
	}
	tctx, tcancel := context.WithCancel(ctx)
	defer tcancel()
	t := &term{key: key, rev: rev, clk: e.cfg.Clock, cancel: tcancel}
	defer t.fence()
	// From here on, the key's deletion (or the lease's) ends the term.
	e.wg.Add(1)
	go e.watchTerm(tctx, t)
	// Read the predecessor's last proof before this term writes its own.
	from, proofFound, err := e.handover(tctx)
	if err != nil {
		return err
	}
	// Prove the lease afresh: the campaign may have waited for long (this
	// also checks that the key is still there: Campaign returns when the
	// keys before it are gone, even when its own went too).
	if err := e.prove(tctx, t, grant.ID); err != nil {
		return fmt.Errorf("monotonic: prove leadership after election: %w", err)
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
func (e *Etcd) elect(ctx context.Context, lease clientv3.LeaseID) (key string, rev int64, err error) {
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
		return "", 0, err
	}
	rev = resp.Header.Revision
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return "", 0, errors.New("candidate key vanished as it was created")
		}
		rev = kvs[0].CreateRevision
	}
	for {
		gctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
		r, err := cli.Get(gctx, pfx, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1))...)
		cancel()
		if err != nil {
			return "", 0, err
		}
		if len(r.Kvs) == 0 {
			return key, rev, nil
		}
		if err := e.waitDelete(ctx, string(r.Kvs[0].Key), r.Header.Revision); err != nil {
			return "", 0, err
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
// successor starts at once. Measuring from this node's campaign start
// instead would not be safe: a node that campaigned long before P's last
// proof would start too early.
func (e *Etcd) handover(ctx context.Context) (from time.Duration, found bool, err error) {
	gctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	resp, err := e.cfg.Client.Get(gctx, e.termKey())
	cancel()
	if err != nil {
		return 0, false, fmt.Errorf("monotonic: read the last term: %w", err)
	}
	got := e.cfg.Clock.Mono()
	if e.cfg.Mutations.Has(mutate.SecondLeader) || e.cfg.Mutations.Has(mutate.NoHandoverWait) {
		return 0, len(resp.Kvs) > 0, nil
	}
	if len(resp.Kvs) == 0 {
		return got + e.cfg.TTL, false, nil
	}
	kv := resp.Kvs[0]
	var rec termRecord
	if json.Unmarshal(kv.Value, &rec) == nil && rec.Resigned {
		return 0, true, nil
	}
	p := got
	if seen, ok := e.recs.seenAt(kv.ModRevision); ok && seen < p {
		p = seen
	}
	return p + e.cfg.TTL, true, nil
}

// prove renews the lease and, conditional on the election key, records the
// proof in the term key; only then is leadership proven until the send
// time + TTL - Margin. A lease etcd no longer has, or a key gone, fences
// the term.
func (e *Etcd) prove(ctx context.Context, t *term, lease clientv3.LeaseID) error {
	sent := e.cfg.Clock.Mono()
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	if err := e.cfg.keepAlive(ctx, lease); err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			t.fence()
			return fmt.Errorf("%w: lease lost: %v", ErrFenced, err)
		}
		return fmt.Errorf("monotonic: keepalive: %w", err)
	}
	rec, _ := json.Marshal(termRecord{Revision: t.rev})
	r, err := e.cfg.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(t.key), "=", t.rev)).
		Then(clientv3.OpPut(e.termKey(), string(rec))).
		Commit()
	if err != nil {
		return fmt.Errorf("monotonic: record proof: %w", err)
	}
	if !r.Succeeded {
		t.fence()
		return fmt.Errorf("%w: election key %s (revision %d) is gone", ErrFenced, t.key, t.rev)
	}
	t.confirm(sent + e.cfg.TTL - e.cfg.Margin)
	return nil
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
// lease expiry or revoke deletes it too) or found replaced.
func (e *Etcd) watchTerm(ctx context.Context, t *term) {
	defer e.wg.Done()
	cli := e.cfg.Client
	rev := t.rev + 1
	for ctx.Err() == nil {
		wctx, wcancel := context.WithCancel(ctx)
		for wr := range cli.Watch(wctx, t.key, clientv3.WithRev(rev)) {
			if wr.Err() != nil || wr.Canceled {
				break // compacted past rev, or refused: check the key itself
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE && !e.cfg.Mutations.Has(mutate.SecondLeader) {
					wcancel()
					e.cfg.Logger.Warn("monotonic leader's election key deleted (lease revoked or expired, or key deleted): stopped issuing",
						"name", e.cfg.Name, "key", t.key, "revision", t.rev)
					t.fence()
					return
				}
				rev = ev.Kv.ModRevision + 1
			}
		}
		wcancel()
		if ctx.Err() != nil {
			return
		}
		gctx, gcancel := context.WithTimeout(ctx, e.cfg.Timeout)
		resp, err := cli.Get(gctx, t.key)
		gcancel()
		if err != nil {
			// Unreachable: the term runs out on its own clock unless a
			// proof gets through, which checks the key too.
			_ = e.cfg.Clock.Sleep(ctx, 200*time.Millisecond)
			continue
		}
		if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != t.rev {
			t.fence()
			return
		}
		rev = resp.Header.Revision + 1
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
			return errors.New("monotonic: leadership fenced: the election key or lease is gone")
		}
		if err := e.cfg.Clock.Sleep(ctx, next); err != nil {
			if t.valid.Load() < 0 {
				return errors.New("monotonic: leadership fenced: the election key or lease is gone")
			}
			return nil
		}
		sent := e.cfg.Clock.Mono()
		err := e.prove(ctx, t, lease)
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
