package rediscounter

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idmint/idmint/sqldb"
	"github.com/idmint/idmint/testkit/testserver"
	"github.com/redis/go-redis/v9"
)

func sqliteMarks(t testing.TB) *SQLMarks {
	t.Helper()
	ctx := context.Background()
	db, err := sqldb.Open(ctx, "sqlite://"+t.TempDir()+"/marks.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	m, err := NewSQLMarks(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// flaky wraps a MarkStore; while down, Raise fails.
type flaky struct {
	MarkStore
	down   atomic.Bool
	raises atomic.Int64
}

func (f *flaky) Raise(ctx context.Context, name string, target int64) (int64, error) {
	if f.down.Load() {
		return 0, errors.New("flaky: store down")
	}
	f.raises.Add(1)
	return f.MarkStore.Raise(ctx, name, target)
}

func openCounter(t testing.TB, cfg Config) *Counter {
	t.Helper()
	c, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ids is a concurrency-safe set of issued values that fails on a repeat.
type ids struct {
	mu   sync.Mutex
	seen map[int64]bool
	max  int64
}

func (s *ids) add(t testing.TB, vs ...int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[int64]bool{}
	}
	for _, v := range vs {
		if s.seen[v] {
			t.Errorf("value %d issued twice", v)
		}
		s.seen[v] = true
		s.max = max(s.max, v)
	}
}

func TestConfigInvalid(t *testing.T) {
	m := sqliteMarks(t)
	for _, tc := range []struct {
		name, field string
		cfg         Config
	}{
		{"no key", "key", Config{Redis: "127.0.0.1:1", Marks: m}},
		{"no marks", "marks", Config{Redis: "127.0.0.1:1", Key: "k"}},
		{"no redis", "redis", Config{Key: "k", Marks: m}},
		{"bad url", "redis", Config{Redis: "redis://h:1/notadb", Key: "k", Marks: m}},
		{"bad scheme", "redis", Config{Redis: "http://h:1", Key: "k", Marks: m}},
		{"negative block", "block", Config{Redis: "127.0.0.1:1", Key: "k", Marks: m, Block: -5}},
		{"huge block", "block", Config{Redis: "127.0.0.1:1", Key: "k", Marks: m, Block: 1 << 41}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(context.Background(), tc.cfg)
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("Open = %v, want ErrConfig", err)
			}
			if want := "rediscounter: invalid config: " + tc.field; len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
				t.Errorf("error %q does not name field %q first", err, tc.field)
			}
		})
	}
}

// TestConcurrentUnique: goroutines mixing Next and NextN get unique,
// per-goroutine strictly increasing values, none above the persisted mark.
func TestConcurrentUnique(t *testing.T) {
	addr := testserver.Addr(t, testserver.Redis)
	marks := sqliteMarks(t)
	key := testserver.Prefix(t)
	c := openCounter(t, Config{Redis: addr, Key: key, Marks: marks, Block: 100})
	c2 := openCounter(t, Config{Redis: addr, Key: key, Marks: marks, Block: 100}) // a second process
	var set ids
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cc := []*Counter{c, c2}[w%2]
			ctx := context.Background()
			last := int64(0)
			buf := make([]int64, 7)
			for range 100 {
				v, err := cc.Next(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				n, err := cc.NextN(ctx, buf)
				if err != nil || n != 7 {
					t.Error(n, err)
					return
				}
				if v <= last || buf[0] <= v {
					t.Errorf("not increasing: %d after %d, then batch %v", v, last, buf)
				}
				for i := 1; i < n; i++ {
					if buf[i] != buf[i-1]+1 {
						t.Errorf("batch not consecutive: %v", buf)
					}
				}
				last = max(v, buf[n-1])
				set.add(t, v)
				set.add(t, buf[:n]...)
			}
		}()
	}
	wg.Wait()
	if len(set.seen) != 8*100*8 {
		t.Fatalf("%d values, want %d", len(set.seen), 8*100*8)
	}
	m, err := marks.Mark(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if set.max > m {
		t.Fatalf("issued %d above the persisted mark %d", set.max, m)
	}
	if set.max > c.Ceiling() && set.max > c2.Ceiling() {
		t.Fatalf("issued %d above both ceilings", set.max)
	}
}

