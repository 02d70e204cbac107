package sim

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A simulated etcd for the real monotonic.Etcd source: the keys, revisions,
// leases and watches of one etcd cluster, kept by the event loop in global
// time, and a client per process (the clientv3.KV, Lease and Watcher
// interfaces) whose every call is a message through the simulated network.
// Only what idmint's election uses is implemented: Get with ranges, sorting,
// limits and create-revision bounds, Put with a lease, Delete, Txn with
// compares on create/mod revision, version, value and lease, Grant, Revoke,
// KeepAlive(Once), and watches from a revision.

var errUnimplemented = errors.New("sim: not simulated")

type ekv struct {
	key                   string
	val                   []byte
	create, mod, ver, lse int64
}

func (k *ekv) pb() *mvccpb.KeyValue {
	return &mvccpb.KeyValue{Key: []byte(k.key), Value: k.val, CreateRevision: k.create, ModRevision: k.mod, Version: k.ver, Lease: k.lse}
}

type elease struct {
	ttl    time.Duration
	expiry time.Duration
}

type eevent struct {
	rev int64
	ev  *mvccpb.Event
}

// etcdState is the cluster's data, touched only by the event loop.
type etcdState struct {
	rev     int64
	kvs     map[string]*ekv
	leases  map[int64]*elease
	lastID  int64
	history []eevent
	watches []*ewatch
	// compacted: watches from this revision or below are refused
	// (a restore with --mark-compacted).
	compacted int64
}

func newEtcdState() *etcdState {
	return &etcdState{rev: 1, kvs: map[string]*ekv{}, leases: map[int64]*elease{}}
}

// clone copies the data (keys, leases, history), not the watches.
func (st *etcdState) clone() *etcdState {
	c := &etcdState{rev: st.rev, lastID: st.lastID, kvs: map[string]*ekv{}, leases: map[int64]*elease{}}
	for k, v := range st.kvs {
		cp := *v
		c.kvs[k] = &cp
	}
	for id, l := range st.leases {
		cp := *l
		c.leases[id] = &cp
	}
	c.history = append([]eevent(nil), st.history...)
	return c
}

func inRange(k, key, end string) bool {
	if end == "" {
		return k == key
	}
	if end == "\x00" {
		return k >= key
	}
	return k >= key && k < end
}

// write applies a put or delete at the current revision and records the
// event for watchers.
func (st *etcdState) put(key string, val []byte, lease int64) {
	k := st.kvs[key]
	if k == nil {
		k = &ekv{key: key, create: st.rev}
		st.kvs[key] = k
	}
	k.val, k.mod, k.lse = val, st.rev, lease
	k.ver++
	st.history = append(st.history, eevent{st.rev, &mvccpb.Event{Type: mvccpb.PUT, Kv: k.pb()}})
}

func (st *etcdState) del(key string) bool {
	k := st.kvs[key]
	if k == nil {
		return false
	}
	delete(st.kvs, key)
	st.history = append(st.history, eevent{st.rev, &mvccpb.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: st.rev}}})
	return true
}

