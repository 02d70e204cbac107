package sqlstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/segment/segmenttest"
	"github.com/idmint/idmint/segment/sqlstore"
	"github.com/idmint/idmint/sqldb"
	"github.com/idmint/idmint/testkit/testserver"
)

func opener(t *testing.T, url string) segmenttest.Opener { return openerB(t, url) }

func openerB(t testing.TB, url string) segmenttest.Opener {
	t.Helper()
	return func() segment.Store {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := sqlstore.Open(ctx, url)
		if err != nil {
			t.Errorf("sqlstore.Open: %v", err)
			return segmenttest.Broken(err)
		}
		return s
	}
}

func TestContractSQLite(t *testing.T) {
	segmenttest.Run(t, func(t *testing.T) segmenttest.Opener {
		return opener(t, "sqlite://"+filepath.Join(t.TempDir(), "idmint.db"))
	})
}

func TestContractPostgres(t *testing.T) {
	testserver.Addr(t, testserver.Postgres)
	segmenttest.Run(t, func(t *testing.T) segmenttest.Opener {
		return opener(t, testserver.Database(t, testserver.Postgres))
	})
}

func TestContractMariaDB(t *testing.T) {
	testserver.Addr(t, testserver.MariaDB)
	segmenttest.Run(t, func(t *testing.T) segmenttest.Opener {
		return opener(t, testserver.Database(t, testserver.MariaDB))
	})
}

// leafDDL is Leaf's published table (Meituan-Dianping/Leaf,
// scripts/leaf_alloc.sql), verbatim for MySQL/MariaDB, and the same columns
// for the other two, which have no ON UPDATE clause.
var leafDDL = map[sqldb.Dialect]string{
	sqldb.MySQL: "CREATE TABLE `leaf_alloc` (\n" +
		"  `biz_tag` varchar(128)  NOT NULL DEFAULT '',\n" +
		"  `max_id` bigint(20) NOT NULL DEFAULT '1',\n" +
		"  `step` int(11) NOT NULL,\n" +
		"  `description` varchar(256)  DEFAULT NULL,\n" +
		"  `update_time` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,\n" +
		"  PRIMARY KEY (`biz_tag`)\n" +
		") ENGINE=InnoDB",
	sqldb.Postgres: "CREATE TABLE leaf_alloc (biz_tag varchar(128) NOT NULL DEFAULT '', max_id bigint NOT NULL DEFAULT 1," +
		" step int NOT NULL, description varchar(256) DEFAULT NULL, update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP, PRIMARY KEY (biz_tag))",
	sqldb.SQLite: "CREATE TABLE leaf_alloc (biz_tag varchar(128) NOT NULL DEFAULT '', max_id bigint NOT NULL DEFAULT 1," +
		" step int NOT NULL, description varchar(256) DEFAULT NULL, update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP, PRIMARY KEY (biz_tag))",
}

// TestLeafCompatibility creates the table with Leaf's own DDL and the row
// Leaf's README inserts ('leaf-segment-test', max_id 1, step 2000), then
// runs idmint on it: the migration leaves the table alone, and max_id moves
// as Leaf's IDAllocMapper moves it (max_id = max_id + step per segment,
// segment [max_id - step, max_id), first ID 1).
func TestLeafCompatibility(t *testing.T) {
	urls := map[string]string{"sqlite": "sqlite://" + filepath.Join(t.TempDir(), "leaf.db")}
	if os.Getenv("IDMINT_TEST_POSTGRES") != "" || os.Getenv("CI") == "true" {
		urls["postgres"] = testserver.Database(t, testserver.Postgres)
	}
	if os.Getenv("IDMINT_TEST_MYSQL") != "" || os.Getenv("CI") == "true" {
		urls["mariadb"] = testserver.Database(t, testserver.MariaDB)
	}
	for name, url := range urls {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			db, err := sqldb.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.ExecContext(ctx, leafDDL[db.Dialect]); err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, "INSERT INTO leaf_alloc(biz_tag, max_id, step, description) VALUES('leaf-segment-test', 1, 2000, 'Test leaf Segment Mode Get Id')"); err != nil {
				t.Fatal(err)
			}
			if err := sqlstore.Migrate(ctx, db); err != nil { // must tolerate Leaf's table
				t.Fatal(err)
			}
			store := sqlstore.New(db)
			a, err := segment.New(store, segment.Options{Step: segment.StepPolicy{Fixed: true}})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			readMax := func() int64 {
				var m int64
				if err := db.QueryRowContext(ctx, "SELECT max_id FROM leaf_alloc WHERE biz_tag = 'leaf-segment-test'").Scan(&m); err != nil {
					t.Fatal(err)
				}
				return m
			}
			k, _ := a.Key("leaf-segment-test")
			for i := int64(1); i <= 2000; i++ {
				id, err := k.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if id != i {
					t.Fatalf("ID %d = %d, want %d (Leaf's first segment is [1, 2001))", i, id, i)
				}
			}
			// The first 2000 IDs came from [1, 2001); the next segment,
			// [2001, 4001), was loaded in the background at 10 %.
			testserver.Eventually(t, "the store to answer", 30*time.Second, func() bool { return k.Stats().NextReady })
			if m := readMax(); m != 4001 {
				t.Fatalf("max_id = %d after one segment and the prefetch, want 4001", m)
			}
			if id, _ := k.Next(ctx); id != 2001 {
				t.Fatalf("first ID of the second segment = %d, want 2001", id)
			}
			var desc string
			if err := db.QueryRowContext(ctx, "SELECT description FROM leaf_alloc WHERE biz_tag = 'leaf-segment-test'").Scan(&desc); err != nil || desc != "Test leaf Segment Mode Get Id" {
				t.Fatalf("description = %q, %v", desc, err)
			}
		})
	}
}

// TestOutage stops a private PostgreSQL, and a private MariaDB, mid-run:
// buffered IDs keep coming, past them Next fails at once with
// ErrUnavailable (well before the caller's deadline), and after the server
// restarts allocation recovers without a new Allocator.
func TestOutage(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		srv := testserver.Start(t, testserver.Postgres)
		outage(t, srv, srv.Addr()+"&connect_timeout=2")
	})
	t.Run("mariadb", func(t *testing.T) {
		srv := testserver.Start(t, testserver.MariaDB)
		outage(t, srv, srv.Addr()+"?timeout=2s&readTimeout=2s&writeTimeout=2s")
	})
}

func outage(t *testing.T, srv *testserver.Server, url string) {
	store, err := sqlstore.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	segmenttest.Outage(t, store, func() { srv.Stop(t) }, func() { srv.Restart(t) })
}

func TestOpenBadURL(t *testing.T) {
	t.Parallel()
	_, err := sqlstore.Open(context.Background(), "postgres://u:hunter2@/db")
	if !errors.Is(err, sqldb.ErrURL) {
		t.Fatalf("Open(bad url) = %v", err)
	}
}
