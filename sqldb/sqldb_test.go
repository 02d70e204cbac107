package sqldb

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/idmint/idmint/testkit/testserver"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url     string
		driver  string
		dialect Dialect
		dsn     string // substring of the driver DSN
		err     string // substring of the error; "" = ok
	}{
		{url: "sqlite:///var/lib/x.db", driver: "sqlite", dialect: SQLite, dsn: "file:/var/lib/x.db?"},
		{url: "sqlite://rel.db", driver: "sqlite", dialect: SQLite, dsn: "file:rel.db?"},
		{url: "sqlite://dir/rel.db", driver: "sqlite", dialect: SQLite, dsn: "file:dir/rel.db?"},
		{url: "sqlite:///x.db", driver: "sqlite", dialect: SQLite, dsn: "_txlock=immediate"},
		{url: "postgres://u:p@h:5432/db?sslmode=disable", driver: "pgx", dialect: Postgres, dsn: "postgres://u:p@h:5432/db"},
		{url: "postgresql://u@h/db", driver: "pgx", dialect: Postgres},
		{url: "mysql://u:secret@h:3307/db?timeout=5s", driver: "mysql", dialect: MySQL, dsn: "u:secret@tcp(h:3307)/db?"},
		{url: "mysql://u@h/db", driver: "mysql", dialect: MySQL, dsn: "u@tcp(h:3306)/db?"},
		{url: "root@tcp(127.0.0.1:3306)/idmint", driver: "mysql", dialect: MySQL, dsn: "root@tcp(127.0.0.1:3306)/idmint?"},
		{url: "mysql://root@tcp(127.0.0.1:3306)/idmint", driver: "mysql", dialect: MySQL, dsn: "parseTime=true"},
		{url: "", err: "url is empty"},
		{url: "nothing", err: "scheme is missing"},
		{url: "oracle://h/db", err: `scheme "oracle"`},
		{url: "sqlite://", err: "sqlite url"},
		{url: "postgres:///db", err: "host is empty"},
		{url: "postgres://u:secret@h/", err: "database name"},
		{url: "mysql://u:secret@h:3306/", err: "database name"},
		{url: "mysql://u:secret@/db", err: "host is empty"},
		{url: "mysql://u:secret@h/db?tls=bogus", err: "query"},
		{url: "u:secret@tcp(h:3306)/db?tls=bogus", err: "mysql dsn"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			driver, dsn, d, shown, err := parse(tt.url)
			if tt.err != "" {
				if err == nil || !errors.Is(err, ErrURL) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("parse(%q) err = %v, want ErrURL containing %q", tt.url, err, tt.err)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Fatalf("error leaks the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse(%q): %v", tt.url, err)
			}
			if driver != tt.driver || d != tt.dialect || !strings.Contains(dsn, tt.dsn) {
				t.Fatalf("parse(%q) = %s %v %q, want %s %v containing %q", tt.url, driver, d, dsn, tt.driver, tt.dialect, tt.dsn)
			}
			if strings.Contains(shown, "secret") {
				t.Fatalf("shown url leaks the password: %s", shown)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"sqlite:///a.db", "postgres://u:pw@h/db", "mysql://u:pw@h:1/d?x=y", "u:pw@tcp(h)/d", "%%", "mysql://"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _, _, shown, err := parse(s)
		if err != nil && !errors.Is(err, ErrURL) {
			t.Fatalf("parse(%q) error %v does not wrap ErrURL", s, err)
		}
		_ = shown
	})
}

func TestRebind(t *testing.T) {
	t.Parallel()
	q := "SELECT a FROM t WHERE b = ? AND c = '?' AND d = ?"
	if got := Postgres.Rebind(q); got != "SELECT a FROM t WHERE b = $1 AND c = '?' AND d = $2" {
		t.Fatalf("Postgres.Rebind = %q", got)
	}
	if got := MySQL.Rebind(q); got != q {
		t.Fatalf("MySQL.Rebind = %q", got)
	}
}

