package main

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/segment/stores"
	"github.com/idmint/idmint/sqldb"
	"github.com/idmint/idmint/testkit/testserver"
	"github.com/idmint/idmint/witness"
)

// A team moving to idmint from database auto-increment starts its key
// above the largest ID in its own table: migrate --floor-sql reads it,
// raises the key's store row and the node's witness above it, and every
// ID drawn afterwards is above it, even after the store forgets the raise
// (a restore from a backup taken before it). Run on PostgreSQL and
// MariaDB tables the test fills, with Leaf's leaf_alloc as the source too.
func TestMigrateFloor(t *testing.T) {
	for _, k := range []testserver.Kind{testserver.Postgres, testserver.MariaDB} {
		t.Run(string(k), func(t *testing.T) {
			dsn := testserver.Database(t, k)
			url, driver, create := dsn, "pgx", "CREATE TABLE orders (id BIGSERIAL PRIMARY KEY, note TEXT)"
			if k == testserver.MariaDB {
				url, driver, create = "mysql://"+dsn, "mysql", "CREATE TABLE orders (id BIGINT AUTO_INCREMENT PRIMARY KEY, note TEXT)"
			}
			db, err := sql.Open(driver, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			existing := map[int64]bool{}
			for _, q := range []string{create, "INSERT INTO orders (note) VALUES ('a'), ('b'), ('c')", "INSERT INTO orders (id, note) VALUES (4000000007, 'imported')"} {
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			rows, err := db.QueryContext(ctx, "SELECT id FROM orders")
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var id int64
				rows.Scan(&id)
				existing[id] = true
			}
			rows.Close()

			dir := t.TempDir()
			store := "sqlite://" + filepath.Join(dir, "segments.db")
			code, out, errOut := runCLI(t, "migrate", "--store", store, "--key", "order", "--data-dir", dir,
				"--floor-sql", url, "--floor-query", "SELECT MAX(id) FROM orders")
			if code != 0 || !strings.Contains(out, "the largest ID that exists is 4000000007") || !strings.Contains(out, `floor: "4000000007"`) {
				t.Fatalf("migrate --floor-sql: exit %d\n%s%s", code, out, errOut)
			}

			draw := func(n int) {
				t.Helper()
				w, err := witness.OpenFile(dir)
				if err != nil {
					t.Fatal(err)
				}
				defer w.Close()
				a, err := stores.OpenAllocator(ctx, store, segment.Options{Witness: w})
				if err != nil {
					t.Fatal(err)
				}
				defer a.Close()
				key, err := a.Key("order")
				if err != nil {
					t.Fatal(err)
				}
				for range n {
					id, err := key.Next(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if id <= 4000000007 || existing[id] {
						t.Fatalf("ID %d is not above the largest existing ID 4000000007", id)
					}
					existing[id] = true
				}
			}
			// The store forgets the raise (a restore from a backup taken
			// before it) before any ID is drawn, and again after: the
			// witness holds the floor and then the leased ranges.
			forget := func() {
				t.Helper()
				// sqldb waits out another connection's lock (busy_timeout),
				// as the store's own connections do.
				sq, err := sqldb.Open(ctx, store)
				if err != nil {
					t.Fatal(err)
				}
				defer sq.Close()
				if _, err := sq.ExecContext(ctx, "UPDATE leaf_alloc SET max_id = 1 WHERE biz_tag = 'order'"); err != nil {
					t.Fatal(err)
				}
			}
			forget()
			draw(2500)
			forget()
			draw(2500)

			// Leaf's table as the source: its max_id is the floor.
			for _, q := range []string{
				"CREATE TABLE leaf_alloc (biz_tag VARCHAR(128) PRIMARY KEY, max_id BIGINT NOT NULL, step INT NOT NULL, description VARCHAR(256), update_time TIMESTAMP)",
				"INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('pay', 9000000000, 2000)",
			} {
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			code, out, errOut = runCLI(t, "migrate", "--store", store, "--key", "pay", "--data-dir", dir, "--floor-leaf", url)
			if code != 0 || !strings.Contains(out, "the largest ID that exists is 9000000000") || !strings.Contains(out, "store raised from 1 to 9000000001") {
				t.Fatalf("migrate --floor-leaf: exit %d\n%s%s", code, out, errOut)
			}
			if code, _, errOut := runCLI(t, "migrate", "--store", store, "--key", "nosuch", "--data-dir", dir, "--floor-leaf", url); code != 1 || !strings.Contains(errOut, `no row with biz_tag "nosuch"`) {
				t.Fatalf("--floor-leaf without the tag's row: exit %d %s", code, errOut)
			}

			// A query that does not answer one whole number is refused,
			// and a read-only transaction keeps a mistaken one from writing.
			for q, want := range map[string]string{
				"SELECT id, note FROM orders":     "answers 2 columns",
				"SELECT id FROM orders":           "more than one row",
				"SELECT note FROM orders LIMIT 1": "not a whole number",
				"DELETE FROM orders":              "",
			} {
				code, _, errOut := runCLI(t, "migrate", "--store", store, "--key", "x", "--data-dir", dir, "--floor-sql", url, "--floor-query", q)
				if code != 1 || !strings.Contains(errOut, want) || !strings.Contains(errOut, "--floor-query") {
					t.Errorf("query %q: exit %d %s", q, code, errOut)
				}
			}
			var n int
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders").Scan(&n); err != nil || n != 4 {
				t.Fatalf("orders after the refused queries: %d rows, %v", n, err)
			}
		})
	}
}

// Floors from a number and from a file of IDs; wrong input names the flag.
func TestMigrateFloorSources(t *testing.T) {
	dir := t.TempDir()
	store := "sqlite://" + filepath.Join(dir, "segments.db")
	ids := filepath.Join(dir, "ids.txt")
	if err := os.WriteFile(ids, []byte("17\n\n123456789\n42\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "migrate", "--store", store, "--key", "a", "--data-dir", dir, "--floor-file", ids)
	if code != 0 || !strings.Contains(out, "the largest ID that exists is 123456789 (the largest of 3 IDs") {
		t.Fatalf("--floor-file: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "migrate", "--store", store, "--key", "b", "--data-dir", dir, "--floor", "1_000")
	if code != 0 || !strings.Contains(out, "store raised from 1 to 1001") {
		t.Fatalf("--floor: exit %d\n%s%s", code, out, errOut)
	}
	// Again: nothing to raise, and it says so.
	code, out, _ = runCLI(t, "migrate", "--store", store, "--key", "b", "--data-dir", dir, "--floor", "1000")
	if code != 0 || !strings.Contains(out, "above it already") {
		t.Fatalf("--floor again: exit %d\n%s", code, out)
	}
	bad := filepath.Join(dir, "bad.txt")
	os.WriteFile(bad, []byte("1\nx2\n"), 0o600)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--key", "a", "--floor", "-3"}, 2, `flag --floor "-3"`},
		{[]string{"--key", "a", "--floor", "1", "--floor-file", ids}, 2, "one floor source"},
		{[]string{"--floor", "1"}, 2, "flag --key"},
		{[]string{"--key", "a"}, 2, "name where its floor comes from"},
		{[]string{"--key", "a", "--floor-sql", "sqlite:///x"}, 2, "go together"},
		{[]string{"--key", "a", "--floor-file", bad}, 1, `line 2: "x2"`},
		{[]string{"--key", strings.Repeat("k", 1000), "--floor", "1"}, 2, "flag --key"},
	} {
		args := append([]string{"migrate", "--store", store, "--data-dir", dir}, c.args...)
		code, _, errOut := runCLI(t, args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d %s (want %d, %q)", c.args, code, errOut, c.code, c.want)
		}
	}
}
