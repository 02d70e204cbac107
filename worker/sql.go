package worker

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/idmint/idmint/sqldb"
)

//go:embed migrations/*.sql
var migrations embed.FS

// sqlAssigner grants worker IDs from the WORKER_NODE table (see
// migrations/0001_worker_node.sql). Staleness is judged on the database
// server's clock, the one clock every holder shares: a row is free when
// HEARTBEAT_MS + TTL_MS is before the database's now.
//
// It also works on the WORKER_NODE table uid-generator itself creates and
// fills (baidu/uid-generator, src/main/scripts/WORKER_NODE.sql: ID BIGINT
// AUTO_INCREMENT and HOST_NAME, PORT, TYPE, LAUNCH_DATE, MODIFIED, CREATED).
// NewSQL adds the columns idmint needs, each NOT NULL DEFAULT 0, so
// uid-generator's own INSERT (its column list, ID from the auto-increment)
// keeps working beside idmint:
//   - a row whose GENERATION is 0 was inserted by uid-generator, whose
//     DisposableWorkerIdAssigner takes a new row on every start and never
//     gives one back: idmint counts it as held for good and never recycles
//     it;
//   - idmint's explicit IDs must not be handed out again by the
//     auto-increment: MySQL/MariaDB and SQLite move their counter past an
//     explicit ID by themselves; on PostgreSQL idmint advances the ID
//     column's sequence past each ID it inserts, before inserting it;
//   - MySQL turns an explicit 0 into the next auto-increment value (unless
//     sql_mode has NO_AUTO_VALUE_ON_ZERO), so on an AUTO_INCREMENT ID
//     idmint starts at worker ID 1.
type sqlAssigner struct {
	s     settings
	db    *sqldb.DB
	ownDB bool // opened by Open: Close closes it

	minID int64  // the lowest worker ID idmint inserts (1 on a MySQL AUTO_INCREMENT ID)
	seq   string // PostgreSQL: the sequence behind a serial/identity ID, if any
}

// idmintColumns are the columns idmint keeps beside uid-generator's, added
// to a table uid-generator created. Each defaults to 0, so uid-generator's
// INSERT, which names only its own columns, still works; GENERATION 0 marks
// its rows.
var idmintColumns = []string{"GENERATION", "HEARTBEAT_MS", "TTL_MS", "HORIZON_NS"}

// uid-generator's node types (WorkerNodeType): CONTAINER(1), ACTUAL(2).
const nodeTypeActual = 2

// NewSQL returns an Assigner on db, creating WORKER_NODE if it is missing.
func NewSQL(ctx context.Context, db *sqldb.DB, opts ...Option) (Assigner, error) {
	s, err := newSettings(opts)
	if err != nil {
		return nil, err
	}
	mctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := sqldb.Migrate(mctx, db, migrations, "migrations"); err != nil {
		return nil, fmt.Errorf("worker: sql: %w", err)
	}
	a := &sqlAssigner{s: s, db: db}
	if err := a.adopt(mctx); err != nil {
		return nil, err
	}
	return a, nil
}

// adopt adds idmint's columns to a WORKER_NODE table that lacks them (one
// uid-generator created: CREATE TABLE IF NOT EXISTS left it as it was) and
// learns how its ID column auto-increments.
func (a *sqlAssigner) adopt(ctx context.Context) error {
	have, err := a.columns(ctx)
	if err != nil {
		return err
	}
	for _, c := range idmintColumns {
		if have[c] {
			continue
		}
		if _, err := a.db.ExecContext(ctx, "ALTER TABLE WORKER_NODE ADD COLUMN "+c+" BIGINT NOT NULL DEFAULT 0"); err != nil {
			// Another process may have added it at the same moment.
			if again, cerr := a.columns(ctx); cerr != nil || !again[c] {
				return fmt.Errorf("worker: sql: add column %s to WORKER_NODE (a uid-generator table?): %w", c, err)
			}
		}
	}
	switch a.db.Dialect {
	case sqldb.MySQL:
		var extra sql.NullString
		err := a.db.QueryRowContext(ctx, `SELECT EXTRA FROM information_schema.COLUMNS
			WHERE TABLE_SCHEMA = DATABASE() AND UPPER(TABLE_NAME) = 'WORKER_NODE' AND UPPER(COLUMN_NAME) = 'ID'`).Scan(&extra)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("worker: sql: read WORKER_NODE.ID: %w", err)
		}
		if strings.Contains(strings.ToLower(extra.String), "auto_increment") {
			a.minID = 1
		}
	case sqldb.Postgres:
		var seq sql.NullString
		if err := a.db.QueryRowContext(ctx, "SELECT pg_get_serial_sequence('worker_node', 'id')").Scan(&seq); err != nil {
			return fmt.Errorf("worker: sql: read the sequence of WORKER_NODE.ID: %w", err)
		}
		a.seq = seq.String
	}
	return nil
}

