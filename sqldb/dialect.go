package sqldb

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
)

// Dialect names one of the SQL dialects idmint speaks. Its methods return
// SQL fragments; none of them touches a database.
type Dialect int

// The dialects Open recognises.
const (
	SQLite Dialect = iota + 1
	Postgres
	MySQL // MySQL and MariaDB
)

// String returns "sqlite", "postgres" or "mysql" — the names migration file
// suffixes use.
func (d Dialect) String() string {
	switch d {
	case SQLite:
		return "sqlite"
	case Postgres:
		return "postgres"
	case MySQL:
		return "mysql"
	}
	return "unknown(" + strconv.Itoa(int(d)) + ")"
}

// Rebind rewrites the "?" placeholders of q into the dialect's form:
// $1, $2, ... for PostgreSQL; unchanged for SQLite and MySQL. Question marks
// inside single-quoted literals are left alone.
func (d Dialect) Rebind(q string) string {
	if d != Postgres || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 8)
	n, quoted := 0, false
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '\'':
			quoted = !quoted
			b.WriteByte(c)
		case c == '?' && !quoted:
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Now returns the SQL expression for the current timestamp, the same in a
// TIMESTAMP column of every dialect.
func (d Dialect) Now() string { return "CURRENT_TIMESTAMP" }

// ForUpdate returns the clause that locks the rows a SELECT reads until the
// transaction ends (" FOR UPDATE"), or "" for SQLite, whose immediate
// transactions already hold the database's only write lock.
func (d Dialect) ForUpdate() string {
	if d == SQLite {
		return ""
	}
	return " FOR UPDATE"
}

// RowLocks reports whether the dialect locks single rows (PostgreSQL,
// MySQL); SQLite locks the whole database per write transaction.
func (d Dialect) RowLocks() bool { return d != SQLite }

// Upsert returns an INSERT of cols into table (with "?" placeholders in
// the dialect's form) that, when a row with the same key columns exists,
// updates the update columns to the inserted values instead, or, when
// update is empty, leaves the existing row alone and inserts nothing.
// Names are written into the SQL as they are: pass constants only.
func (d Dialect) Upsert(table string, cols, key, update []string) string {
	var b strings.Builder
	if d == MySQL && len(update) == 0 {
		b.WriteString("INSERT IGNORE INTO ")
	} else {
		b.WriteString("INSERT INTO ")
	}
	b.WriteString(table)
	b.WriteString(" (")
	b.WriteString(strings.Join(cols, ", "))
	b.WriteString(") VALUES (")
	b.WriteString(strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", "))
	b.WriteString(")")
	switch {
	case d == MySQL && len(update) > 0:
		b.WriteString(" ON DUPLICATE KEY UPDATE ")
		for i, c := range update {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(c + " = VALUES(" + c + ")")
		}
	case d != MySQL:
		b.WriteString(" ON CONFLICT (" + strings.Join(key, ", ") + ") DO ")
		if len(update) == 0 {
			b.WriteString("NOTHING")
		} else {
			b.WriteString("UPDATE SET ")
			for i, c := range update {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(c + " = excluded." + c)
			}
		}
	}
	return d.Rebind(b.String())
}

// IsDuplicate reports whether err is a unique or primary-key violation in
// any of the three databases.
func IsDuplicate(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code == "23505"
	}
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		return my.Number == 1062
	}
	var lite *sqlite.Error
	if errors.As(err, &lite) {
		// SQLITE_CONSTRAINT_PRIMARYKEY, SQLITE_CONSTRAINT_UNIQUE
		return lite.Code() == 1555 || lite.Code() == 2067
	}
	return false
}

// IsTransient reports whether err is a refusal the database made because
// of other transactions running at the same moment, after which it rolled
// the statement back and the same statement may simply be run again:
// MySQL/MariaDB's deadlock (1213, "try restarting transaction") and lock
// wait timeout (1205), PostgreSQL's serialization failure (40001) and
// deadlock (40P01), SQLite's busy and locked.
func IsTransient(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code == "40001" || pg.Code == "40P01"
	}
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		return my.Number == 1213 || my.Number == 1205
	}
	var lite *sqlite.Error
	if errors.As(err, &lite) {
		// SQLITE_BUSY and SQLITE_LOCKED with their extended codes.
		c := lite.Code() & 0xff
		return c == 5 || c == 6
	}
	return false
}

// RetryTransient runs f until it returns something other than a
// transient refusal (see IsTransient), at most 8 times, waiting 1 ms
// doubling to 32 ms between tries, and not past ctx. Only for statements
// whose refusal leaves nothing done: a refused statement was rolled back.
func RetryTransient(ctx context.Context, f func() error) error {
	return retry(ctx, 8, 32*time.Millisecond, f, IsTransient)
}

// retry runs f until it succeeds, fails with an error again does not
// accept, has run tries times (0: no limit), or ctx ends; it waits 1 ms
// between tries, doubling up to most. It returns f's last error.
func retry(ctx context.Context, tries int, most time.Duration, f func() error, again func(error) bool) error {
	wait := time.Millisecond
	for try := 1; ; try++ {
		err := f()
		if err == nil || try == tries || !again(err) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, most)
	}
}
