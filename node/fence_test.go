package node

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/snowflake"
	"github.com/idmint/idmint/sqldb"
	"github.com/idmint/idmint/worker"
)

// TestNextConsultsTheFence (design.md U4): a node whose lease can no longer
// be proven valid — its coordinator stopped answering, so ValidUntil stood
// still while the monotonic clock passed it — refuses to issue with
// snowflake.ErrFenced, though its recorded horizon would still cover the
// IDs.
func TestNextConsultsTheFence(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clk := clock.NewFake(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	// A horizon recorded a minute ahead: only the fence stands between the
	// expired lease and an issued ID.
	n, db := sqlNode(ctx, t, clk, snowflake.Settings{HorizonLead: time.Minute})
	defer n.Close()
	if _, err := n.Next(ctx); err != nil {
		t.Fatalf("Next under a valid lease: %v", err)
	}
	b := n.cur.Load()
	if b == nil {
		t.Fatal("no binding after a successful Next")
	}
	validUntil := b.lease.ValidUntil()
	if validUntil <= clk.Mono() {
		t.Fatalf("fresh lease valid until %v, clock at %v", validUntil, clk.Mono())
	}
	// The coordinator goes away: no renewal can move ValidUntil any more.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(validUntil - clk.Mono())
	if got := b.lease.ValidUntil(); got > validUntil {
		t.Fatalf("ValidUntil moved from %v to %v with the coordinator closed", validUntil, got)
	}
	if n.cur.Load() != b {
		t.Fatal("the node dropped its lease instead of being fenced; the test needs the lease held but unproven")
	}
	id, err := n.Next(ctx)
	if !errors.Is(err, snowflake.ErrFenced) {
		t.Fatalf("Next with the lease unproven since %v (clock %v) = %d, %v; want snowflake.ErrFenced", validUntil, clk.Mono(), id, err)
	}
}

// sqlNode is a Twitter-layout node (datacenter 1) leasing its worker ID
// from a WORKER_NODE table in a new SQLite file with a 10 s TTL, judged on
// clk; closing the returned db stops every keepalive.
func sqlNode(ctx context.Context, t *testing.T, clk clock.Clock, gen snowflake.Settings) (*Node, *sqldb.DB) {
	t.Helper()
	db, err := sqldb.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "workers.db"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := worker.NewSQL(ctx, db, worker.WithClock(clk), worker.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	layout, _ := snowflake.Lookup("twitter")
	n, err := New(ctx, Config{Layout: layout, Assigner: a, Clock: clk, WorkerField: "worker", Node: map[string]int64{"datacenter": 1}, Generator: gen})
	if err != nil {
		t.Fatal(err)
	}
	return n, db
}