// TestKeyLoss: the key is deleted under a running Counter (no restart, same
// run_id). The floor check notices and moves the counter past the mark.
func TestKeyLoss(t *testing.T) {
	addr := testserver.Addr(t, testserver.Redis)
	ctx := context.Background()
	key := testserver.Prefix(t)
	c := openCounter(t, Config{Redis: addr, Key: key, Marks: sqliteMarks(t), Block: 50})
	var set ids
	for range 120 {
		v, err := c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		set.add(t, v)
	}
	raw := redis.NewClient(&redis.Options{Addr: addr})
	defer raw.Close()
	if err := raw.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if n := c.WentBack(); n != 0 {
		t.Fatalf("WentBack %d before the key was lost", n)
	}
	for range 120 {
		v, err := c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		set.add(t, v)
	}
	if n := c.WentBack(); n != 1 {
		t.Errorf("WentBack %d after the key was deleted once, want 1", n)
	}
	if err := raw.Set(ctx, key, "not a number", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Next(ctx); err == nil {
		t.Error("Next on a non-integer key succeeded")
	}
}

// TestMarksDown: when the mark store cannot be raised, the Counter issues
// up to the persisted ceiling and then fails; it never passes the mark.
func TestMarksDown(t *testing.T) {
	addr := testserver.Addr(t, testserver.Redis)
	ctx := context.Background()
	key := testserver.Prefix(t)
	store := &flaky{MarkStore: sqliteMarks(t)}
	c := openCounter(t, Config{Redis: addr, Key: key, Marks: store, Block: 20})
	c.wg.Wait() // let any background raise finish
	store.down.Store(true)
	var set ids
	var err error
	for range 100 {
		var v int64
		if v, err = c.Next(ctx); err != nil {
			break
		}
		set.add(t, v)
	}
	if err == nil {
		t.Fatal("Next kept issuing with the mark store down")
	}
	m, _ := store.Mark(ctx, key)
	if set.max > m || set.max == 0 {
		t.Fatalf("issued up to %d with persisted mark %d", set.max, m)
	}
	store.down.Store(false)
	v, err := c.Next(ctx)
	if err != nil || v <= set.max {
		t.Fatalf("after the store came back: %d, %v", v, err)
	}
}

// TestKill9AfterSnapshot is the hole plain INCR has: a private Redis takes
// an RDB snapshot, issues more, is killed with SIGKILL and restarts from
// the snapshot with its counter rolled back. Workers run throughout, and a
// new process joins after the restart: no value repeats.
func TestKill9AfterSnapshot(t *testing.T) {
	srv := testserver.Start(t, testserver.Redis)
	addr := srv.Addr()
	ctx := context.Background()
	marks := sqliteMarks(t)
	const key = "idmint:order"
	c := openCounter(t, Config{Redis: addr, Key: key, Marks: marks, Block: 1000})
	var set ids
	take := func(cc *Counter, n int) {
		for range n {
			v, err := cc.Next(ctx)
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			set.add(t, v)
		}
	}
	take(c, 300)
	raw := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer raw.Close()
	if err := raw.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	snap, _ := raw.Get(ctx, key).Int64()

	// Workers keep issuing across the crash; errors while Redis is down
	// are expected, repeats are not.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ok, failed atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				v, err := c.Next(ctx)
				if err != nil {
					failed.Add(1)
					continue
				}
				ok.Add(1)
				set.add(t, v)
			}
		}()
	}
	for ok.Load() < 500 {
		take(c, 1)
	}
	set.mu.Lock()
	issued := set.max // a lower bound of what was issued before the kill
	set.mu.Unlock()
	srv.Kill(t)
	srv.Restart(t)
	raw2 := redis.NewClient(&redis.Options{Addr: addr})
	defer raw2.Close()
	// The restarted Redis loaded the snapshot: its counter went back to
	// snap, below values already issued, which plain INCR would repeat.
	// (Workers may already have recovered it past the mark.)
	after, err := raw2.Get(ctx, key).Int64()
	t.Logf("counter right after restart: %d (snapshot %d, issued up to %d before the kill), err %v", after, snap, issued, err)
	// The workers, which retry, prove c recovered: its connection pool
	// may answer with the last dial error for a while after Redis is
	// back (go-redis dials again in the background), so a call from here
	// could fail without anything being wrong.
	before := ok.Load()
	testserver.Eventually(t, "500 IDs from the workers after the restart", 30*time.Second, func() bool { return ok.Load() >= before+500 })
	c2 := openCounter(t, Config{Redis: addr, Key: key, Marks: marks, Block: 1000}) // a new process
	take(c2, 300)
	close(stop)
	wg.Wait()
	take(c, 100)
	if snap >= issued {
		t.Fatalf("test did not exercise the hole: snapshot %d, issued %d before the kill", snap, issued)
	}
	m, _ := marks.Mark(ctx, key)
	if set.max > m {
		t.Fatalf("issued %d above the persisted mark %d", set.max, m)
	}
	t.Logf("%d values, snapshot at %d, %d issued before the kill, %d failed requests while down, mark %d",
		len(set.seen), snap, issued, failed.Load(), m)
}

// TestMarksDialects runs the mark store on the real PostgreSQL and MariaDB:
// raising never lowers, concurrent raises keep the largest.
func TestMarksDialects(t *testing.T) {
	for _, k := range []testserver.Kind{testserver.Postgres, testserver.MariaDB} {
		t.Run(string(k), func(t *testing.T) {
			ctx := context.Background()
			db, err := sqldb.Open(ctx, testserver.Database(t, k))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			m, err := NewSQLMarks(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			if v, err := m.Mark(ctx, "k"); err != nil || v != 0 {
				t.Fatalf("Mark of a new name = %d, %v", v, err)
			}
			var wg sync.WaitGroup
			for i := range 10 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := m.Raise(ctx, "k", int64(100*(i+1))); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			if v, err := m.Raise(ctx, "k", 5); err != nil || v != 1000 {
				t.Fatalf("Raise(5) after raises up to 1000 = %d, %v", v, err)
			}
		})
	}
}

func BenchmarkNext(b *testing.B) {
	addr := testserver.Addr(b, testserver.Redis)
	c := openCounter(b, Config{Redis: addr, Key: testserver.Prefix(b), Marks: sqliteMarks(b), Block: 1 << 30})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Next(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkNextN100(b *testing.B) {
	addr := testserver.Addr(b, testserver.Redis)
	c := openCounter(b, Config{Redis: addr, Key: testserver.Prefix(b), Marks: sqliteMarks(b), Block: 1 << 30})
	ctx := context.Background()
	buf := make([]int64, 100)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.NextN(ctx, buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(buf)), "ns/id")
}
