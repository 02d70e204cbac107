package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idmint/idmint/testkit/testserver"
)

// TestEtcdFenceAfterTakeover: a holder whose lease expired cannot move the
// horizon of its worker ID once another holder has claimed that ID: the
// horizon write is fenced on the claim's create revision (the generation),
// not on a claim merely existing, so the new holder's claim does not let
// the old one through.
func TestEtcdFenceAfterTakeover(t *testing.T) {
	addr := testserver.Addr(t, testserver.Etcd)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	u := "etcd://" + addr + "/idmint?name=" + testserver.Prefix(t) + "-guards-coord"
	old, err := open(t, u).Acquire(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	// The lease expires (a revoke is an expiry without the wait).
	b := old.b.(*etcdBackend)
	if _, err := b.a.cli.Revoke(ctx, b.lease); err != nil {
		t.Fatal(err)
	}
	succ, err := open(t, u).Acquire(ctx, 0)
	if err != nil {
		t.Fatalf("acquire worker id 0 after its lease expired: %v", err)
	}
	defer succ.Close()
	if succ.ID() != old.ID() || succ.Generation() <= old.Generation() {
		t.Fatalf("successor holds id %d generation %d; want id %d, generation above %d", succ.ID(), succ.Generation(), old.ID(), old.Generation())
	}
	h := time.Now().Add(time.Hour).Truncate(time.Millisecond).UTC()
	if _, err := succ.Extend(ctx, h); err != nil {
		t.Fatalf("successor's Extend: %v", err)
	}
	if got, err := old.Extend(ctx, h.Add(time.Hour)); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("old holder's Extend while the successor holds the id = %v, %v; want ErrLeaseLost", got, err)
	}
	if err := old.Release(ctx, h.Add(-30*time.Minute)); err == nil {
		t.Fatal("old holder lowered the successor's horizon")
	}
	hs, err := open(t, u).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 1 || !hs[0].Horizon.Equal(h) || hs[0].Generation != succ.Generation() {
		t.Fatalf("List = %+v; want worker id 0 held at generation %d with the successor's horizon %v", hs, succ.Generation(), h)
	}
}
