package worker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/idmint/idmint/sqldb"
	"github.com/idmint/idmint/testkit/testserver"
)

// uid-generator's own DDL for its worker table, baidu/uid-generator,
// src/main/scripts/WORKER_NODE.sql (MySQL), verbatim for MariaDB. The
// PostgreSQL and SQLite versions are adaptations, column for column:
// AUTO_INCREMENT becomes BIGSERIAL (a BIGINT whose default draws from its
// own sequence) and SQLite's INTEGER PRIMARY KEY AUTOINCREMENT (SQLite
// auto-increments only that type), and the MySQL-only COMMENT and ENGINE
// clauses are dropped.
var uidGeneratorDDL = map[sqldb.Dialect][]string{
	sqldb.MySQL: {
		"DROP TABLE IF EXISTS WORKER_NODE",
		`CREATE TABLE WORKER_NODE
(
ID BIGINT NOT NULL AUTO_INCREMENT COMMENT 'auto increment id',
HOST_NAME VARCHAR(64) NOT NULL COMMENT 'host name',
PORT VARCHAR(64) NOT NULL COMMENT 'port',
TYPE INT NOT NULL COMMENT 'node type: CONTAINER(1), ACTUAL(2), FAKE(3)',
LAUNCH_DATE DATE NOT NULL COMMENT 'launch date',
MODIFIED TIMESTAMP NOT NULL COMMENT 'modified time',
CREATED TIMESTAMP NOT NULL COMMENT 'created time',
PRIMARY KEY(ID)
)
 COMMENT='DB WorkerID Assigner for UID Generator',ENGINE = INNODB`,
	},
	sqldb.Postgres: {
		"DROP TABLE IF EXISTS WORKER_NODE",
		`CREATE TABLE WORKER_NODE
(
ID BIGSERIAL NOT NULL,
HOST_NAME VARCHAR(64) NOT NULL,
PORT VARCHAR(64) NOT NULL,
TYPE INT NOT NULL,
LAUNCH_DATE DATE NOT NULL,
MODIFIED TIMESTAMP NOT NULL,
CREATED TIMESTAMP NOT NULL,
PRIMARY KEY(ID)
)`,
	},
	sqldb.SQLite: {
		"DROP TABLE IF EXISTS WORKER_NODE",
		`CREATE TABLE WORKER_NODE
(
ID INTEGER PRIMARY KEY AUTOINCREMENT,
HOST_NAME VARCHAR(64) NOT NULL,
PORT VARCHAR(64) NOT NULL,
TYPE INT NOT NULL,
LAUNCH_DATE DATE NOT NULL,
MODIFIED TIMESTAMP NOT NULL,
CREATED TIMESTAMP NOT NULL
)`,
	},
}

