package sqldb

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/testkit/testserver"
)

// within runs f and fails the test if it has not returned after limit.
func within[T any](t *testing.T, limit time.Duration, f func() T) T {
	t.Helper()
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	select {
	case v := <-ch:
		return v
	case <-time.After(limit):
		t.Fatalf("still waiting after %v: the call hangs on a server that never answers", limit)
		panic("unreachable")
	}
}

// TestOpenSilentServer: Open on a server that accepts TCP and never
// answers returns a clear error within DefaultTimeout (plus slack), with a
// context that sets no deadline, for every network dialect.
func TestOpenSilentServer(t *testing.T) {
	t.Parallel()
	addr := testserver.Silent(t)
	for name, url := range map[string]string{
		"postgres":        "postgres://idmint:secret@" + addr + "/idmint?sslmode=disable",
		"postgres-prefer": "postgres://idmint:secret@" + addr + "/idmint", // the SSL request waits too
		"mysql-url":       "mysql://idmint:secret@" + addr + "/idmint",
		"mysql-dsn":       "idmint:secret@tcp(" + addr + ")/idmint",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			err := within(t, 3*DefaultTimeout, func() error {
				db, err := Open(context.Background(), url)
				if err == nil {
					db.Close()
				}
				return err
			})
			took := time.Since(start)
			if err == nil {
				t.Fatal("Open succeeded against a server that never answers")
			}
			msg := err.Error()
			if !strings.Contains(msg, "no answer within") || !strings.Contains(msg, addr) {
				t.Fatalf("error does not say the server did not answer, naming it: %v", err)
			}
			if strings.Contains(msg, "secret") {
				t.Fatalf("error leaks the password: %v", err)
			}
			if took < DefaultTimeout/2 {
				t.Fatalf("gave up after %v, before the %v deadline", took, DefaultTimeout)
			}
			t.Logf("%v after %v", err, took.Round(time.Millisecond))
		})
	}
}

// TestBound: a call through Bound ends at DB.Timeout when the caller's
// context has no deadline, and keeps an earlier deadline of the caller's.
func TestBound(t *testing.T) {
	t.Parallel()
	db := &DB{Timeout: time.Hour}
	ctx, cancel := db.Bound(context.Background())
	dl, ok := ctx.Deadline()
	cancel()
	if !ok || time.Until(dl) < 59*time.Minute {
		t.Fatalf("Bound(Background) deadline = %v, %v; want about an hour from now", dl, ok)
	}
	parent, pcancel := context.WithTimeout(context.Background(), time.Second)
	defer pcancel()
	ctx, cancel = db.Bound(parent)
	defer cancel()
	if dl2, _ := ctx.Deadline(); time.Until(dl2) > time.Second {
		t.Fatalf("Bound moved the caller's 1 s deadline to %v", dl2)
	}
	zero := &DB{}
	ctx, cancel = zero.Bound(context.Background())
	defer cancel()
	if _, ok := ctx.Deadline(); ok {
		t.Fatal("Bound with Timeout 0 set a deadline")
	}
}