func TestUpsert(t *testing.T) {
	t.Parallel()
	cols, key := []string{"k", "v"}, []string{"k"}
	tests := []struct {
		d      Dialect
		update []string
		want   string
	}{
		{SQLite, nil, "INSERT INTO t (k, v) VALUES (?, ?) ON CONFLICT (k) DO NOTHING"},
		{Postgres, []string{"v"}, "INSERT INTO t (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = excluded.v"},
		{MySQL, nil, "INSERT IGNORE INTO t (k, v) VALUES (?, ?)"},
		{MySQL, []string{"v"}, "INSERT INTO t (k, v) VALUES (?, ?) ON DUPLICATE KEY UPDATE v = VALUES(v)"},
	}
	for _, tt := range tests {
		if got := tt.d.Upsert("t", cols, key, tt.update); got != tt.want {
			t.Errorf("%v.Upsert(%v) = %q, want %q", tt.d, tt.update, got, tt.want)
		}
	}
}

func TestSplitStatements(t *testing.T) {
	t.Parallel()
	got := SplitStatements("-- c\nCREATE TABLE a (\n x INT\n);\n\nINSERT INTO a VALUES (1);\nSELECT 1")
	if len(got) != 3 || !strings.HasPrefix(got[0], "CREATE TABLE a") || got[1] != "INSERT INTO a VALUES (1)" || got[2] != "SELECT 1" {
		t.Fatalf("SplitStatements = %q", got)
	}
}

// databases returns a URL per dialect: a temporary SQLite file always, and
// the real servers when scripts/test.sh runs them.
func databases(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{"sqlite": "sqlite://" + filepath.Join(t.TempDir(), "t.db")}
	if os.Getenv("IDMINT_TEST_POSTGRES") != "" || os.Getenv("CI") == "true" {
		out["postgres"] = testserver.Database(t, testserver.Postgres)
	}
	if os.Getenv("IDMINT_TEST_MYSQL") != "" || os.Getenv("CI") == "true" {
		out["mysql"] = testserver.Database(t, testserver.MariaDB)
	}
	if len(out) == 1 {
		t.Log("only SQLite: PostgreSQL and MariaDB runs need scripts/test.sh")
	}
	return out
}

func TestMigrate(t *testing.T) {
	for name, u := range databases(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db, err := Open(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			fsys := os.DirFS("testdata")
			// Concurrent first runs, then a repeat: each migration applies once.
			var wg sync.WaitGroup
			errs := make([]error, 3)
			for i := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					other, err := Open(ctx, u)
					if err != nil {
						errs[i] = err
						return
					}
					defer other.Close()
					errs[i] = Migrate(ctx, other, fsys, "migrations")
				}()
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := Migrate(ctx, db, fsys, "migrations"); err != nil {
				t.Fatal(err)
			}
			rows, err := db.QueryContext(ctx, "SELECT name, n FROM things ORDER BY name")
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			got := map[string]int{}
			for rows.Next() {
				var k string
				var n int
				if err := rows.Scan(&k, &n); err != nil {
					t.Fatal(err)
				}
				got[k] = n
			}
			want2 := 2
			if db.Dialect == Postgres {
				want2 = 22 // the dialect-specific file replaced the generic one
			}
			if len(got) != 2 || got["one"] != 1 || got["two"] != want2 {
				t.Fatalf("things = %v, want one=1 two=%d", got, want2)
			}
			// Duplicate detection works on every dialect.
			_, err = db.ExecContext(ctx, db.Dialect.Rebind("INSERT INTO things (name, n) VALUES (?, ?)"), "one", 5)
			if !IsDuplicate(err) {
				t.Fatalf("duplicate insert: IsDuplicate(%v) = false", err)
			}
			res, err := db.ExecContext(ctx, db.Dialect.Upsert("things", []string{"name", "n"}, []string{"name"}, nil), "one", 7)
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := res.RowsAffected(); n != 0 {
				t.Fatalf("upsert-do-nothing affected %d rows", n)
			}
		})
	}
}

func TestMigrateBadDir(t *testing.T) {
	t.Parallel()
	db, err := Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := Migrate(context.Background(), db, os.DirFS("testdata"), "nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("Migrate(missing dir) = %v", err)
	}
}

func TestOpenUnreachable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Open(ctx, "postgres://u:secret@127.0.0.1:1/db?connect_timeout=1")
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("Open(unreachable) = %v; want an error without the password", err)
	}
}
