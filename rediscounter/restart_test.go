package rediscounter

import (
	"context"
	"strings"
	"testing"

	"github.com/idmint/idmint/sqldb"
	"github.com/idmint/idmint/testkit/testserver"
	"github.com/redis/go-redis/v9"
)

// TestRestartRecoversEveryProcess is rule 2 for a process whose floor
// cannot tell that Redis went back: process B opens and takes a few
// values, Redis takes a snapshot, process A opens and issues values
// above B's ceiling (raising the mark), and Redis is killed and restarts from the snapshot, below
// A's values but not below anything B has seen. Only the new run_id tells
// B: its first connection to the new run moves the counter past the
// persisted mark, and B repeats none of A's values.
func TestRestartRecoversEveryProcess(t *testing.T) {
	srv := testserver.Start(t, testserver.Redis)
	addr := srv.Addr()
	ctx := context.Background()
	marks := sqliteMarks(t)
	const key = "idmint:restart"
	cfg := Config{Redis: addr, Key: key, Marks: marks, Block: 1000}
	b := openCounter(t, cfg)
	var set ids
	for range 5 {
		v, err := b.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		set.add(t, v)
	}
	raw := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer raw.Close()
	if err := raw.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	a := openCounter(t, cfg)
	buf := make([]int64, 500)
	for range 3 { // past B's ceiling: A raised the mark
		n, err := a.NextN(ctx, buf)
		if err != nil {
			t.Fatal(err)
		}
		set.add(t, buf[:n]...)
	}
	set.mu.Lock()
	fromA := set.max
	set.mu.Unlock()
	srv.Kill(t)
	srv.Restart(t)
	for range 4 { // past B's ceiling: a raise, then the values A issued
		n, err := b.NextN(ctx, buf)
		if err != nil {
			t.Fatal(err)
		}
		set.add(t, buf[:n]...)
		if buf[0] <= fromA {
			t.Fatalf("process B issued %d after the restart; A had issued up to %d", buf[0], fromA)
		}
	}
}

// TestMarksRaiseReadBack: a raise the database did not keep (here a
// trigger that drops updates of the marks table, as a misconfigured
// replica or a lost write would) is an error, not a higher mark: the
// mark is read back after the upsert.
func TestMarksRaiseReadBack(t *testing.T) {
	ctx := context.Background()
	db, err := sqldb.Open(ctx, "sqlite://"+t.TempDir()+"/marks.db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m, err := NewSQLMarks(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := m.Raise(ctx, "k", 10); err != nil || v != 10 {
		t.Fatalf("Raise(10) = %d, %v", v, err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TRIGGER drop_raises BEFORE UPDATE ON idmint_redis_marks BEGIN SELECT RAISE(IGNORE); END"); err != nil {
		t.Fatal(err)
	}
	v, err := m.Raise(ctx, "k", 20)
	if err == nil || !strings.Contains(err.Error(), `mark "k" reads 10 after raising it to 20`) {
		t.Fatalf("Raise(20) with the update dropped = %d, %v; want an error that the mark reads 10", v, err)
	}
}