// dropLease deletes lease id and every key attached to it in one revision.
func (st *etcdState) dropLease(id int64) {
	delete(st.leases, id)
	var keys []string
	for k, v := range st.kvs {
		if v.lse == id {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return
	}
	sort.Strings(keys)
	st.rev++
	for _, k := range keys {
		st.del(k)
	}
}

func (st *etcdState) header() *pb.ResponseHeader { return &pb.ResponseHeader{Revision: st.rev} }

// opField reads an unexported field of a clientv3.Op (the sort order and
// the lease of a put have no accessor).
func opField(op clientv3.Op, name string) reflect.Value { return reflect.ValueOf(op).FieldByName(name) }

func (st *etcdState) get(op clientv3.Op) *pb.RangeResponse {
	key, end := string(op.KeyBytes()), string(op.RangeBytes())
	var out []*ekv
	for _, k := range st.kvs {
		if !inRange(k.key, key, end) {
			continue
		}
		if m := op.MaxCreateRev(); m > 0 && k.create > m {
			continue
		}
		if m := op.MinCreateRev(); m > 0 && k.create < m {
			continue
		}
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	if s := opField(op, "sort"); !s.IsNil() {
		target, order := clientv3.SortTarget(s.Elem().FieldByName("Target").Int()), clientv3.SortOrder(s.Elem().FieldByName("Order").Int())
		val := func(k *ekv) int64 {
			switch target {
			case clientv3.SortByCreateRevision:
				return k.create
			case clientv3.SortByModRevision:
				return k.mod
			case clientv3.SortByVersion:
				return k.ver
			}
			return 0
		}
		if target != clientv3.SortByKey {
			sort.SliceStable(out, func(i, j int) bool { return val(out[i]) < val(out[j]) })
		}
		if order == clientv3.SortDescend {
			for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	r := &pb.RangeResponse{Header: st.header(), Count: int64(len(out))}
	if l := op.Limit(); l > 0 && int64(len(out)) > l {
		out, r.More = out[:l], true
	}
	if !op.IsCountOnly() {
		for _, k := range out {
			r.Kvs = append(r.Kvs, k.pb())
		}
	}
	return r
}

func (st *etcdState) compare(cmp clientv3.Cmp) bool {
	c := cmp.GetCompare()
	k := st.kvs[string(c.Key)]
	var have, want int64
	var hv, wv []byte
	switch u := c.TargetUnion.(type) {
	case *pb.Compare_CreateRevision:
		want = u.CreateRevision
		if k != nil {
			have = k.create
		}
	case *pb.Compare_ModRevision:
		want = u.ModRevision
		if k != nil {
			have = k.mod
		}
	case *pb.Compare_Version:
		want = u.Version
		if k != nil {
			have = k.ver
		}
	case *pb.Compare_Lease:
		want = u.Lease
		if k != nil {
			have = k.lse
		}
	case *pb.Compare_Value:
		if k == nil {
			return false // etcd: a value compare on a missing key fails
		}
		hv, wv = k.val, u.Value
		switch {
		case string(hv) < string(wv):
			have, want = 0, 1
		case string(hv) > string(wv):
			have, want = 1, 0
		}
	default:
		panic(fmt.Sprintf("sim: compare target %T", c.TargetUnion))
	}
	switch c.Result {
	case pb.Compare_EQUAL:
		return have == want
	case pb.Compare_NOT_EQUAL:
		return have != want
	case pb.Compare_GREATER:
		return have > want
	case pb.Compare_LESS:
		return have < want
	}
	return false
}

// txn runs a transaction; every write in it shares one new revision.
func (st *etcdState) txn(cmps []clientv3.Cmp, then, els []clientv3.Op) (*pb.TxnResponse, error) {
	ok := true
	for _, c := range cmps {
		ok = ok && st.compare(c)
	}
	ops := then
	if !ok {
		ops = els
	}
	writes := false
	for _, op := range ops {
		if op.IsPut() {
			if l := opField(op, "leaseID").Int(); l != 0 && st.leases[l] == nil {
				return nil, rpctypes.ErrLeaseNotFound
			}
			writes = true
		}
		if op.IsDelete() {
			writes = true
		}
	}
	if writes {
		st.rev++
	}
	r := &pb.TxnResponse{Succeeded: ok}
	for _, op := range ops {
		switch {
		case op.IsGet():
			r.Responses = append(r.Responses, &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: st.get(op)}})
		case op.IsPut():
			st.put(string(op.KeyBytes()), op.ValueBytes(), opField(op, "leaseID").Int())
			r.Responses = append(r.Responses, &pb.ResponseOp{Response: &pb.ResponseOp_ResponsePut{ResponsePut: &pb.PutResponse{Header: st.header()}}})
		case op.IsDelete():
			var keys []string
			for k := range st.kvs {
				if inRange(k, string(op.KeyBytes()), string(op.RangeBytes())) {
					keys = append(keys, k)
				}
			}
			sort.Strings(keys)
			for _, k := range keys {
				st.del(k)
			}
			r.Responses = append(r.Responses, &pb.ResponseOp{Response: &pb.ResponseOp_ResponseDeleteRange{
				ResponseDeleteRange: &pb.DeleteRangeResponse{Header: st.header(), Deleted: int64(len(keys))}}})
		default:
			return nil, errUnimplemented
		}
	}
	r.Header = st.header()
	return r, nil
}

// ewatch is one watch of a process: events matching [key, end) from
// revision from on, delivered in order through the network.
type ewatch struct {
	p        *proc
	key, end string
	next     int64 // the next revision to deliver
	mu       sync.Mutex
	ch       chan clientv3.WatchResponse
	closed   bool
	last     time.Duration // global time of the latest delivery scheduled
	gen      int           // deliveries scheduled before a restore moved it are lost
}

func (w *ewatch) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.closed = true
		close(w.ch)
	}
}

