package monotonic

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/testkit/testserver"
)

// A restore of etcd from a snapshot taken while a leader, since deposed,
// held its lease brings its election key back with the create revision it
// was elected with; the leader, cut off from etcd in between, finds it
// again. What tells it that its term is over is its watch: etcd restored
// with --bump-revision --mark-compacted cancels every watch from before
// (compacted) when its client reconnects, and until then the watch delivers
// nothing of the new history. These tests put a real etcd behind a watcher
// that does either to the leader's watches, and check that it stops.

// restoreWatcher passes the client's watches through, except that stall
// holds back every delivery until resume, and restore cancels every watch
// open at that moment as compacted (later watches are not touched).
type restoreWatcher struct {
	clientv3.Watcher
	mu       sync.Mutex
	open     chan struct{} // closed while deliveries flow
	restored chan struct{} // closed by restore
}

func newRestoreWatcher(w clientv3.Watcher) *restoreWatcher {
	open := make(chan struct{})
	close(open)
	return &restoreWatcher{Watcher: w, open: open, restored: make(chan struct{})}
}

func (w *restoreWatcher) stall() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.open = make(chan struct{})
}

func (w *restoreWatcher) resume() {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.open)
}

func (w *restoreWatcher) restore() {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.restored)
	w.restored = make(chan struct{})
}

