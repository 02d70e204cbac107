package redisstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/segment/redisstore"
	"github.com/idmint/idmint/segment/segmenttest"
	"github.com/idmint/idmint/testkit/testserver"
)

func opener(t *testing.T, url string) segmenttest.Opener {
	return func() segment.Store {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := redisstore.Open(ctx, url)
		if err != nil {
			t.Errorf("redisstore.Open: %v", err)
			return segmenttest.Broken(err)
		}
		return s
	}
}

func TestContract(t *testing.T) {
	addr := testserver.Addr(t, testserver.Redis)
	segmenttest.Run(t, func(t *testing.T) segmenttest.Opener {
		// The shared test server runs without persistence: allowed here,
		// refused by default (TestDurabilityCheck).
		return opener(t, "redis://"+addr+"/0?allow_volatile=true&prefix="+testserver.Prefix(t))
	})
}

func TestDurabilityCheck(t *testing.T) {
	addr := testserver.Addr(t, testserver.Redis)
	ctx := context.Background()
	_, err := redisstore.Open(ctx, "redis://"+addr+"/0?prefix="+testserver.Prefix(t))
	if !errors.Is(err, redisstore.ErrVolatile) {
		t.Fatalf("Open on a server without appendfsync always = %v, want ErrVolatile", err)
	}
	t.Log(err)
}

func TestBadURL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, u := range []string{
		"redis://h:1/0?prefix=a%20b",
		"redis://h:1/0?allow_volatile=maybe",
		"redis://:hunter2@h:1/0?nonsense=1",
		"redis://h:1/notanumber",
		"http://h:1",
	} {
		_, err := redisstore.Open(ctx, u)
		if !errors.Is(err, redisstore.ErrURL) {
			t.Errorf("Open(%q) = %v, want ErrURL", u, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error leaks the password: %v", err)
		}
	}
}

// password_file= reads the password from a file, as in the SQL stores'
// URLs (go-redis refused it as an unknown option); a missing file or a
// password given twice is refused before any connection.
func TestPasswordFileURL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"redis://:x@127.0.0.1:1/0?password_file=" + pw, "redis://127.0.0.1:1/0?password_file=" + pw + ".missing"} {
		if _, err := redisstore.Open(ctx, u); !errors.Is(err, redisstore.ErrURL) || !strings.Contains(err.Error(), "password_file") {
			t.Errorf("Open(%q) = %v, want ErrURL naming password_file", u, err)
		}
	}
	// Port 1 refuses: the URL was accepted and the connection tried.
	_, err := redisstore.Open(ctx, "redis://127.0.0.1:1/0?password_file="+pw)
	if err == nil || errors.Is(err, redisstore.ErrURL) || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("Open with password_file = %v, want a connection error without the password", err)
	}
}

// TestCrashAndOutage runs a private Redis with appendonly yes +
// appendfsync always: the durability check passes; the server is stopped
// mid-run (buffers serve, then a prompt ErrUnavailable), restarted
// (allocation recovers in the same Allocator), then killed with SIGKILL
// and restarted: a new Allocator repeats nothing, because every
// acknowledged HINCRBY was in the fsynced AOF.
func TestCrashAndOutage(t *testing.T) {
	srv := testserver.Start(t, testserver.Redis, "--appendonly", "yes", "--appendfsync", "always")
	ctx := context.Background()
	url := "redis://" + srv.Addr() + "/0?dial_timeout=1s&max_retries=0"
	store, err := redisstore.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	seen := segmenttest.Outage(t, store, func() { srv.Stop(t) }, func() { srv.Restart(t) })
	take := func(a *segment.Allocator) error {
		id, err := a.Next(ctx, "o")
		if err == nil {
			if seen[id] {
				t.Fatalf("ID %d repeated", id)
			}
			seen[id] = true
		}
		return err
	}
	// Crash: SIGKILL, restart from the AOF, a new allocator.
	srv.Kill(t)
	srv.Restart(t)
	store2, err := redisstore.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer store2.Close()
	b, err := segment.New(store2, segment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for range 500 {
		if err := take(b); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPausedServer freezes Redis with SIGSTOP (connections stay open,
// nothing answers): a caller past the buffers gets its deadline, not a hang,
// and allocation recovers after SIGCONT.
func TestPausedServer(t *testing.T) {
	srv := testserver.Start(t, testserver.Redis)
	ctx := context.Background()
	store, err := redisstore.Open(ctx, "redis://"+srv.Addr()+"/0?allow_volatile=true")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Create(ctx, segment.KeyInfo{Key: "p", Step: 10}); err != nil {
		t.Fatal(err)
	}
	a, err := segment.New(store, segment.Options{Step: segment.StepPolicy{Fixed: true}, LoadTimeout: time.Second, RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for range 2 { // the second ID passes the 10 % mark: the next segment loads
		if _, err := a.Next(ctx, "p"); err != nil {
			t.Fatal(err)
		}
	}
	testserver.Eventually(t, "the store to answer", 30*time.Second, func() bool { return a.Stats()[0].NextReady })
	srv.Pause(t)
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume(t)
		}
	}()
	var last int64
	for range 18 { // the rest of both buffers
		id, err := a.Next(ctx, "p")
		if err != nil {
			t.Fatalf("buffered ID with Redis paused: %v", err)
		}
		last = id
	}
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	t0 := time.Now()
	_, err = a.Next(dctx, "p")
	cancel()
	if err == nil || time.Since(t0) > 2*time.Second {
		t.Fatalf("Next with Redis paused = %v after %v; want an error by the 300 ms deadline", err, time.Since(t0))
	}
	t.Logf("with Redis paused: %v after %v", err, time.Since(t0).Round(time.Millisecond))
	srv.Resume(t)
	resumed = true
	testserver.Eventually(t, "the store to answer", 30*time.Second, func() bool {
		id, err := a.Next(ctx, "p")
		if err == nil && id <= last {
			t.Fatalf("ID %d after %d", id, last)
		}
		return err == nil
	})
}