func (w *ewatch) send(r clientv3.WatchResponse) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	select {
	case w.ch <- r:
	default:
		panic("sim: watch channel full")
	}
}

// etcdClient is one process's connection: it implements the parts of
// clientv3.KV, Lease and Watcher the election uses.
type etcdClient struct {
	p *proc
	w *msim
	// db: 0 the coordinator's etcd, 1 the separate witness store (an etcd
	// too, never restored).
	db int
}

func (c *etcdClient) call(ctx context.Context, desc string, exec func(st *etcdState) (any, error)) (any, error) {
	if c.db != 0 {
		desc = "witness " + desc
	}
	return c.w.submit(ctx, &ereq{p: c.p, desc: desc, exec: exec, db: c.db, reply: make(chan ereply, 1)})
}

func (c *etcdClient) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	r, err := c.Txn(ctx).Then(clientv3.OpPut(key, val, opts...)).Commit()
	if err != nil {
		return nil, err
	}
	return (*clientv3.PutResponse)(r.Responses[0].GetResponsePut()), nil
}

func (c *etcdClient) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	op := clientv3.OpGet(key, opts...)
	desc := fmt.Sprintf("get %s..%q limit %d maxcreate %d", key, op.RangeBytes(), op.Limit(), op.MaxCreateRev())
	if rev := op.Rev(); rev > 0 {
		desc += fmt.Sprintf(" at revision %d", rev)
	}
	r, err := c.call(ctx, desc, func(st *etcdState) (any, error) {
		if op.Rev() > 0 {
			return st.getAt(op)
		}
		return st.get(op), nil
	})
	if err != nil {
		return nil, err
	}
	return (*clientv3.GetResponse)(r.(*pb.RangeResponse)), nil
}

// getAt reads one key as it stood at an earlier revision, from the
// history; revisions up to the compacted one are refused, as etcd does.
func (st *etcdState) getAt(op clientv3.Op) (*pb.RangeResponse, error) {
	key, rev := string(op.KeyBytes()), op.Rev()
	if len(op.RangeBytes()) > 0 {
		return nil, errUnimplemented
	}
	if rev <= st.compacted {
		return nil, rpctypes.ErrCompacted
	}
	if rev > st.rev {
		return nil, rpctypes.ErrFutureRev
	}
	var last *mvccpb.Event
	for _, h := range st.history {
		if h.rev > rev {
			break
		}
		if string(h.ev.Kv.Key) == key {
			last = h.ev
		}
	}
	r := &pb.RangeResponse{Header: st.header()}
	if last != nil && last.Type == mvccpb.PUT {
		r.Kvs, r.Count = []*mvccpb.KeyValue{last.Kv}, 1
	}
	return r, nil
}

func (c *etcdClient) GetStream(context.Context, string, ...clientv3.OpOption) (clientv3.GetStreamChan, error) {
	return nil, errUnimplemented
}

func (c *etcdClient) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	r, err := c.Txn(ctx).Then(clientv3.OpDelete(key, opts...)).Commit()
	if err != nil {
		return nil, err
	}
	return (*clientv3.DeleteResponse)(r.Responses[0].GetResponseDeleteRange()), nil
}

func (c *etcdClient) Compact(context.Context, int64, ...clientv3.CompactOption) (*clientv3.CompactResponse, error) {
	return nil, errUnimplemented
}

func (c *etcdClient) Do(context.Context, clientv3.Op) (clientv3.OpResponse, error) {
	return clientv3.OpResponse{}, errUnimplemented
}

func (c *etcdClient) Txn(ctx context.Context) clientv3.Txn { return &etxn{c: c, ctx: ctx} }

type etxn struct {
	c           *etcdClient
	ctx         context.Context
	cmps        []clientv3.Cmp
	then, else_ []clientv3.Op
}

