package instagram

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/idmint/idmint/sqldb"
)

// MaxBatch is the most IDs NextN asks for in one statement: the sequence
// field holds 1,024 residues, so a larger batch within one millisecond
// would repeat IDs by construction.
const MaxBatch = 1 << SeqBits

// ErrDialect is returned by Open for a database that is not PostgreSQL.
var ErrDialect = errors.New("instagram: the in-database generator needs PostgreSQL")

// Generator issues IDs by calling an installed next_id() function. It is
// safe for concurrent use; its guarantees are the function's (see the
// package doc): unique per shard up to 1,024 IDs per millisecond, ordered by
// millisecond.
type Generator struct {
	db    *sql.DB
	owned *sqldb.DB
	one   string
	many  string
}

// New returns a Generator calling o's function on db, which must be a
// PostgreSQL database where Install (or Render's script) has run. The
// caller keeps ownership of db; Close does not close it.
func New(db *sql.DB, o Options) (*Generator, error) {
	fn, err := o.FunctionName()
	if err != nil {
		return nil, err
	}
	return &Generator{
		db:   db,
		one:  "SELECT " + fn + "()",
		many: "SELECT " + fn + "() FROM generate_series(1, $1)",
	}, nil
}

// Open connects to the PostgreSQL database at rawURL (see sqldb.Open),
// installs o's function there and returns a Generator that owns the
// connection pool; Close releases it.
func Open(ctx context.Context, rawURL string, o Options) (*Generator, error) {
	if _, err := o.FunctionName(); err != nil {
		return nil, err
	}
	db, err := sqldb.Open(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	if db.Dialect != sqldb.Postgres {
		db.Close()
		return nil, fmt.Errorf("%w: %s is %s", ErrDialect, db.URL, db.Dialect)
	}
	if err := Install(ctx, db.DB, o); err != nil {
		db.Close()
		return nil, err
	}
	g, _ := New(db.DB, o)
	g.owned = db
	return g, nil
}

// Install runs Render's statements on db in one transaction: the schema and
// sequence are created if missing and the function is (re)defined. Running
// it again is harmless; the sequence keeps its position.
func Install(ctx context.Context, db *sql.DB, o Options) error {
	stmts, err := statements(o)
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("instagram: install: %w", err)
	}
	defer tx.Rollback()
	for _, s := range stmts {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("instagram: install in schema %s: %w", o.Schema, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("instagram: install: %w", err)
	}
	return nil
}

// Next returns one ID from the database: one round trip.
func (g *Generator) Next(ctx context.Context) (int64, error) {
	var id int64
	if err := g.db.QueryRowContext(ctx, g.one).Scan(&id); err != nil {
		return 0, fmt.Errorf("instagram: next_id: %w", err)
	}
	return id, nil
}

// NextN fills dst with up to min(len(dst), MaxBatch) IDs from one statement
// and returns how many it wrote. On error it returns the count written so
// far (zero: a batch is all or nothing) and the error.
func (g *Generator) NextN(ctx context.Context, dst []int64) (int, error) {
	n := min(len(dst), MaxBatch)
	if n == 0 {
		return 0, nil
	}
	rows, err := g.db.QueryContext(ctx, g.many, n)
	if err != nil {
		return 0, fmt.Errorf("instagram: next_id batch: %w", err)
	}
	defer rows.Close()
	i := 0
	for rows.Next() && i < n {
		if err := rows.Scan(&dst[i]); err != nil {
			return 0, fmt.Errorf("instagram: next_id batch: %w", err)
		}
		i++
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("instagram: next_id batch: %w", err)
	}
	return i, nil
}

// Close releases the connection pool if Open created it; for a Generator
// from New it does nothing.
func (g *Generator) Close() error {
	if g.owned != nil {
		return g.owned.Close()
	}
	return nil
}
