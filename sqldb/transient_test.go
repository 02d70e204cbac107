package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestIsTransientClassifies(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock; try restarting transaction"}, true},
		{&mysql.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded"}, true},
		{fmt.Errorf("ticket: %w", &mysql.MySQLError{Number: 1213}), true},
		{&mysql.MySQLError{Number: 1062, Message: "Duplicate entry"}, false},
		{&pgconn.PgError{Code: "40001"}, true},
		{&pgconn.PgError{Code: "40P01"}, true},
		{fmt.Errorf("worker: %w", &pgconn.PgError{Code: "40P01"}), true},
		{&pgconn.PgError{Code: "23505"}, false},
		// Text alone proves nothing: only the server's code counts.
		{errors.New("deadlock"), false},
		{nil, false},
	} {
		if got := IsTransient(c.err); got != c.want {
			t.Errorf("IsTransient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestRetryTransient(t *testing.T) {
	deadlock := &mysql.MySQLError{Number: 1213}
	run := func(ctx context.Context, fail int, err error) (int, error) {
		calls := 0
		got := RetryTransient(ctx, func() error {
			calls++
			if calls <= fail {
				return err
			}
			return nil
		})
		return calls, got
	}
	if calls, err := run(context.Background(), 3, deadlock); err != nil || calls != 4 {
		t.Errorf("three deadlocks then success: %d calls, %v; want 4 calls, nil", calls, err)
	}
	if calls, err := run(context.Background(), 100, deadlock); !errors.Is(err, deadlock) || calls != 8 {
		t.Errorf("deadlock every time: %d calls, %v; want 8 calls and the deadlock", calls, err)
	}
	dup := &mysql.MySQLError{Number: 1062}
	if calls, err := run(context.Background(), 100, dup); !errors.Is(err, dup) || calls != 1 {
		t.Errorf("duplicate key: %d calls, %v; want 1 call, not retried", calls, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if calls, err := run(ctx, 100, deadlock); !errors.Is(err, deadlock) || calls != 1 {
		t.Errorf("cancelled context: %d calls, %v; want 1 call and the deadlock", calls, err)
	}
}

// TestIsTransientRealDeadlock makes each server detect a real deadlock
// between two transactions and checks that IsTransient recognises the
// error it really sends (the code, not a message that may change).
func TestIsTransientRealDeadlock(t *testing.T) {
	for name, u := range databases(t) {
		if name == "sqlite" {
			continue // one writer at a time: SQLite cannot deadlock
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			db, err := Open(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for _, q := range []string{
				"DROP TABLE IF EXISTS deadlocks",
				"CREATE TABLE deadlocks (id INT PRIMARY KEY, n INT NOT NULL)",
				"INSERT INTO deadlocks (id, n) VALUES (1, 0), (2, 0)",
			} {
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			update := db.Dialect.Rebind("UPDATE deadlocks SET n = n + 1 WHERE id = ?")
			a, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Rollback()
			b, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Rollback()
			if _, err := a.ExecContext(ctx, update, 1); err != nil {
				t.Fatal(err)
			}
			if _, err := b.ExecContext(ctx, update, 2); err != nil {
				t.Fatal(err)
			}
			// a waits for b's row while b waits for a's: the server
			// refuses one of the two.
			errs := make(chan error, 2)
			for _, c := range []struct {
				tx  *sql.Tx
				row int
			}{{a, 2}, {b, 1}} {
				go func() {
					_, err := c.tx.ExecContext(ctx, update, c.row)
					if err != nil {
						c.tx.Rollback() // releases the other
					}
					errs <- err
				}()
			}
			var refused []error
			for range 2 {
				if err := <-errs; err != nil {
					refused = append(refused, err)
				}
			}
			if len(refused) != 1 {
				t.Fatalf("crossed updates: %d refused (%v); want exactly one", len(refused), refused)
			}
			if !IsTransient(refused[0]) {
				t.Fatalf("IsTransient(%v) = false for the server's deadlock", refused[0])
			}
		})
	}
}
