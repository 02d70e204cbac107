package instagram

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/idmint/idmint/sqldb"
	"github.com/idmint/idmint/testkit/testserver"
)

func openPG(t *testing.T) *sqldb.DB {
	t.Helper()
	dsn := testserver.Database(t, testserver.Postgres)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sqldb.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// dbMillis reads the database server's clock, the clock next_id() stamps.
func dbMillis(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var ms int64
	if err := db.QueryRow("SELECT FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint").Scan(&ms); err != nil {
		t.Fatal(err)
	}
	return ms
}

// parts is a decoded ID. The test decodes with the post's shifts itself
// rather than with the snowflake package's "instagram" layout, which
// cannot hold the layout's full 64 bits yet; the two must agree.
type parts struct{ ms, shard, seq int64 }

func decode(id int64) parts {
	return parts{
		ms:    id>>TimeShift + DefaultEpochMillis,
		shard: id >> ShardShift & MaxShard,
		seq:   id & (1<<SeqBits - 1),
	}
}

// TestPostgresConcurrentInserts installs the rendered function as a column
// default on a real PostgreSQL, inserts rows from many connections at once,
// and checks that every ID is unique and decodes to shard 5 and a time
// between the database clock readings taken before and after.
func TestPostgresConcurrentInserts(t *testing.T) {
	db := openPG(t)
	ctx := context.Background()
	o := Options{Schema: "shard_5", Shard: 5}
	script, err := Render(o)
	if err != nil {
		t.Fatal(err)
	}
	// Run the script exactly as printed (simple protocol, many statements),
	// as a user piping `idmint sql instagram` into psql would.
	if _, err := db.ExecContext(ctx, script); err != nil {
		t.Fatalf("running the rendered script: %v", err)
	}
	if _, err := db.ExecContext(ctx, script); err != nil {
		t.Fatalf("running the rendered script twice: %v", err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE "shard_5".photos (id bigint NOT NULL DEFAULT "shard_5"."next_id"() PRIMARY KEY, n int NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	before := dbMillis(t, db.DB)
	const workers, each = 8, 150
	ids := make([][]int64, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				var id int64
				if err := db.QueryRowContext(ctx, `INSERT INTO "shard_5".photos (n) VALUES ($1) RETURNING id`, w*each+i).Scan(&id); err != nil {
					errs[w] = err
					return
				}
				ids[w] = append(ids[w], id)
			}
		}()
	}
	wg.Wait()
	after := dbMillis(t, db.DB)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for _, list := range ids {
		for _, id := range list {
			if seen[id] {
				t.Fatalf("duplicate ID %d", id)
			}
			seen[id] = true
			if id <= 0 {
				t.Fatalf("ID %d is not positive", id)
			}
			p := decode(id)
			if p.shard != 5 {
				t.Errorf("ID %d decodes to shard %d, want 5", id, p.shard)
			}
			if ms := p.ms; ms < before || ms > after {
				t.Errorf("ID %d decodes to %d ms, outside the database clock window [%d, %d]", id, ms, before, after)
			}
		}
	}
	if len(seen) != workers*each {
		t.Fatalf("got %d IDs, want %d", len(seen), workers*each)
	}
}

// TestPostgresGenerator drives an installed function through Generator
// from several goroutines, with single and batched calls, and with two
// shards in one database.
func TestPostgresGenerator(t *testing.T) {
	db := openPG(t)
	ctx := context.Background()
	var gens []*Generator
	for _, shard := range []int{7, MaxShard} {
		o := Options{Schema: "s" + string(rune('a'+shard%26)), Shard: shard}
		if err := Install(ctx, db.DB, o); err != nil {
			t.Fatal(err)
		}
		g, err := New(db.DB, o)
		if err != nil {
			t.Fatal(err)
		}
		gens = append(gens, g)
	}
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := gens[w%2]
			buf := make([]int64, 40)
			for range 20 {
				id, err := g.Next(ctx)
				if err != nil {
					errs[w] = err
					return
				}
				n, err := g.NextN(ctx, buf)
				if err != nil || n != len(buf) {
					errs[w] = errors.Join(err, errors.New("short batch"))
					return
				}
				mu.Lock()
				for _, v := range append(buf[:n:n], id) {
					if seen[v] {
						errs[w] = errors.New("duplicate")
					}
					seen[v] = true
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 6*20*41 {
		t.Fatalf("got %d unique IDs, want %d", len(seen), 6*20*41)
	}
	shards := map[int64]int{}
	for id := range seen {
		shards[decode(id).shard]++
	}
	if shards[7] != 3*20*41 || shards[MaxShard] != 3*20*41 {
		t.Errorf("shard counts %v, want 2460 each for 7 and 8191", shards)
	}
	// NextN caps a batch at MaxBatch: a larger one could wrap the residue
	// within one millisecond.
	big := make([]int64, 3000)
	n, err := gens[0].NextN(ctx, big)
	if err != nil || n != MaxBatch {
		t.Errorf("NextN(3000) = %d, %v; want %d, nil", n, err, MaxBatch)
	}
}

// TestPostgresEpochGuard: an epoch in the database's future, or one more
// than 2^40 ms in its past, makes next_id() raise instead of issuing an ID
// that is negative or has its time bits cut.
func TestPostgresEpochGuard(t *testing.T) {
	db := openPG(t)
	ctx := context.Background()
	for _, o := range []Options{
		{Schema: "future", Shard: 1, Epoch: time.Date(9000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Schema: "unix", Shard: 1, Epoch: time.UnixMilli(1)},
	} {
		if err := Install(ctx, db.DB, o); err != nil {
			t.Fatal(err)
		}
		g, _ := New(db.DB, o)
		if id, err := g.Next(ctx); err == nil {
			t.Errorf("Next with epoch %v = %d, want an error", o.Epoch, id)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Open(ctx, "not a url", Options{Schema: "s"}); !errors.Is(err, sqldb.ErrURL) {
		t.Errorf("Open(bad url) = %v, want sqldb.ErrURL", err)
	}
	if _, err := Open(ctx, "postgres://x/y", Options{Schema: "S"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Open(bad schema) = %v, want ErrInvalid", err)
	}
	if _, err := Open(ctx, "sqlite://"+t.TempDir()+"/x.db", Options{Schema: "s"}); !errors.Is(err, ErrDialect) {
		t.Errorf("Open(sqlite) = %v, want ErrDialect", err)
	}
}

func BenchmarkPostgresNext(b *testing.B) {
	dsn := testserver.Database(b, testserver.Postgres)
	ctx := context.Background()
	g, err := Open(ctx, dsn, Options{Schema: "bench", Shard: 3})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.Next(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