// columns returns the upper-cased column names of WORKER_NODE.
func (a *sqlAssigner) columns(ctx context.Context) (map[string]bool, error) {
	rows, err := a.db.QueryContext(ctx, "SELECT * FROM WORKER_NODE WHERE 1 = 0")
	if err != nil {
		return nil, fmt.Errorf("worker: sql: read WORKER_NODE columns: %w", err)
	}
	defer rows.Close()
	names, err := rows.Columns()
	if err != nil {
		return nil, fmt.Errorf("worker: sql: read WORKER_NODE columns: %w", err)
	}
	out := make(map[string]bool, len(names))
	for _, n := range names {
		out[strings.ToUpper(n)] = true
	}
	return out, nil
}

func openSQL(ctx context.Context, rawURL string, opts []Option) (Assigner, error) {
	base, query, _ := strings.Cut(rawURL, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("%w: sql url query: %v", ErrBadURL, err)
	}
	ours := url.Values{}
	for _, k := range []string{"ttl", "margin", "timeout", "holder"} {
		if v, ok := q[k]; ok {
			ours[k] = v
			q.Del(k)
		}
	}
	if opts, err = queryOptions("sql", ours, opts, nil); err != nil {
		return nil, err
	}
	s, err := newSettings(opts)
	if err != nil {
		return nil, err
	}
	if len(q) > 0 {
		base += "?" + q.Encode()
	}
	octx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	db, err := sqldb.Open(octx, base)
	if err != nil {
		if errors.Is(err, sqldb.ErrURL) {
			return nil, fmt.Errorf("%w: %w", ErrBadURL, err)
		}
		return nil, fmt.Errorf("worker: sql unreachable within %v: %w", s.timeout, err)
	}
	a, err := NewSQL(ctx, db, opts...)
	if err != nil {
		db.Close()
		return nil, err
	}
	a.(*sqlAssigner).ownDB = true
	return a, nil
}

// nowMS is the database's clock in ms since the Unix epoch.
func nowMS(d sqldb.Dialect) string {
	switch d {
	case sqldb.Postgres:
		return "CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT)"
	case sqldb.MySQL:
		return "CAST(FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) AS SIGNED)"
	}
	return "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"
}

type sqlRow struct {
	id, gen, heartbeat, ttl, horizon int64
}

func (a *sqlAssigner) q(s string) string {
	return a.db.Dialect.Rebind(strings.ReplaceAll(s, "{now}", nowMS(a.db.Dialect)))
}

func (a *sqlAssigner) Acquire(ctx context.Context, max int64) (*Lease, error) {
	if max < 0 {
		return nil, fmt.Errorf("%w: max worker id %d is negative", ErrBadOption, max)
	}
	ctx, cancel := context.WithTimeout(ctx, a.s.timeout)
	defer cancel()
	var lastErr error
	for range 20 {
		sent := a.s.clock.Mono()
		l, retry, err := a.try(ctx, max, sent)
		if err == nil {
			return l, nil
		}
		if !retry || ctx.Err() != nil {
			return nil, err
		}
		lastErr = err
	}
	return nil, fmt.Errorf("worker: sql: gave up claiming a worker id after 20 conflicts: %w", lastErr)
}

