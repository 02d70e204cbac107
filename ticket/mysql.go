package ticket

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"

	"github.com/idmint/idmint/sqldb"
)

// mysqlSource is a Flickr ticket server on MySQL/MariaDB.
type mysqlSource struct {
	pool    *pinned
	replace string
	table   string
	stub    string
	step    int64
	offset  int64
}

func newMySQL(ctx context.Context, db *sqldb.DB, cfg Config, offset int, hook connHook) (*mysqlSource, error) {
	// The schema of Flickr's post, on InnoDB for crash safety.
	create := "CREATE TABLE IF NOT EXISTS `" + cfg.Table + "` (\n" +
		"  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,\n" +
		"  stub CHAR(1) NOT NULL DEFAULT '',\n" +
		"  PRIMARY KEY (id),\n" +
		"  UNIQUE KEY stub (stub)\n" +
		") ENGINE=InnoDB"
	if _, err := db.ExecContext(ctx, create); err != nil {
		return nil, fmt.Errorf("ticket: create %s on %s: %w", cfg.Table, db.URL, err)
	}
	var engine sql.NullString
	err := db.QueryRowContext(ctx, "SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?", cfg.Table).Scan(&engine)
	if err != nil {
		return nil, fmt.Errorf("ticket: inspect %s on %s: %w", cfg.Table, db.URL, err)
	}
	if engine.String != "InnoDB" {
		return nil, fmt.Errorf("%w: %s.%s uses engine %q; want InnoDB, which commits durably", ErrNotDurable, db.URL, cfg.Table, engine.String)
	}
	step, off := cfg.Step, offset
	init := func(ctx context.Context, c *sql.Conn) error {
		// Session settings: this connection steps by N from offset k, whatever
		// the server's my.cnf says. Read back, since a server may clamp them
		// (Galera's wsrep_auto_increment_control manages them itself).
		if _, err := c.ExecContext(ctx, "SET SESSION auto_increment_increment = "+strconv.Itoa(step)+
			", auto_increment_offset = "+strconv.Itoa(off)); err != nil {
			return fmt.Errorf("ticket: set auto_increment on %s: %w", db.URL, err)
		}
		var gotStep, gotOff, flush int
		if err := c.QueryRowContext(ctx, "SELECT @@SESSION.auto_increment_increment, @@SESSION.auto_increment_offset, @@GLOBAL.innodb_flush_log_at_trx_commit").
			Scan(&gotStep, &gotOff, &flush); err != nil {
			return fmt.Errorf("ticket: read settings of %s: %w", db.URL, err)
		}
		if gotStep != step || gotOff != off {
			return fmt.Errorf("%w: %s keeps auto_increment_increment=%d, auto_increment_offset=%d after SET SESSION to %d, %d",
				ErrConfig, db.URL, gotStep, gotOff, step, off)
		}
		if flush != 1 {
			return fmt.Errorf("%w: %s has innodb_flush_log_at_trx_commit=%d; a crash could lose issued tickets and repeat them (want 1)",
				ErrNotDurable, db.URL, flush)
		}
		return nil
	}
	src := &mysqlSource{
		replace: "REPLACE INTO `" + cfg.Table + "` (stub) VALUES ('" + cfg.Stub + "')",
		table:   cfg.Table, stub: cfg.Stub, step: int64(cfg.Step), offset: int64(offset),
	}
	src.pool = newPinned(db, cfg.Conns, func(ctx context.Context, c *sql.Conn) error {
		if err := init(ctx, c); err != nil {
			return err
		}
		if hook != nil {
			return hook(ctx, newConn{src, sqldb.MySQL, c})
		}
		return nil
	})
	// Set up one connection now, so a misconfigured server fails Open.
	if err := src.pool.with(ctx, func(*sql.Conn) error { return nil }); err != nil {
		return nil, err
	}
	return src, nil
}

// tickets runs Flickr's REPLACE INTO on a pinned connection and returns
// the ID it generated. The OK packet of the REPLACE carries that
// connection's LAST_INSERT_ID(), so one round trip gives what the post's
// "REPLACE ...; SELECT LAST_INSERT_ID()" gives in two; the tests check that
// the two agree.
func (m *mysqlSource) tickets(ctx context.Context, dst []int64) (int, error) {
	err := m.pool.with(ctx, func(c *sql.Conn) error {
		// Concurrent REPLACEs on one row can deadlock in InnoDB (the
		// delete-then-insert takes its locks in two steps); the refused
		// statement was rolled back and issued nothing, so run it again.
		var res sql.Result
		err := sqldb.RetryTransient(ctx, func() (err error) {
			res, err = c.ExecContext(ctx, m.replace)
			return err
		})
		if err != nil {
			return fmt.Errorf("ticket: %s: %w", m.pool.db.URL, err)
		}
		id, err := res.LastInsertId()
		if err != nil {
			return fmt.Errorf("ticket: %s: %w", m.pool.db.URL, err)
		}
		dst[0] = id
		return nil
	})
	if err != nil {
		return 0, err
	}
	return 1, nil
}

func (m *mysqlSource) close() error { return m.pool.close() }

// raise runs raiseOn on one of the pool's connections.
func (m *mysqlSource) raise(ctx context.Context, atLeast int64) (int64, error) {
	return m.pool.raise(ctx, m, atLeast)
}

// raiseOn moves the table's auto-increment counter so that the next ID is
// the first of the residue class at or above atLeast. The table holds one
// row per stub, each with the last ID REPLACE gave it, so MAX(id) is the
// last ID issued. The counter moves by inserting the ID one step below the
// target explicitly (REPLACE with an id): InnoDB then sets the counter
// past it, and never lowers it for an id below. No DDL, no table lock.
func (m *mysqlSource) raiseOn(ctx context.Context, c *sql.Conn, atLeast int64) (int64, error) {
	var last sql.NullInt64
	if err := c.QueryRowContext(ctx, "SELECT MAX(id) FROM `"+m.table+"`").Scan(&last); err != nil {
		return 0, fmt.Errorf("ticket: read the last id of %s: %w", m.table, err)
	}
	before := last.Int64 + 1
	next := firstAtLeast(atLeast, m.offset, m.step)
	if before >= next || next-m.step < 1 {
		return before, nil
	}
	err := sqldb.RetryTransient(ctx, func() error {
		_, err := c.ExecContext(ctx, "REPLACE INTO `"+m.table+"` (id, stub) VALUES (?, '"+m.stub+"')", next-m.step)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("ticket: move %s's counter to %d: %w", m.table, next, err)
	}
	return before, nil
}

// firstAtLeast returns the smallest v >= atLeast with v = offset (mod step).
func firstAtLeast(atLeast, offset, step int64) int64 {
	r := ((atLeast-offset)%step + step) % step
	if r == 0 {
		return atLeast
	}
	return atLeast + step - r
}