func (t *etxn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.cmps = append(t.cmps, cs...); return t }
func (t *etxn) Then(ops ...clientv3.Op) clientv3.Txn { t.then = append(t.then, ops...); return t }
func (t *etxn) Else(ops ...clientv3.Op) clientv3.Txn { t.else_ = append(t.else_, ops...); return t }
func (t *etxn) Commit() (*clientv3.TxnResponse, error) {
	desc := "txn"
	for _, op := range t.then {
		desc += " " + string(op.KeyBytes()) + "=" + string(op.ValueBytes())
	}
	r, err := t.c.call(t.ctx, desc, func(st *etcdState) (any, error) {
		r, err := st.txn(t.cmps, t.then, t.else_)
		if err == nil {
			t.c.w.notify()
		}
		return r, err
	})
	if err != nil {
		return nil, err
	}
	return (*clientv3.TxnResponse)(r.(*pb.TxnResponse)), nil
}

func (c *etcdClient) Grant(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
	r, err := c.call(ctx, "grant", func(st *etcdState) (any, error) {
		st.lastID++
		id := st.lastID
		l := &elease{ttl: time.Duration(ttl) * time.Second}
		st.leases[id] = l
		c.w.renew(id, l)
		return &clientv3.LeaseGrantResponse{ResponseHeader: st.header(), ID: clientv3.LeaseID(id), TTL: ttl}, nil
	})
	if err != nil {
		return nil, err
	}
	return r.(*clientv3.LeaseGrantResponse), nil
}

func (c *etcdClient) Revoke(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseRevokeResponse, error) {
	_, err := c.call(ctx, "revoke", func(st *etcdState) (any, error) {
		if st.leases[int64(id)] == nil {
			return nil, rpctypes.ErrLeaseNotFound
		}
		c.w.logf("etcd: lease %d revoked by its holder", int64(id))
		st.dropLease(int64(id))
		c.w.notify()
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	return &clientv3.LeaseRevokeResponse{}, nil
}

func (c *etcdClient) TimeToLive(context.Context, clientv3.LeaseID, ...clientv3.LeaseOption) (*clientv3.LeaseTimeToLiveResponse, error) {
	return nil, errUnimplemented
}

func (c *etcdClient) Leases(context.Context) (*clientv3.LeaseLeasesResponse, error) {
	return nil, errUnimplemented
}

func (c *etcdClient) KeepAliveOnce(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
	r, err := c.call(ctx, "keepalive", func(st *etcdState) (any, error) {
		l := st.leases[int64(id)]
		if l == nil {
			return nil, rpctypes.ErrLeaseNotFound
		}
		c.w.renew(int64(id), l)
		return &clientv3.LeaseKeepAliveResponse{ResponseHeader: st.header(), ID: id, TTL: int64(l.ttl / time.Second)}, nil
	})
	if err != nil {
		return nil, err
	}
	return r.(*clientv3.LeaseKeepAliveResponse), nil
}

// KeepAlive renews the lease every third of its TTL, on the process's
// clock, until ctx ends or the lease is gone, as the real client's stream
// does.
func (c *etcdClient) KeepAlive(ctx context.Context, id clientv3.LeaseID) (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	ch := make(chan *clientv3.LeaseKeepAliveResponse, 1)
	clk := c.p.n.clk
	go func() {
		defer close(ch)
		for {
			r, err := c.KeepAliveOnce(ctx, id)
			if ctx.Err() != nil || errors.Is(err, rpctypes.ErrLeaseNotFound) || errors.Is(err, errDead) {
				return
			}
			wait := 500 * time.Millisecond
			if err == nil {
				select {
				case ch <- r:
				default:
				}
				wait = time.Duration(r.TTL) * time.Second / 3
			}
			if clk.Sleep(ctx, wait) != nil {
				return
			}
		}
	}()
	return ch, nil
}

func (c *etcdClient) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	op := clientv3.OpGet(key, opts...)
	w := &ewatch{p: c.p, key: key, end: string(op.RangeBytes()), next: op.Rev(), ch: make(chan clientv3.WatchResponse, 4096)}
	c.w.watch(w)
	context.AfterFunc(ctx, w.close) // as the real client, which closes the channel when ctx ends
	return w.ch
}

func (c *etcdClient) RequestProgress(context.Context) error { return errUnimplemented }

// Close is the shared Close of the three interfaces: the process's
// client is closed with the process.
func (c *etcdClient) Close() error { return nil }

var (
	_ clientv3.KV      = (*etcdClient)(nil)
	_ clientv3.Lease   = (*etcdClient)(nil)
	_ clientv3.Watcher = (*etcdClient)(nil)
)
