package witness

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"

	"github.com/idmint/idmint/sqldb"
)

//go:embed migrations/*.sql
var migrations embed.FS

// SQL keeps marks in the table idmint_witness of a database that is not
// the store of the spaces it witnesses (a `witness:` database for nodes
// that share only their store). A claim is one conditional UPDATE
// (mark = to WHERE mark <= from), so concurrent nodes cannot both succeed.
type SQL struct {
	db                      *sqldb.DB
	get, claim, insert, url string
	own                     bool
}

// NewSQL creates the table in db if it is missing and returns the witness.
// The caller keeps db.
func NewSQL(ctx context.Context, db *sqldb.DB) (*SQL, error) {
	if err := sqldb.Migrate(ctx, db, migrations, "migrations"); err != nil {
		return nil, fmt.Errorf("witness: %w", err)
	}
	d := db.Dialect
	return &SQL{
		db:     db,
		url:    db.URL,
		get:    d.Rebind("SELECT mark FROM idmint_witness WHERE space = ?"),
		claim:  d.Rebind("UPDATE idmint_witness SET mark = ? WHERE space = ? AND mark <= ?"),
		insert: d.Upsert("idmint_witness", []string{"space", "mark"}, []string{"space"}, nil),
	}, nil
}

// Mark reads the space's mark.
func (s *SQL) Mark(ctx context.Context, space string) (int64, error) {
	if err := ValidateSpace(space); err != nil {
		return 0, err
	}
	ctx, cancel := s.db.Bound(ctx)
	defer cancel()
	var v int64
	err := s.db.QueryRowContext(ctx, s.get, space).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("witness: %s: read %q: %w", s.url, space, err)
	}
	return v, nil
}

// Claim updates the row if its mark is at most from, creating it first
// when missing.
func (s *SQL) Claim(ctx context.Context, space string, from, to int64) (int64, bool, error) {
	if err := checkClaim(space, from, to); err != nil {
		return 0, false, err
	}
	for range 3 {
		bctx, cancel := s.db.Bound(ctx)
		res, err := s.db.ExecContext(bctx, s.claim, to, space, from)
		var n int64
		if err == nil {
			n, err = res.RowsAffected()
		}
		cancel()
		if err != nil {
			return 0, false, fmt.Errorf("witness: %s: raise %q to %d: %w", s.url, space, to, err)
		}
		// MySQL counts a row whose value did not change as unaffected.
		if n == 1 {
			return to, true, nil
		}
		m, err := s.Mark(ctx, space)
		if err != nil {
			return 0, false, err
		}
		if m > from {
			return m, false, nil
		}
		if m == to {
			return to, true, nil
		}
		// No row yet: create it at 0 and try the update again.
		bctx, cancel = s.db.Bound(ctx)
		_, err = s.db.ExecContext(bctx, s.insert, space, int64(0))
		cancel()
		if err != nil && !sqldb.IsDuplicate(err) {
			return 0, false, fmt.Errorf("witness: %s: create %q: %w", s.url, space, err)
		}
	}
	return 0, false, fmt.Errorf("witness: %s: claim %q from %d to %d did not settle", s.url, space, from, to)
}

// String names the database (password removed).
func (s *SQL) String() string { return "database " + s.url }

// Close closes the database when the witness opened it (Open).
func (s *SQL) Close() error {
	if s.own {
		return s.db.Close()
	}
	return nil
}
