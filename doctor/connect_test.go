package doctor_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/idmint/idmint/doctor"
	"github.com/idmint/idmint/monotonic"
	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/segment/stores"
	"github.com/idmint/idmint/server/strategies"
	"github.com/idmint/idmint/testkit/testserver"
	"github.com/idmint/idmint/witness"
	"github.com/idmint/idmint/worker"
)

func connect(t *testing.T, cfgYAML string, o doctor.ConnectOptions) []doctor.Finding {
	t.Helper()
	site := doctor.Site{Name: "a.yaml", Config: load(t, t.TempDir(), cfgYAML)}
	return doctor.Connect(context.Background(), []doctor.Site{site}, o)
}

// A segment key on real PostgreSQL with an etcd witness: after a real
// allocator served segments, the store is at or above the witness's mark
// (nothing found); lowered by hand below it, as a restored backup or a
// failover to a lagging replica leaves it, store.below_witness is an error
// naming the key and the mark.
func TestConnectStoreBelowWitness(t *testing.T) {
	pg := testserver.Database(t, testserver.Postgres)
	etcdURL := "etcd://" + testserver.Addr(t, testserver.Etcd) + "/" + testserver.Prefix(t)
	ctx := context.Background()
	w, err := witness.Open(ctx, etcdURL, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, err := stores.OpenAllocator(ctx, pg, segment.Options{Witness: w})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.CreateKey(ctx, segment.KeyInfo{Key: "order", Step: 100}); err != nil {
		t.Fatal(err)
	}
	k, err := a.Key("order")
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, 250)
	if _, err := k.NextN(ctx, ids); err != nil {
		t.Fatal(err)
	}
	a.Close()
	w.Close()
	cfg := fmt.Sprintf("coordinator: %s\nstores: {default: %q}\nkeys: {order: {strategy: segment}, fresh: {strategy: segment}}\n", etcdURL, pg)
	if fs := find(connect(t, cfg, doctor.ConnectOptions{}), "store.below_witness"); len(fs) > 0 {
		t.Fatalf("store at its mark: found %+v", fs)
	}
	if fs := find(connect(t, cfg, doctor.ConnectOptions{}), "connect.unreachable"); len(fs) > 0 {
		t.Fatalf("found %+v", fs)
	}
	db, err := sql.Open("pgx", pg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("UPDATE leaf_alloc SET max_id = 101 WHERE biz_tag = 'order'"); err != nil {
		t.Fatal(err)
	}
	fs := find(connect(t, cfg, doctor.ConnectOptions{}), "store.below_witness")
	if len(fs) != 1 || fs[0].Key != "order" || fs[0].Severity != doctor.Error || !strings.Contains(fs[0].Found, "max_id 101") {
		t.Fatalf("store lowered to 101: want one error on key order, got %+v", fs)
	}
	// The row deleted: the same.
	if _, err := db.Exec("DELETE FROM leaf_alloc WHERE biz_tag = 'order'"); err != nil {
		t.Fatal(err)
	}
	fs = find(connect(t, cfg, doctor.ConnectOptions{}), "store.below_witness")
	if len(fs) != 1 || !strings.Contains(fs[0].Found, "has no row") {
		t.Fatalf("row deleted: got %+v", fs)
	}
}

// This machine's clock against a real PostgreSQL coordinator's: in step,
// nothing is found; seen 10 s off (an injected clock), clock.offset is an
// error naming the lease margin, and a margin= above the offset clears it
// (with a ttl= whose default margin, a fifth, would not).
func TestConnectClockOffset(t *testing.T) {
	pg := testserver.Database(t, testserver.Postgres)
	cfg := func(q string) string {
		if q != "" && strings.Contains(pg, "?") {
			q = "&" + q[1:]
		}
		return fmt.Sprintf("coordinator: %q\nwitness: none\nkeys: {u: {strategy: uuid}}\n", pg+q)
	}
	if fs := find(connect(t, cfg(""), doctor.ConnectOptions{}), "clock.offset"); len(fs) > 0 {
		t.Fatalf("in step: found %+v", fs)
	}
	skewed := doctor.ConnectOptions{Now: func() time.Time { return time.Now().Add(10 * time.Second) }}
	fs := find(connect(t, cfg(""), skewed), "clock.offset")
	if len(fs) != 1 || fs[0].Severity != doctor.Error || !strings.Contains(fs[0].Found, "lease margin is 2s") {
		t.Fatalf("10 s off: want one error, got %+v", fs)
	}
	if fs := find(connect(t, cfg("?ttl=20s&margin=15s"), skewed), "clock.offset"); len(fs) > 0 {
		t.Fatalf("10 s off with a 20 s margin: found %+v", fs)
	}
}

// Worker IDs in a real PostgreSQL coordinator: a pool of 2 with both held by
// live leases is an error; with one held, a pool of 16 has room.
func TestConnectWorkersExhausted(t *testing.T) {
	pg := testserver.Database(t, testserver.Postgres)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		as, err := worker.Open(ctx, pg, worker.WithHolder(fmt.Sprintf("test-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		l, err := as.Acquire(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close(); as.Close() })
	}
	cfg := func(limit int) string {
		return fmt.Sprintf("coordinator: %q\nwitness: none\nkeys: {sf: {strategy: snowflake, options: {worker_limit: \"%d\"}}}\n", pg, limit)
	}
	fs := find(connect(t, cfg(2), doctor.ConnectOptions{}), "workers.exhausted")
	if len(fs) != 1 || fs[0].Severity != doctor.Error || fs[0].Key != "sf" || !strings.Contains(fs[0].Found, "2 of 2") {
		t.Fatalf("pool of 2, both held: got %+v", fs)
	}
	if fs := find(connect(t, cfg(16), doctor.ConnectOptions{}), "workers.exhausted"); len(fs) > 0 {
		t.Fatalf("pool of 16, 2 held: found %+v", fs)
	}
}

// A server that does not answer is a finding, not a failure of the run.
func TestConnectUnreachable(t *testing.T) {
	port := testserver.FreePort(t)
	cfg := fmt.Sprintf("coordinator: postgres://u@127.0.0.1:%d/ids?connect_timeout=1\nwitness: none\nkeys: {u: {strategy: uuid}}\n", port)
	fs := find(connect(t, cfg, doctor.ConnectOptions{Timeout: 2 * time.Second}), "connect.unreachable")
	if len(fs) != 1 || fs[0].Severity != doctor.Error {
		t.Fatalf("got %+v", fs)
	}
}

// Live leases in a real etcd: a holder whose horizon lies 30 s ahead of
// this machine's clock (recorded by a node whose clock runs 27 s ahead, with
// its 3 s lead) is clock.node_ahead; one recorded with this clock's lead is
// not.
func TestConnectNodeAhead(t *testing.T) {
	coord := "etcd://" + testserver.Addr(t, testserver.Etcd) + "/" + testserver.Prefix(t)
	ctx := context.Background()
	extend := func(holder string, ahead time.Duration) {
		as, err := worker.Open(ctx, coord, worker.WithHolder(holder))
		if err != nil {
			t.Fatal(err)
		}
		l, err := as.Acquire(ctx, 1023)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close(); as.Close() })
		if _, err := l.Extend(ctx, time.Now().Add(ahead)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := fmt.Sprintf("coordinator: %s\nkeys: {sf: {strategy: snowflake}}\n", coord)
	extend("in-step", doctor.HorizonLead)
	if fs := find(connect(t, cfg, doctor.ConnectOptions{}), "clock.node_ahead"); len(fs) > 0 {
		t.Fatalf("a node in step: found %+v", fs)
	}
	extend("ahead", 30*time.Second)
	fs := find(connect(t, cfg, doctor.ConnectOptions{}), "clock.node_ahead")
	if len(fs) != 1 || fs[0].Severity != doctor.Error || !strings.Contains(fs[0].Found, "holder ahead") {
		t.Fatalf("a node 27 s ahead: got %+v", fs)
	}
}

// A monotonic key led by a real etcd leader with an etcd witness beside
// it: its bound is at or above the witness's mark; written back below it,
// as a snapshot restore of the bound's etcd leaves it, store.below_witness
// names the key.
func TestConnectMonotonicBelowWitness(t *testing.T) {
	etcdAddr := testserver.Addr(t, testserver.Etcd)
	coord := "etcd://" + etcdAddr + "/" + testserver.Prefix(t)
	wURL := "etcd://" + etcdAddr + "/" + testserver.Prefix(t)
	ctx := context.Background()
	w, err := witness.Open(ctx, wURL, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdAddr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	_, base := strategies.MonotonicCoordinatorPrefix(coord)
	m, err := monotonic.NewEtcd(monotonic.EtcdConfig{Client: cli, Prefix: base + "seq/", Name: "seq",
		Witness: w, Space: monotonic.WitnessSpace("seq"), Advertise: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	testserver.Eventually(t, "a proven leader", 30*time.Second, func() bool { _, self := m.Leader(); return self })
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := m.Next(cctx, 10); err != nil {
		t.Fatal(err)
	}
	m.Close()
	cfg := fmt.Sprintf("coordinator: %s\nwitness: %s\nkeys: {seq: {strategy: monotonic}}\n", coord, wURL)
	if fs := find(connect(t, cfg, doctor.ConnectOptions{}), "store.below_witness"); len(fs) > 0 {
		t.Fatalf("bound at the mark: found %+v", fs)
	}
	if fs := find(connect(t, cfg, doctor.ConnectOptions{}), "connect.unreachable"); len(fs) > 0 {
		t.Fatalf("found %+v", fs)
	}
	if _, err := cli.Put(ctx, base+"seq/bound", "3"); err != nil {
		t.Fatal(err)
	}
	fs := find(connect(t, cfg, doctor.ConnectOptions{}), "store.below_witness")
	if len(fs) != 1 || fs[0].Key != "seq" || !strings.Contains(fs[0].Found, "has the bound 3") {
		t.Fatalf("bound written back to 3: got %+v", fs)
	}
}
