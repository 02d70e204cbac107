package worker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/testkit/testserver"
)

// List shows a claim whose value is not idmint's JSON as held, and says
// it is unreadable, instead of an anonymous holder.
func TestEtcdListUnreadableClaim(t *testing.T) {
	addr := testserver.Addr(t, testserver.Etcd)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := NewEtcd(ctx, []string{addr}, "/"+testserver.Prefix(t)+"/workers/", WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	e := a.(*etcdAssigner)
	if _, err := e.cli.Put(ctx, e.claimKey(7), "{not json"); err != nil {
		t.Fatal(err)
	}
	hs, err := a.List(ctx)
	if err != nil || len(hs) != 1 || hs[0].ID != 7 || !hs[0].Live || !strings.HasPrefix(hs[0].Holder, "(claim unreadable: ") {
		t.Fatalf("List = %+v, %v; want worker 7 live, its holder saying the claim is unreadable", hs, err)
	}
}

func TestZooKeeperListUnreadableLock(t *testing.T) {
	f := newZKFixture(t, "10.7.0.4:8181")
	l := acquireZK(t, f.a)
	if _, err := f.obs.Set(f.a.lockPath(l.ID()), []byte("{not json"), -1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hs, err := f.a.List(ctx)
	if err != nil || len(hs) != 1 || hs[0].ID != l.ID() || !hs[0].Live || !strings.Contains(hs[0].Holder, "(lock unreadable: ") {
		t.Fatalf("List = %+v, %v; want worker %d live, its holder saying the lock is unreadable", hs, err, l.ID())
	}
}