func (w *restoreWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	in := w.Watcher.Watch(ctx, key, opts...)
	out := make(chan clientv3.WatchResponse)
	w.mu.Lock()
	restored := w.restored
	w.mu.Unlock()
	go func() {
		defer close(out)
		cancelled := func() {
			select {
			case out <- clientv3.WatchResponse{Canceled: true, CompactRevision: 1}:
			case <-ctx.Done():
			}
		}
		for {
			var wr clientv3.WatchResponse
			select {
			case r, ok := <-in:
				if !ok {
					return
				}
				wr = r
			case <-restored:
				cancelled()
				return
			case <-ctx.Done():
				return
			}
			w.mu.Lock()
			open := w.open
			w.mu.Unlock()
			select {
			case <-open:
			case <-restored:
				cancelled()
				return
			case <-ctx.Done():
				return
			}
			select {
			case out <- wr:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// restoreLeader starts a single node with a fake clock on a client whose
// watcher the test controls, and returns it once it has issued a value.
func restoreLeader(t *testing.T) (*Etcd, *restoreWatcher, *clock.Fake, *clientv3.Client, string) {
	t.Helper()
	addr := testserver.Addr(t, testserver.Etcd)
	prefix := "/" + testserver.Prefix(t) + "/"
	cli := etcdClient(t, addr)
	w := newRestoreWatcher(cli.Watcher)
	cli.Watcher = w
	fake := clock.NewFake(time.Now())
	a, err := NewEtcd(EtcdConfig{Client: cli, Prefix: prefix, Name: "a", TTL: 2 * time.Second, Window: 1_000_000, Clock: fake})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	testserver.Eventually(t, "a leads", 10*time.Second, func() bool { _, self := a.Leader(); return self })
	if _, err := a.Next(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
	// The lead loop waits on the fake clock for its next proof.
	if err := fake.WaitForSleepers(ctxT(t), 1); err != nil {
		t.Fatalf("the lead loop never slept: %v", err)
	}
	return a, w, fake, etcdClient(t, addr), prefix
}

// TestEtcdRestoredWatchCancelled: when the leader's watches are cancelled
// as compacted (etcd was restored), it stops issuing at once although its
// election key is still there, and leads again only through a new
// election, above everything it issued.
func TestEtcdRestoredWatchCancelled(t *testing.T) {
	a, w, fake, _, _ := restoreLeader(t)
	ctx := ctxT(t)
	last, err := a.Next(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	w.restore()
	testserver.Eventually(t, "the leader refuses after its watch was cancelled", 5*time.Second, func() bool {
		id, err := a.Next(ctx, 1)
		if err == nil {
			last = id
			return false
		}
		if !errors.Is(err, ErrFenced) {
			t.Fatalf("Next: %v; want ErrFenced", err)
		}
		return true
	})
	testserver.Eventually(t, "a new term", 20*time.Second, func() bool {
		fake.Advance(100 * time.Millisecond)
		id, err := a.Next(ctx, 1)
		if err != nil {
			return false
		}
		if id <= last {
			t.Fatalf("the new term issued %d, not above %d", id, last)
		}
		return true
	})
	if f := a.Status().Failovers; f != 2 {
		t.Fatalf("%d terms; want 2", f)
	}
}

// TestEtcdProofNeedsWatch: a proof counts only once the leader's watch has
// delivered it. While the watch delivers nothing (as for a leader that
// finds its key again after a restore before its watch's cancellation
// arrives), the leader's proofs still succeed in etcd, and it stops at
// the deadline of the last proof its watch delivered.
func TestEtcdProofNeedsWatch(t *testing.T) {
	a, w, fake, cli, prefix := restoreLeader(t)
	ctx := ctxT(t)
	term := func() int64 {
		r, err := cli.Get(ctx, prefix+"term")
		if err != nil || len(r.Kvs) != 1 {
			t.Fatalf("the term key: %v, %v", r, err)
		}
		return r.Kvs[0].ModRevision
	}
	// The last proof the watch delivered was sent at 0s (fake): its
	// deadline is 1.6s (TTL 2s - margin 400ms). The leader proves every
	// TTL/3 (667ms).
	w.stall()
	before := term()
	fake.Advance(700 * time.Millisecond)
	testserver.Eventually(t, "the proof at 0.7s written in etcd", 10*time.Second, func() bool { return term() > before })
	fake.Advance(time.Second) // 1.7s: past 1.6s, not past the 0.7s proof's 2.3s
	if id, err := a.Next(ctx, 1); !errors.Is(err, ErrFenced) {
		t.Fatalf("past the last delivered proof's deadline the leader answered %d, %v; want ErrFenced", id, err)
	}
	w.resume()
	testserver.Eventually(t, "the leader issues again once its watch delivers", 20*time.Second, func() bool {
		fake.Advance(100 * time.Millisecond)
		_, err := a.Next(ctx, 1)
		return err == nil
	})
}

// compactedKV answers every read at an earlier revision ErrCompacted, as
// etcd restored with --mark-compacted does for every revision up to its
// first one.
type compactedKV struct{ clientv3.KV }

func (k compactedKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	if clientv3.OpGet(key, opts...).Rev() > 0 {
		return nil, rpctypes.ErrCompacted
	}
	return k.KV.Get(ctx, key, opts...)
}

// TestEtcdResignedRecordReadAfresh: a resigned term record lets a
// successor start at once if its record watcher saw the record's put
// arrive, or if etcd still serves the revision it was written at. One
// that only read it as it stood (it started after the resignation), from
// an etcd that answers that revision compacted, cannot tell it from an old
// record a restored etcd shows again, after which terms the restore
// dropped may still be answering; it waits out a TTL.
func TestEtcdResignedRecordReadAfresh(t *testing.T) {
	addr := testserver.Addr(t, testserver.Etcd)
	for _, restored := range []bool{false, true} {
		name := "history kept"
		if restored {
			name = "revision compacted"
		}
		t.Run(name, func(t *testing.T) {
			prefix := "/" + testserver.Prefix(t) + "/"
			a, err := NewEtcd(EtcdConfig{Client: etcdClient(t, addr), Prefix: prefix, Name: "a", TTL: 2 * time.Second, Window: 1000})
			if err != nil {
				t.Fatal(err)
			}
			ctx := ctxT(t)
			testserver.Eventually(t, "a leads", 10*time.Second, func() bool { _, self := a.Leader(); return self })
			if _, err := a.Next(ctx, 1); err != nil {
				t.Fatal(err)
			}
			a.Close() // resigns: the term record says so
			cli := etcdClient(t, addr)
			if restored {
				cli.KV = compactedKV{cli.KV}
			}
			fake := clock.NewFake(time.Now())
			b, err := NewEtcd(EtcdConfig{Client: cli, Prefix: prefix, Name: "b", TTL: 2 * time.Second, Window: 1000, Clock: fake})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			testserver.Eventually(t, "b elected", 10*time.Second, func() bool { return b.Status().Failovers == 1 })
			id, err := b.Next(ctx, 1)
			switch {
			case !restored && err != nil:
				t.Fatalf("b refused (%v) after a resignation etcd still serves", err)
			case restored && !errors.Is(err, ErrFenced):
				t.Fatalf("b answered %d, %v at once on a resigned record whose revision etcd answers compacted; want ErrFenced until a TTL passed", id, err)
			}
			testserver.Eventually(t, "b issues after a TTL", 20*time.Second, func() bool {
				fake.Advance(100 * time.Millisecond)
				_, err := b.Next(ctx, 1)
				return err == nil
			})
		})
	}
}
