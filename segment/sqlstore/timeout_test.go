package sqlstore_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/segment/sqlstore"
	"github.com/idmint/idmint/segment/stores"
	"github.com/idmint/idmint/sqldb"
	"github.com/idmint/idmint/testkit/testserver"
)

// within fails the test when f has not returned after limit.
func within(t *testing.T, limit time.Duration, f func() error) error {
	t.Helper()
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	select {
	case err := <-ch:
		return err
	case <-time.After(limit):
		t.Fatalf("still waiting after %v: the call hangs on a server that never answers", limit)
		return nil
	}
}

// TestOpenSilentServer: opening a segment store (sqlstore.Open, and
// stores.Open/OpenAllocator as the server and `idmint gen segment` do) on a
// server that accepts TCP and never answers fails with a clear error
// within sqldb.DefaultTimeout, for PostgreSQL and MySQL URLs.
func TestOpenSilentServer(t *testing.T) {
	t.Parallel()
	addr := testserver.Silent(t)
	for name, url := range map[string]string{
		"postgres": "postgres://idmint:secret@" + addr + "/idmint?sslmode=disable",
		"mysql":    "mysql://idmint:secret@" + addr + "/idmint",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for what, open := range map[string]func() error{
				"sqlstore.Open": func() error {
					s, err := sqlstore.Open(context.Background(), url)
					if err == nil {
						s.Close()
					}
					return err
				},
				"stores.OpenAllocator": func() error {
					a, err := stores.OpenAllocator(context.Background(), url, segment.Options{})
					if err == nil {
						a.Close()
					}
					return err
				},
			} {
				err := within(t, 3*sqldb.DefaultTimeout, open)
				if err == nil || !strings.Contains(err.Error(), "no answer within") || strings.Contains(err.Error(), "secret") {
					t.Fatalf("%s: err = %v; want a clear error without the password", what, err)
				}
			}
		})
	}
}

// TestCallsBounded: every Store call on a database that stops answering
// ends at the DB's Timeout even when the caller's context has no deadline.
// The pool here dials without connect_timeout, so only the per-call bound
// can end the wait.
func TestCallsBounded(t *testing.T) {
	t.Parallel()
	addr := testserver.Silent(t)
	for name, dsn := range map[string]struct{ driver, dsn string }{
		"postgres": {"pgx", "postgres://idmint@" + addr + "/idmint?sslmode=disable"},
		"mysql":    {"mysql", "idmint@tcp(" + addr + ")/idmint"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw, err := sql.Open(dsn.driver, dsn.dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			d := sqldb.Postgres
			if dsn.driver == "mysql" {
				d = sqldb.MySQL
			}
			s := sqlstore.New(&sqldb.DB{DB: raw, Dialect: d, URL: name, Timeout: 300 * time.Millisecond})
			ctx := context.Background()
			calls := map[string]func() error{
				"Allocate": func() error { _, err := s.Allocate(ctx, "order", 0); return err },
				"Create":   func() error { return s.Create(ctx, segment.KeyInfo{Key: "order", Step: 10}) },
				"Get":      func() error { _, err := s.Get(ctx, "order"); return err },
				"List":     func() error { _, err := s.List(ctx); return err },
				"SetStep":  func() error { return s.SetStep(ctx, "order", 10) },
				"Delete":   func() error { return s.Delete(ctx, "order") },
			}
			for call, f := range calls {
				start := time.Now()
				if err := within(t, 10*time.Second, f); err == nil {
					t.Fatalf("%s succeeded on a server that never answers", call)
				}
				if took := time.Since(start); took > 5*time.Second {
					t.Errorf("%s took %v; want about the 300ms Timeout", call, took)
				}
			}
		})
	}
}
