package sqldb

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"
)

// MigrationsTable is the table Migrate records applied migrations in, one
// row per migration name.
const MigrationsTable = "idmint_migrations"

// MigrateTimeout bounds a Migrate whose context sets no deadline.
const MigrateTimeout = time.Minute

// Migrate applies, in name order, the migrations in directory dir of fsys
// that the database has not recorded yet, and records each one. It is
// idempotent, and safe to run from several processes at once: PostgreSQL
// and MySQL runs are serialised by an advisory lock, SQLite runs by its
// write lock.
//
// A migration is a file "NNNN_name.sql" used by every dialect, or
// "NNNN_name.<dialect>.sql" (dialect: sqlite, postgres, mysql) that replaces
// the generic file for that dialect. It holds statements separated by a
// semicolon at the end of a line; lines starting with "--" are comments.
// Migrations are recorded by "NNNN_name", which must therefore be unique
// among every package migrating the same database: prefix it with the
// component ("0001_segment_leaf_alloc"). The statements should be
// idempotent themselves (CREATE TABLE IF NOT EXISTS ...): MySQL commits DDL
// at once, so a run that dies between a statement and its record repeats
// the statement next time.
func Migrate(ctx context.Context, db *DB, fsys fs.FS, dir string) error {
	files, err := migrationFiles(fsys, dir, db.Dialect)
	if err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		// Waiting for another process's migration (the advisory lock) may
		// take longer than one store call, but never forever.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, MigrateTimeout)
		defer cancel()
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqldb: migrate %s: %w", db.URL, err)
	}
	defer conn.Close()
	unlock, err := lockMigrations(ctx, conn, db.Dialect)
	if err != nil {
		return fmt.Errorf("sqldb: migrate %s: lock: %w", db.URL, err)
	}
	defer unlock()
	create := "CREATE TABLE IF NOT EXISTS " + MigrationsTable +
		" (name VARCHAR(191) NOT NULL PRIMARY KEY, applied_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)"
	if _, err := conn.ExecContext(ctx, create); err != nil {
		return fmt.Errorf("sqldb: migrate %s: create %s: %w", db.URL, MigrationsTable, err)
	}
	for _, m := range files {
		if err := apply(ctx, conn, db.Dialect, fsys, m); err != nil {
			return fmt.Errorf("sqldb: migrate %s: %s: %w", db.URL, m.file, err)
		}
	}
	return nil
}

type migration struct{ name, file string }

func migrationFiles(fsys fs.FS, dir string, d Dialect) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("sqldb: migrations dir %q: %w", dir, err)
	}
	generic := map[string]string{}
	specific := map[string]string{}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".sql") {
			continue
		}
		base := strings.TrimSuffix(n, ".sql")
		if i := strings.LastIndexByte(base, '.'); i >= 0 {
			switch base[i+1:] {
			case d.String():
				specific[base[:i]] = path.Join(dir, n)
			case "sqlite", "postgres", "mysql":
			default:
				return nil, fmt.Errorf("sqldb: migration %q: dialect suffix %q is not sqlite, postgres or mysql", n, base[i+1:])
			}
			continue
		}
		generic[base] = path.Join(dir, n)
	}
	for k, v := range specific {
		generic[k] = v
	}
	out := make([]migration, 0, len(generic))
	for k, v := range generic {
		out = append(out, migration{name: k, file: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

func lockMigrations(ctx context.Context, conn *sql.Conn, d Dialect) (func(), error) {
	switch d {
	case Postgres:
		if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock(hashtext('idmint_migrations'))"); err != nil {
			return nil, err
		}
		return func() {
			_, _ = conn.ExecContext(context.Background(), "SELECT pg_advisory_unlock(hashtext('idmint_migrations'))")
		}, nil
	case MySQL:
		var got sql.NullInt64
		if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK('idmint_migrations', 60)").Scan(&got); err != nil {
			return nil, err
		}
		if got.Int64 != 1 {
			return nil, fmt.Errorf("GET_LOCK('idmint_migrations') timed out after 60 s")
		}
		return func() {
			_, _ = conn.ExecContext(context.Background(), "SELECT RELEASE_LOCK('idmint_migrations')")
		}, nil
	}
	return func() {}, nil
}

func apply(ctx context.Context, conn *sql.Conn, d Dialect, fsys fs.FS, m migration) error {
	body, err := fs.ReadFile(fsys, m.file)
	if err != nil {
		return err
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, d.Rebind("SELECT COUNT(*) FROM "+MigrationsTable+" WHERE name = ?"), m.name).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	for _, stmt := range SplitStatements(string(body)) {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("%w\n%s", err, stmt)
		}
	}
	if _, err := tx.ExecContext(ctx, d.Rebind("INSERT INTO "+MigrationsTable+" (name) VALUES (?)"), m.name); err != nil {
		return err
	}
	return tx.Commit()
}

// SplitStatements splits a migration file into statements: each ends with
// a semicolon at the end of a line. Lines starting with "--" are dropped.
func SplitStatements(body string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(body, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(t, ";") {
			s := strings.TrimSuffix(strings.TrimSpace(cur.String()), ";")
			if strings.TrimSpace(s) != "" {
				out = append(out, s)
			}
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}
