package ticket

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"

	"github.com/idmint/idmint/sqldb"
)

// pgSource is a ticket server on PostgreSQL: a sequence with INCREMENT BY N
// START WITH k.
type pgSource struct {
	pool         *pinned
	one, batch   string
	seq          string
	step, offset int64
}

func newPostgres(ctx context.Context, db *sqldb.DB, cfg Config, offset int, hook connHook) (*pgSource, error) {
	seq := cfg.Sequence
	create := "CREATE SEQUENCE IF NOT EXISTS " + seq + " AS bigint INCREMENT BY " + strconv.Itoa(cfg.Step) +
		" MINVALUE 1 START WITH " + strconv.Itoa(offset) + " NO CYCLE"
	if _, err := db.ExecContext(ctx, create); err != nil {
		return nil, fmt.Errorf("ticket: create sequence %s on %s: %w", seq, db.URL, err)
	}
	// An existing sequence keeps its own settings: check them.
	var inc, start int64
	var cycle bool
	err := db.QueryRowContext(ctx, "SELECT increment_by, start_value, cycle FROM pg_sequences WHERE schemaname = current_schema() AND sequencename = lower($1)", seq).
		Scan(&inc, &start, &cycle)
	if err != nil {
		return nil, fmt.Errorf("ticket: inspect sequence %s on %s: %w", seq, db.URL, err)
	}
	if inc != int64(cfg.Step) || start != int64(offset) || cycle {
		return nil, fmt.Errorf("%w: sequence %s on %s has INCREMENT BY %d START WITH %d cycle=%v; config wants %d, %d, no cycle",
			ErrConfig, seq, db.URL, inc, start, cycle, cfg.Step, offset)
	}
	init := func(ctx context.Context, c *sql.Conn) error {
		// nextval is WAL-logged and flushed at commit; make sure commits wait
		// for the flush in this session, and that the server flushes at all.
		if _, err := c.ExecContext(ctx, "SET synchronous_commit = on"); err != nil {
			return fmt.Errorf("ticket: set synchronous_commit on %s: %w", db.URL, err)
		}
		var fsync string
		if err := c.QueryRowContext(ctx, "SHOW fsync").Scan(&fsync); err != nil {
			return fmt.Errorf("ticket: show fsync on %s: %w", db.URL, err)
		}
		if fsync != "on" {
			return fmt.Errorf("%w: %s has fsync=%s; a crash could move sequence %s back", ErrNotDurable, db.URL, fsync, seq)
		}
		return nil
	}
	src := &pgSource{
		one:   "SELECT nextval('" + seq + "')",
		batch: "SELECT nextval('" + seq + "') FROM generate_series(1, $1)",
		seq:   seq, step: int64(cfg.Step), offset: int64(offset),
	}
	src.pool = newPinned(db, cfg.Conns, func(ctx context.Context, c *sql.Conn) error {
		if err := init(ctx, c); err != nil {
			return err
		}
		if hook != nil {
			return hook(ctx, newConn{src, sqldb.Postgres, c})
		}
		return nil
	})
	if err := src.pool.with(ctx, func(*sql.Conn) error { return nil }); err != nil {
		return nil, err
	}
	return src, nil
}

// tickets takes len(dst) values of the sequence in one statement.
func (p *pgSource) tickets(ctx context.Context, dst []int64) (int, error) {
	n := 0
	err := p.pool.with(ctx, func(c *sql.Conn) error {
		if len(dst) == 1 {
			if err := c.QueryRowContext(ctx, p.one).Scan(&dst[0]); err != nil {
				return fmt.Errorf("ticket: %s: %w", p.pool.db.URL, err)
			}
			n = 1
			return nil
		}
		rows, err := c.QueryContext(ctx, p.batch, len(dst))
		if err != nil {
			return fmt.Errorf("ticket: %s: %w", p.pool.db.URL, err)
		}
		defer rows.Close()
		for rows.Next() && n < len(dst) {
			if err := rows.Scan(&dst[n]); err != nil {
				return fmt.Errorf("ticket: %s: %w", p.pool.db.URL, err)
			}
			n++
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("ticket: %s: %w", p.pool.db.URL, err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	slices.Sort(dst[:n])
	return n, nil
}

func (p *pgSource) close() error { return p.pool.close() }

// raise runs raiseOn on one of the pool's connections.
func (p *pgSource) raise(ctx context.Context, atLeast int64) (int64, error) {
	return p.pool.raise(ctx, p, atLeast)
}

// raiseOn moves the sequence so that its next value is the first of the
// residue class at or above atLeast. setval alone could lower a sequence
// that concurrent nextval calls move past the value read, so the
// transaction first takes the sequence's lock with a no-op ALTER SEQUENCE
// (SHARE ROW EXCLUSIVE, which nextval's ROW EXCLUSIVE waits for), reads
// last_value, and sets it only when it is below the target.
func (p *pgSource) raiseOn(ctx context.Context, c *sql.Conn, atLeast int64) (int64, error) {
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("ticket: raise sequence %s: %w", p.seq, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "ALTER SEQUENCE "+p.seq+" INCREMENT BY "+strconv.FormatInt(p.step, 10)); err != nil {
		return 0, fmt.Errorf("ticket: lock sequence %s: %w", p.seq, err)
	}
	var last int64
	var called bool
	if err := tx.QueryRowContext(ctx, "SELECT last_value, is_called FROM "+p.seq).Scan(&last, &called); err != nil {
		return 0, fmt.Errorf("ticket: read sequence %s: %w", p.seq, err)
	}
	before := last
	if called {
		before = last + p.step
	}
	next := firstAtLeast(atLeast, p.offset, p.step)
	if before >= next {
		return before, nil
	}
	// is_called false: the next nextval returns next itself.
	if _, err := tx.ExecContext(ctx, "SELECT setval('"+p.seq+"', $1, false)", next); err != nil {
		return 0, fmt.Errorf("ticket: move sequence %s to %d: %w", p.seq, next, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("ticket: move sequence %s to %d: %w", p.seq, next, err)
	}
	return before, nil
}