// uidGeneratorInsert is what uid-generator runs on every start
// (src/main/resources/META-INF/mybatis/mapper/WORKER_NODE.xml, addWorkerNode:
// its own six columns, useGeneratedKeys for the ID), and returns the ID it
// was given. SQLite has no NOW(); PostgreSQL's JDBC driver returns
// generated keys with RETURNING.
func uidGeneratorInsert(t *testing.T, db *sqldb.DB, host string) int64 {
	t.Helper()
	ctx := context.Background()
	now := "NOW()"
	if db.Dialect == sqldb.SQLite {
		now = "CURRENT_TIMESTAMP"
	}
	q := db.Dialect.Rebind("INSERT INTO WORKER_NODE (HOST_NAME, PORT, TYPE, LAUNCH_DATE, MODIFIED, CREATED) VALUES (?, ?, ?, ?, " + now + ", " + now + ")")
	args := []any{host, "8080", 2, time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)}
	if db.Dialect == sqldb.Postgres {
		var id int64
		if err := db.QueryRowContext(ctx, q+" RETURNING ID", args...).Scan(&id); err != nil {
			t.Fatalf("uid-generator's INSERT: %v", err)
		}
		return id
	}
	res, err := db.ExecContext(ctx, q, args...)
	if err != nil {
		t.Fatalf("uid-generator's INSERT: %v", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestUIDGeneratorTable points idmint at a database where uid-generator
// already created and used its WORKER_NODE table. idmint must adopt the
// table (today: "no such column: GENERATION"), never take a worker ID a
// uid-generator row holds, and leave the table usable by uid-generator,
// whose next INSERT must get an ID idmint does not hand out.
func TestUIDGeneratorTable(t *testing.T) {
	t.Parallel()
	dbs := []struct{ name, url string }{
		{"sqlite", "sqlite://" + filepath.Join(t.TempDir(), "uid.db")},
	}
	if os.Getenv("IDMINT_TEST_POSTGRES") != "" || os.Getenv("CI") == "true" {
		dbs = append(dbs, struct{ name, url string }{"postgres", testserver.Database(t, testserver.Postgres)})
	}
	if os.Getenv("IDMINT_TEST_MYSQL") != "" || os.Getenv("CI") == "true" {
		dbs = append(dbs, struct{ name, url string }{"mariadb", "mysql://" + testserver.Database(t, testserver.MariaDB)})
	}
	if len(dbs) == 1 {
		t.Log("only sqlite runs: PostgreSQL and MariaDB need scripts/test.sh (or IDMINT_TEST_POSTGRES / IDMINT_TEST_MYSQL)")
	}
	for _, d := range dbs {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, err := sqldb.Open(ctx, d.url)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for _, stmt := range uidGeneratorDDL[db.Dialect] {
				if _, err := db.ExecContext(ctx, stmt); err != nil {
					t.Fatalf("uid-generator's DDL: %v\n%s", err, stmt)
				}
			}
			// uid-generator has started twice before idmint arrives.
			uid := []int64{uidGeneratorInsert(t, db, "uid-a"), uidGeneratorInsert(t, db, "uid-b")}

			a, err := Open(ctx, d.url, WithTTL(3*time.Second))
			if err != nil {
				t.Fatalf("Open on uid-generator's table: %v", err)
			}
			defer a.Close()
			const max = 7
			var ours []int64
			var leases []*Lease
			defer func() {
				for _, l := range leases {
					l.Close()
				}
			}()
			take := func() error {
				l, err := a.Acquire(ctx, max)
				if err == nil {
					leases = append(leases, l)
					ours = append(ours, l.ID())
				}
				return err
			}
			for range 3 {
				if err := take(); err != nil {
					t.Fatal(err)
				}
			}
			// uid-generator starts again, beside idmint, on the migrated
			// table, with its own column list.
			uid = append(uid, uidGeneratorInsert(t, db, "uid-c"))
			// idmint takes every worker ID left in 0..max.
			var err2 error
			for range max + 2 {
				if err2 = take(); err2 != nil {
					break
				}
			}
			if !errors.Is(err2, ErrNoFreeID) {
				t.Fatalf("Acquire until full = %v, want ErrNoFreeID", err2)
			}
			uid = append(uid, uidGeneratorInsert(t, db, "uid-d"))

			all := append(slices.Clone(ours), uid...)
			slices.Sort(all)
			if len(slices.Compact(all)) != len(ours)+len(uid) {
				t.Fatalf("a worker ID is held twice: idmint %v, uid-generator %v", ours, uid)
			}
			// Every ID in 0..max is used by one of them, except 0 on MySQL,
			// where an explicit 0 means "auto-increment".
			free := 0
			for id := int64(0); id <= max; id++ {
				if !slices.Contains(all, id) {
					free++
				}
			}
			if want := map[sqldb.Dialect]int{sqldb.MySQL: 1}[db.Dialect]; free != want {
				t.Fatalf("%d IDs of 0..%d unused (idmint %v, uid-generator %v), want %d", free, max, ours, uid, want)
			}

			// A released idmint row is recycled; uid-generator's rows,
			// whose heartbeat is 0, never are.
			leases[0].Close()
			freed := ours[0]
			if err := take(); err != nil {
				t.Fatal(err)
			}
			if got := ours[len(ours)-1]; got != freed {
				t.Fatalf("after releasing %d, Acquire took %d", freed, got)
			}
			hs, err := a.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range hs {
				if slices.Contains(uid, h.ID) && (!h.Live || h.Generation != 0) {
					t.Fatalf("List shows uid-generator's row as %+v; want live, generation 0", h)
				}
			}
			// A second idmint process migrates nothing twice and agrees.
			b, err := Open(ctx, d.url, WithTTL(3*time.Second))
			if err != nil {
				t.Fatalf("second Open: %v", err)
			}
			b.Close()
		})
	}
}
