package rediscounter

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"

	"github.com/idmint/idmint/sqldb"
)

// MarkStore persists high-water marks. Implementations must make Raise
// durable before it returns and must never lower a mark.
type MarkStore interface {
	// Mark returns the persisted mark of name, 0 if it has none.
	Mark(ctx context.Context, name string) (int64, error)
	// Raise makes the persisted mark of name at least target and returns the
	// persisted mark (>= target) once it is committed.
	Raise(ctx context.Context, name string, target int64) (int64, error)
}

//go:embed migrations/*.sql
var migrations embed.FS

// SQLMarks keeps marks in the table idmint_redis_marks of a SQL database.
// It is safe for concurrent use by many processes: the upsert keeps the
// larger of the stored and the requested mark.
type SQLMarks struct {
	db      *sqldb.DB
	raise   string
	selectQ string
}

// NewSQLMarks creates the marks table in db if it is missing and returns
// the store. The caller keeps ownership of db.
func NewSQLMarks(ctx context.Context, db *sqldb.DB) (*SQLMarks, error) {
	if err := sqldb.Migrate(ctx, db, migrations, "migrations"); err != nil {
		return nil, fmt.Errorf("rediscounter: %w", err)
	}
	m := &SQLMarks{db: db, selectQ: db.Dialect.Rebind("SELECT mark FROM idmint_redis_marks WHERE name = ?")}
	switch db.Dialect {
	case sqldb.MySQL:
		m.raise = "INSERT INTO idmint_redis_marks (name, mark) VALUES (?, ?) ON DUPLICATE KEY UPDATE mark = GREATEST(mark, VALUES(mark))"
	case sqldb.Postgres:
		m.raise = "INSERT INTO idmint_redis_marks (name, mark) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET mark = GREATEST(idmint_redis_marks.mark, excluded.mark)"
	case sqldb.SQLite:
		m.raise = "INSERT INTO idmint_redis_marks (name, mark) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET mark = max(mark, excluded.mark)"
	default:
		return nil, fmt.Errorf("rediscounter: marks: unsupported dialect %s", db.Dialect)
	}
	return m, nil
}

// Mark returns the persisted mark of name, 0 if none. Like every call of
// SQLMarks it gives up after the DB's Timeout when ctx sets no earlier
// deadline, so a database that stops answering costs an error, not a hang.
func (m *SQLMarks) Mark(ctx context.Context, name string) (int64, error) {
	ctx, cancel := m.db.Bound(ctx)
	defer cancel()
	var v int64
	err := m.db.QueryRowContext(ctx, m.selectQ, name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("rediscounter: read mark %q: %w", name, err)
	}
	return v, nil
}

// Raise upserts max(mark, target) in one autocommitted statement, then
// reads the mark back: possibly higher, if another process raised it.
func (m *SQLMarks) Raise(ctx context.Context, name string, target int64) (int64, error) {
	ectx, cancel := m.db.Bound(ctx)
	_, err := m.db.ExecContext(ectx, m.raise, name, target)
	cancel()
	if err != nil {
		return 0, fmt.Errorf("rediscounter: raise mark %q to %d: %w", name, target, err)
	}
	v, err := m.Mark(ctx, name)
	if err != nil {
		return 0, err
	}
	if v < target {
		return 0, fmt.Errorf("rediscounter: mark %q reads %d after raising it to %d", name, v, target)
	}
	return v, nil
}
