package rediscounter

import (
	"context"
	"testing"
	"time"

	"github.com/idmint/idmint/sqldb"
	"github.com/idmint/idmint/testkit/testserver"
)

// TestMarksBounded: a mark store whose database stops answering (here: the
// marks table locked by another session on the real PostgreSQL) returns an
// error once the DB's Timeout passes, even when the caller's context never
// ends. Without the bound, Mark and Raise wait for the lock forever.
func TestMarksBounded(t *testing.T) {
	ctx := context.Background()
	dsn := testserver.Database(t, testserver.Postgres)
	db, err := sqldb.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m, err := NewSQLMarks(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Raise(ctx, "k", 10); err != nil {
		t.Fatal(err)
	}

	locker, err := sqldb.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close()
	tx, err := locker.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "LOCK TABLE idmint_redis_marks IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}

	db.Timeout = 300 * time.Millisecond
	for name, call := range map[string]func() error{
		"Mark":  func() error { _, err := m.Mark(ctx, "k"); return err },
		"Raise": func() error { _, err := m.Raise(ctx, "k", 20); return err },
	} {
		done := make(chan error, 1)
		go func() { done <- call() }()
		select {
		case err := <-done:
			if err == nil {
				t.Fatalf("%s on a locked table succeeded", name)
			}
			t.Logf("%s: %v", name, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s still waiting 30 s after the table was locked; its Timeout is %v", name, db.Timeout)
		}
	}
}