// try claims the lowest free or stale ID in one transaction. retry says
// whether a conflict with a concurrent claimer made it fail.
func (a *sqlAssigner) try(ctx context.Context, max int64, sent time.Duration) (*Lease, bool, error) {
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, fmt.Errorf("worker: sql begin: %w", err)
	}
	defer tx.Rollback()
	var now int64
	if err := tx.QueryRowContext(ctx, a.q("SELECT {now}")).Scan(&now); err != nil {
		return nil, false, fmt.Errorf("worker: sql read clock: %w", err)
	}
	rows, err := tx.QueryContext(ctx, a.q("SELECT ID, GENERATION, HEARTBEAT_MS, TTL_MS, HORIZON_NS FROM WORKER_NODE WHERE ID <= ? ORDER BY ID"+a.db.Dialect.ForUpdate()), max)
	if err != nil {
		return nil, isConflict(err), fmt.Errorf("worker: sql list workers: %w", err)
	}
	var pick *sqlRow
	live, next := int64(0), a.minID // next: lowest ID with no row
	for rows.Next() {
		var r sqlRow
		if err := rows.Scan(&r.id, &r.gen, &r.heartbeat, &r.ttl, &r.horizon); err != nil {
			rows.Close()
			return nil, false, fmt.Errorf("worker: sql scan: %w", err)
		}
		if r.id == next {
			next++
		}
		switch {
		case r.gen == 0 || r.heartbeat+r.ttl >= now: // uid-generator's, or live
			live++
		case pick == nil:
			pick = &r
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, isConflict(err), fmt.Errorf("worker: sql list workers: %w", err)
	}
	host, port := splitHolder(a.s.holder)
	ttl := a.s.ttl.Milliseconds()
	var r sqlRow
	switch {
	case pick != nil && (next > max || pick.id < next):
		r = *pick
		res, err := tx.ExecContext(ctx, a.q(`UPDATE WORKER_NODE SET HOST_NAME = ?, PORT = ?, TYPE = ?, LAUNCH_DATE = CURRENT_DATE,
			MODIFIED = CURRENT_TIMESTAMP, GENERATION = ?, HEARTBEAT_MS = {now}, TTL_MS = ? WHERE ID = ? AND GENERATION = ?`),
			host, port, nodeTypeActual, r.gen+1, ttl, r.id, r.gen)
		if err != nil {
			return nil, isConflict(err), fmt.Errorf("worker: sql recycle worker id %d: %w", r.id, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return nil, true, fmt.Errorf("worker: sql recycle worker id %d: taken concurrently", r.id)
		}
		r.gen++
	case next <= max:
		r = sqlRow{id: next, gen: 1}
		if err := a.advanceSequence(ctx, tx, r.id); err != nil {
			return nil, isConflict(err), err
		}
		res, err := tx.ExecContext(ctx, a.q(`INSERT INTO WORKER_NODE (ID, HOST_NAME, PORT, TYPE, LAUNCH_DATE, MODIFIED, CREATED, GENERATION, HEARTBEAT_MS, TTL_MS, HORIZON_NS)
			VALUES (?, ?, ?, ?, CURRENT_DATE, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, 1, {now}, ?, 0)`),
			r.id, host, port, nodeTypeActual, ttl)
		if err != nil {
			return nil, isConflict(err), fmt.Errorf("worker: sql insert worker id %d: %w", r.id, err)
		}
		// MySQL reports the AUTO_INCREMENT value a row got; it differs
		// from the ID given only if the database chose its own.
		if got, err := res.LastInsertId(); a.db.Dialect == sqldb.MySQL && err == nil && got != 0 && got != r.id {
			return nil, false, fmt.Errorf("worker: sql insert worker id %d: the database stored it as %d (an AUTO_INCREMENT ID column); not using it", r.id, got)
		}
	default:
		return nil, false, &NoFreeIDError{InUse: live, Max: max}
	}
	if err := tx.Commit(); err != nil {
		return nil, isConflict(err), fmt.Errorf("worker: sql commit claim of worker id %d: %w", r.id, err)
	}
	var horizon time.Time
	if r.horizon != 0 {
		horizon = time.Unix(0, r.horizon).UTC()
	}
	return newLease(a.s, r.id, r.gen, horizon, &sqlBackend{a: a, id: r.id, gen: r.gen}, sent, true), false, nil
}

// advanceSequence moves the PostgreSQL sequence of an auto-incrementing ID
// (a uid-generator table) to at least id, before idmint inserts id, so
// uid-generator's next INSERT cannot draw it. It only ever calls nextval,
// which never moves a sequence back, even beside uid-generator's own
// nextval calls; the values it skips are gaps.
func (a *sqlAssigner) advanceSequence(ctx context.Context, tx *sql.Tx, id int64) error {
	if a.seq == "" {
		return nil
	}
	// a.seq comes from pg_get_serial_sequence, quoted as the sequence
	// functions take it; selecting from a sequence returns its state.
	q := `SELECT COUNT(nextval($1::regclass)) FROM generate_series(1,
		(SELECT CAST($2 AS BIGINT) - last_value + CASE WHEN is_called THEN 0 ELSE 1 END FROM ` + a.seq + `))`
	var n int64
	if err := tx.QueryRowContext(ctx, q, a.seq, id).Scan(&n); err != nil {
		return fmt.Errorf("worker: sql: advance %s past worker id %d: %w", a.seq, id, err)
	}
	return nil
}

func isConflict(err error) bool {
	return sqldb.IsDuplicate(err) || sqldb.IsTransient(err)
}

func splitHolder(h string) (host, port string) {
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		host, port = h[:i], h[i+1:]
	} else {
		host, port = h, strconv.Itoa(os.Getpid())
	}
	return trunc(host, 64), trunc(port, 64)
}

func trunc(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func (a *sqlAssigner) List(ctx context.Context) ([]Holder, error) {
	ctx, cancel := context.WithTimeout(ctx, a.s.timeout)
	defer cancel()
	var now int64
	if err := a.db.QueryRowContext(ctx, a.q("SELECT {now}")).Scan(&now); err != nil {
		return nil, fmt.Errorf("worker: sql read clock: %w", err)
	}
	rows, err := a.db.QueryContext(ctx, a.q("SELECT ID, HOST_NAME, PORT, GENERATION, HEARTBEAT_MS, TTL_MS, HORIZON_NS, CREATED FROM WORKER_NODE ORDER BY ID"))
	if err != nil {
		return nil, fmt.Errorf("worker: sql list workers: %w", err)
	}
	defer rows.Close()
	var out []Holder
	for rows.Next() {
		var h Holder
		var host, port string
		var hb, ttl, hz int64
		var created sql.NullTime
		if err := rows.Scan(&h.ID, &host, &port, &h.Generation, &hb, &ttl, &hz, &created); err != nil {
			return nil, fmt.Errorf("worker: sql scan: %w", err)
		}
		h.Holder = host + ":" + port
		h.Live = hb+ttl >= now || h.Generation == 0 // uid-generator's rows are held for good
		if hz != 0 {
			h.Horizon = time.Unix(0, hz).UTC()
		}
		if hb > 0 {
			h.Since = time.UnixMilli(hb).UTC() // last heartbeat
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

func (a *sqlAssigner) Close() error {
	if a.ownDB {
		return a.db.Close()
	}
	return nil
}

type sqlBackend struct {
	a   *sqlAssigner
	id  int64
	gen int64
}

func (b *sqlBackend) exec(ctx context.Context, what, q string, args ...any) error {
	res, err := b.a.db.ExecContext(ctx, b.a.q(q), args...)
	if err != nil {
		return fmt.Errorf("worker: sql %s of worker id %d: %w", what, b.id, err)
	}
	if n, err := res.RowsAffected(); err == nil && n != 1 {
		return fmt.Errorf("%w: sql row of worker id %d is no longer at generation %d (%s)", ErrLeaseLost, b.id, b.gen, what)
	}
	return nil
}

func (b *sqlBackend) keepalive(ctx context.Context) error {
	return b.exec(ctx, "heartbeat", "UPDATE WORKER_NODE SET HEARTBEAT_MS = {now}, MODIFIED = CURRENT_TIMESTAMP WHERE ID = ? AND GENERATION = ?", b.id, b.gen)
}

func (b *sqlBackend) store(ctx context.Context, until time.Time) (time.Time, error) {
	ns := until.UnixNano()
	if err := b.exec(ctx, "extend horizon", "UPDATE WORKER_NODE SET HORIZON_NS = ? WHERE ID = ? AND GENERATION = ? AND HORIZON_NS <= ?", ns, b.id, b.gen, ns); err != nil {
		return time.Time{}, err
	}
	return time.Unix(0, ns).UTC(), nil
}

func (b *sqlBackend) lower(ctx context.Context, last time.Time) (time.Time, error) {
	ns := last.UnixNano()
	if err := b.exec(ctx, "lower horizon", "UPDATE WORKER_NODE SET HORIZON_NS = ? WHERE ID = ? AND GENERATION = ?", ns, b.id, b.gen); err != nil {
		return time.Time{}, err
	}
	return time.Unix(0, ns).UTC(), nil
}

func (b *sqlBackend) release(ctx context.Context) error {
	err := b.exec(ctx, "release", "UPDATE WORKER_NODE SET HEARTBEAT_MS = 0 WHERE ID = ? AND GENERATION = ?", b.id, b.gen)
	if errors.Is(err, ErrLeaseLost) {
		return nil
	}
	return err
}
