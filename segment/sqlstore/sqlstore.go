// Package sqlstore keeps segments in Meituan Leaf's own table, leaf_alloc,
// on SQLite, PostgreSQL or MySQL/MariaDB, so a Leaf user points idmint at
// the table they already have and keeps going.
//
// The table, as Leaf publishes it (Meituan-Dianping/Leaf,
// scripts/leaf_alloc.sql):
//
//	CREATE TABLE `leaf_alloc` (
//	  `biz_tag` varchar(128) NOT NULL DEFAULT '',
//	  `max_id` bigint(20) NOT NULL DEFAULT '1',
//	  `step` int(11) NOT NULL,
//	  `description` varchar(256) DEFAULT NULL,
//	  `update_time` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
//	  PRIMARY KEY (`biz_tag`)
//	) ENGINE=InnoDB;
//
// idmint adds no columns. An allocation moves max_id exactly as Leaf's
// IDAllocMapper does — "UPDATE leaf_alloc SET max_id = max_id + step" (or
// a custom step for the dynamic step) and read back max_id and step in the
// same transaction — and the segment is [new max_id - step, new max_id),
// as in Leaf's SegmentIDGenImpl.updateSegmentFromDb. Leaf and idmint nodes
// may therefore share one table during a migration without ever issuing
// the same number.
package sqlstore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/sqldb"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrate creates the leaf_alloc table if it does not exist. It is
// idempotent and leaves an existing Leaf table untouched.
func Migrate(ctx context.Context, db *sqldb.DB) error {
	return sqldb.Migrate(ctx, db, migrations, "migrations")
}

// Store is a segment.Store on a SQL database. Safe for concurrent use by
// many goroutines and processes. Each call is bounded by the database's
// Timeout (sqldb.DB.Bound) when its context sets no earlier deadline.
type Store struct {
	db   *sqldb.DB
	owns bool

	allocStep, allocRow, selectRow string // rebound queries
}

var _ segment.Store = (*Store)(nil)

// Open opens the database at url (see sqldb.Open), applies the
// migrations, and returns a Store that closes the database on Close.
func Open(ctx context.Context, url string) (*Store, error) {
	db, err := sqldb.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	if err := Migrate(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	s := New(db)
	s.owns = true
	return s, nil
}

// New returns a Store on db, which must already be migrated. Close does
// not close db.
func New(db *sqldb.DB) *Store {
	d := db.Dialect
	return &Store{
		db: db,
		allocStep: d.Rebind("UPDATE leaf_alloc SET max_id = max_id + ?, update_time = CURRENT_TIMESTAMP" +
			" WHERE biz_tag = ? AND step > 0 AND max_id <= ? RETURNING max_id, step"),
		allocRow: d.Rebind("UPDATE leaf_alloc SET max_id = max_id + step, update_time = CURRENT_TIMESTAMP" +
			" WHERE biz_tag = ? AND step > 0 AND max_id <= 9223372036854775807 - step RETURNING max_id, step"),
		selectRow: d.Rebind("SELECT biz_tag, max_id, step, description, update_time FROM leaf_alloc WHERE biz_tag = ?"),
	}
}

// DB returns the database the Store uses.
func (s *Store) DB() *sqldb.DB { return s.db }

// Close closes the database if Open opened it.
func (s *Store) Close() error {
	if s.owns {
		return s.db.Close()
	}
	return nil
}

// Allocate moves max_id up in one statement (PostgreSQL, SQLite: UPDATE
// ... RETURNING) or one transaction holding the row lock (MySQL: SELECT
// ... FOR UPDATE, then UPDATE). A row whose step column is not positive is
// refused with ErrBadStep rather than leased as an empty range.
func (s *Store) Allocate(ctx context.Context, key string, step int64) (segment.Segment, error) {
	if err := segment.ValidateAllocate(key, step); err != nil {
		return segment.Segment{}, err
	}
	ctx, cancel := s.db.Bound(ctx)
	defer cancel()
	if s.db.Dialect == sqldb.MySQL {
		return s.allocateTx(ctx, key, step)
	}
	var row *sql.Row
	if step > 0 {
		row = s.db.QueryRowContext(ctx, s.allocStep, step, key, int64(math.MaxInt64)-step)
	} else {
		row = s.db.QueryRowContext(ctx, s.allocRow, key)
	}
	var maxID, rowStep int64
	err := row.Scan(&maxID, &rowStep)
	if errors.Is(err, sql.ErrNoRows) {
		return segment.Segment{}, s.whyNot(ctx, s.db.DB, key, step)
	}
	if err != nil {
		return segment.Segment{}, fmt.Errorf("sqlstore: allocate %q: %w", key, err)
	}
	used := step
	if used == 0 {
		used = rowStep
	}
	return segment.Segment{Start: maxID - used, End: maxID, Step: rowStep}, nil
}

func (s *Store) allocateTx(ctx context.Context, key string, step int64) (segment.Segment, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return segment.Segment{}, fmt.Errorf("sqlstore: allocate %q: begin: %w", key, err)
	}
	defer tx.Rollback()
	var maxID, rowStep int64
	err = tx.QueryRowContext(ctx, "SELECT max_id, step FROM leaf_alloc WHERE biz_tag = ? FOR UPDATE", key).Scan(&maxID, &rowStep)
	if errors.Is(err, sql.ErrNoRows) {
		return segment.Segment{}, fmt.Errorf("%w: %q", segment.ErrUnknownKey, key)
	}
	if err != nil {
		return segment.Segment{}, fmt.Errorf("sqlstore: allocate %q: %w", key, err)
	}
	used := step
	if used == 0 {
		used = rowStep
	}
	if rowStep <= 0 {
		return segment.Segment{}, fmt.Errorf("%w: key %q: step column is %d", segment.ErrBadStep, key, rowStep)
	}
	if !segment.CanAdvance(maxID, used) {
		return segment.Segment{}, segment.OverflowError(key, maxID, used)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE leaf_alloc SET max_id = ?, update_time = CURRENT_TIMESTAMP WHERE biz_tag = ?", maxID+used, key); err != nil {
		return segment.Segment{}, fmt.Errorf("sqlstore: allocate %q: %w", key, err)
	}
	if err := tx.Commit(); err != nil {
		return segment.Segment{}, fmt.Errorf("sqlstore: allocate %q: commit: %w", key, err)
	}
	return segment.Segment{Start: maxID, End: maxID + used, Step: rowStep}, nil
}

var _ segment.BatchAllocator = (*Store)(nil)

// allocBatch is how many keys one statement of AllocateMany carries on
// MySQL (three parameters each, well under the placeholder limit).
const allocBatch = 1000

// pgAllocMany leases a segment of every key in two arrays, $1 the keys and
// $2 their steps (0: the row's step), in one statement. The rows are
// locked in key order first (l), so two nodes leasing overlapping sets of
// keys queue behind each other instead of deadlocking; the UPDATE touches
// only rows l has locked. The arrays keep one statement text for any
// number of keys (one prepared statement in pgx's cache). l joins v rather
// than testing biz_tag = ANY($1): that filter compared every row of the
// table with every key (80 ms for 1,000 keys of 10,000, 20 ms joined).
// l carries each key's step and spelling as asked, so the UPDATE joins l
// alone: joined to v as well, the planner (which guesses 10 rows for
// unnest) compared every row of l with every key of v, 250,000
// comparisons for 500 keys (72 ms; 6 ms now, EXPLAIN ANALYZE).
const pgAllocMany = `WITH v AS (SELECT * FROM unnest($1::text[], $2::bigint[]) AS v (biz_tag, step)),
l AS (SELECT a.biz_tag, v.biz_tag AS asked, v.step FROM leaf_alloc a JOIN v ON a.biz_tag = v.biz_tag ORDER BY a.biz_tag FOR UPDATE OF a)
UPDATE leaf_alloc a SET max_id = a.max_id + CASE WHEN l.step > 0 THEN l.step ELSE a.step END, update_time = CURRENT_TIMESTAMP
FROM l
WHERE a.biz_tag = l.biz_tag AND a.step > 0 AND a.max_id <= 9223372036854775807 - CASE WHEN l.step > 0 THEN l.step ELSE a.step END
RETURNING l.asked, a.max_id, a.step`

// AllocateMany leases one segment of each requested key, each exactly as
// Allocate would, in one round trip for the lot: on PostgreSQL one UPDATE
// ... FROM ... RETURNING; on MySQL/MariaDB one transaction that locks the
// rows in key order (SELECT ... FOR UPDATE) and moves them with one
// UPDATE ... CASE; on SQLite one transaction of UPDATE ... RETURNING
// statements. Either way the batch costs one commit. A key the batch
// statement did not move (unknown, at its end, a bad step column, or one
// the database's collation matches to a row of another spelling) is then
// allocated on its own, so its Allocation carries Allocate's own answer.
func (s *Store) AllocateMany(ctx context.Context, reqs []segment.AllocateRequest) ([]segment.Allocation, error) {
	out, err := segment.CheckBatch(reqs)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.db.Bound(ctx)
	defer cancel()
	var todo []int // requests with a valid key and step
	for i := range reqs {
		if out[i].Err == nil {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return out, nil
	}
	var done []bool
	switch s.db.Dialect {
	case sqldb.Postgres:
		done, err = s.allocManyPostgres(ctx, reqs, todo, out)
	case sqldb.MySQL:
		done = make([]bool, len(reqs))
		for start := 0; start < len(todo) && err == nil; start += allocBatch {
			err = s.allocManyMySQL(ctx, reqs, todo[start:min(start+allocBatch, len(todo))], out, done)
		}
	default:
		done, err = s.allocManySQLite(ctx, reqs, todo, out)
	}
	if err != nil {
		return nil, err
	}
	for _, i := range todo {
		if !done[i] {
			out[i].Segment, out[i].Err = s.Allocate(ctx, reqs[i].Key, reqs[i].Step)
		}
	}
	return out, nil
}

// used is the length of a segment asked with step on a row with rowStep.
func used(step, rowStep int64) int64 {
	if step > 0 {
		return step
	}
	return rowStep
}

func (s *Store) allocManyPostgres(ctx context.Context, reqs []segment.AllocateRequest, todo []int, out []segment.Allocation) ([]bool, error) {
	keys := make([]string, len(todo))
	steps := make([]int64, len(todo))
	at := make(map[string]int, len(todo))
	for j, i := range todo {
		keys[j], steps[j] = reqs[i].Key, reqs[i].Step
		at[reqs[i].Key] = i
	}
	rows, err := s.db.QueryContext(ctx, pgAllocMany, keys, steps)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: allocate %d keys: %w", len(todo), err)
	}
	defer rows.Close()
	done := make([]bool, len(reqs))
	for rows.Next() {
		var key string
		var maxID, rowStep int64
		if err := rows.Scan(&key, &maxID, &rowStep); err != nil {
			return nil, fmt.Errorf("sqlstore: allocate %d keys: %w", len(todo), err)
		}
		i, ok := at[key]
		if !ok || done[i] {
			return nil, fmt.Errorf("sqlstore: allocate %d keys: the database answered key %q, not asked for once", len(todo), key)
		}
		n := used(reqs[i].Step, rowStep)
		out[i].Segment = segment.Segment{Start: maxID - n, End: maxID, Step: rowStep}
		done[i] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: allocate %d keys: %w", len(todo), err)
	}
	return done, nil
}

// allocManyMySQL leases the keys of chunk in one transaction. A request is
// moved here only when a row spelled exactly as its key comes back: a
// case- or accent-insensitive collation may match a key to a row of
// another spelling, and two such requests must not both be computed from
// one max_id.
func (s *Store) allocManyMySQL(ctx context.Context, reqs []segment.AllocateRequest, chunk []int, out []segment.Allocation, done []bool) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlstore: allocate %d keys: begin: %w", len(chunk), err)
	}
	defer tx.Rollback()
	marks := strings.Repeat(", ?", len(chunk))[2:]
	args := make([]any, len(chunk))
	at := make(map[string]int, len(chunk))
	for j, i := range chunk {
		args[j] = reqs[i].Key
		at[reqs[i].Key] = i
	}
	rows, err := tx.QueryContext(ctx, "SELECT biz_tag, max_id, step FROM leaf_alloc FORCE INDEX (PRIMARY) WHERE biz_tag IN ("+marks+") ORDER BY biz_tag FOR UPDATE", args...)
	if err != nil {
		return fmt.Errorf("sqlstore: allocate %d keys: %w", len(chunk), err)
	}
	var q strings.Builder
	var caseArgs, inArgs []any
	// FORCE INDEX: with many keys in a small table the optimizer scans the
	// whole table, and a scan under REPEATABLE READ locks every row it
	// passes, other batches' rows too (found as deadlocks).
	q.WriteString("UPDATE leaf_alloc FORCE INDEX (PRIMARY) SET max_id = CASE biz_tag")
	for rows.Next() {
		var key string
		var maxID, rowStep int64
		if err := rows.Scan(&key, &maxID, &rowStep); err != nil {
			rows.Close()
			return fmt.Errorf("sqlstore: allocate %d keys: %w", len(chunk), err)
		}
		i, ok := at[key]
		if !ok || rowStep <= 0 || !segment.CanAdvance(maxID, used(reqs[i].Step, rowStep)) {
			continue // another spelling, a bad step, the end: Allocate says which
		}
		n := used(reqs[i].Step, rowStep)
		out[i].Segment = segment.Segment{Start: maxID, End: maxID + n, Step: rowStep}
		done[i] = true
		q.WriteString(" WHEN ? THEN ?")
		caseArgs = append(caseArgs, key, maxID+n)
		inArgs = append(inArgs, key)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlstore: allocate %d keys: %w", len(chunk), err)
	}
	if len(inArgs) == 0 {
		return nil
	}
	q.WriteString(" ELSE max_id END, update_time = CURRENT_TIMESTAMP WHERE biz_tag IN (")
	q.WriteString(strings.Repeat(", ?", len(inArgs))[2:])
	q.WriteString(")")
	res, err := tx.ExecContext(ctx, q.String(), append(caseArgs, inArgs...)...)
	if err == nil {
		var n int64
		if n, err = res.RowsAffected(); err == nil && n != int64(len(inArgs)) {
			err = fmt.Errorf("%d rows changed, want %d", n, len(inArgs))
		}
	}
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		for _, i := range chunk {
			done[i] = false
			out[i].Segment = segment.Segment{}
		}
		return fmt.Errorf("sqlstore: allocate %d keys: %w", len(chunk), err)
	}
	return nil
}

// allocManySQLite moves the keys in one immediate transaction, one UPDATE
// ... WHERE biz_tag IN (...) RETURNING per step asked (first loads all
// ask the row's step) and per allocBatch keys: a statement per key cost
// 50 µs of CPU each in the embedded engine, more than the commit (an
// fsync) the batch pays once. One statement moves each row at most once
// and asks one step of all its rows, so a row two requests match (a
// NOCASE column) still gets one segment, handed to the request spelled as
// the row: the other is allocated on its own afterwards.
func (s *Store) allocManySQLite(ctx context.Context, reqs []segment.AllocateRequest, todo []int, out []segment.Allocation) ([]bool, error) {
	byStep := map[int64][]int{}
	var steps []int64
	for _, i := range todo {
		st := reqs[i].Step
		if byStep[st] == nil {
			steps = append(steps, st)
		}
		byStep[st] = append(byStep[st], i)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: allocate %d keys: begin: %w", len(todo), err)
	}
	defer tx.Rollback()
	done := make([]bool, len(reqs))
	for _, st := range steps {
		group := byStep[st]
		for start := 0; start < len(group); start += allocBatch {
			chunk := group[start:min(start+allocBatch, len(group))]
			args := make([]any, 0, len(chunk)+2)
			var q strings.Builder
			if st > 0 {
				q.WriteString("UPDATE leaf_alloc SET max_id = max_id + ?, update_time = CURRENT_TIMESTAMP WHERE step > 0 AND max_id <= ? AND biz_tag IN (")
				args = append(args, st, int64(math.MaxInt64)-st)
			} else {
				q.WriteString("UPDATE leaf_alloc SET max_id = max_id + step, update_time = CURRENT_TIMESTAMP WHERE step > 0 AND max_id <= 9223372036854775807 - step AND biz_tag IN (")
			}
			q.WriteString(strings.Repeat(", ?", len(chunk))[2:])
			q.WriteString(") RETURNING biz_tag, max_id, step")
			at := make(map[string]int, len(chunk))
			for _, i := range chunk {
				args = append(args, reqs[i].Key)
				at[reqs[i].Key] = i
			}
			rows, err := tx.QueryContext(ctx, q.String(), args...)
			if err != nil {
				return nil, fmt.Errorf("sqlstore: allocate %d keys: %w", len(todo), err)
			}
			for rows.Next() {
				var key string
				var maxID, rowStep int64
				if err := rows.Scan(&key, &maxID, &rowStep); err != nil {
					rows.Close()
					return nil, fmt.Errorf("sqlstore: allocate %d keys: %w", len(todo), err)
				}
				i, ok := at[key]
				if !ok || done[i] {
					continue // a row of another spelling: a gap; Allocate serves the request
				}
				n := used(st, rowStep)
				out[i].Segment = segment.Segment{Start: maxID - n, End: maxID, Step: rowStep}
				done[i] = true
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return nil, fmt.Errorf("sqlstore: allocate %d keys: %w", len(todo), err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("sqlstore: allocate %d keys: commit: %w", len(todo), err)
	}
	return done, nil
}

// whyNot explains an UPDATE that matched no row.
func (s *Store) whyNot(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, key string, step int64) error {
	var maxID, rowStep int64
	err := q.QueryRowContext(ctx, s.db.Dialect.Rebind("SELECT max_id, step FROM leaf_alloc WHERE biz_tag = ?"), key).Scan(&maxID, &rowStep)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w: %q", segment.ErrUnknownKey, key)
	case err != nil:
		return fmt.Errorf("sqlstore: allocate %q: %w", key, err)
	case rowStep <= 0:
		return fmt.Errorf("%w: key %q: step column is %d", segment.ErrBadStep, key, rowStep)
	}
	if step == 0 {
		step = rowStep
	}
	return segment.OverflowError(key, maxID, step)
}

// Raise moves max_id up to atLeast in one transaction holding the row
// lock, keeping the row's step. Leaf nodes sharing the table see the new
// max_id at their next allocation.
func (s *Store) Raise(ctx context.Context, key string, atLeast int64) (int64, error) {
	if err := segment.ValidateKey(key); err != nil {
		return 0, err
	}
	if atLeast < 0 {
		return 0, fmt.Errorf("%w: key %q: raise to %d", segment.ErrBadMaxID, key, atLeast)
	}
	ctx, cancel := s.db.Bound(ctx)
	defer cancel()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("sqlstore: raise %q: begin: %w", key, err)
	}
	defer tx.Rollback()
	var before int64
	err = tx.QueryRowContext(ctx, s.db.Dialect.Rebind("SELECT max_id FROM leaf_alloc WHERE biz_tag = ?"+s.db.Dialect.ForUpdate()), key).Scan(&before)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("%w: %q", segment.ErrUnknownKey, key)
	}
	if err != nil {
		return 0, fmt.Errorf("sqlstore: raise %q: %w", key, err)
	}
	if before >= atLeast {
		return before, nil
	}
	if _, err := tx.ExecContext(ctx, s.db.Dialect.Rebind("UPDATE leaf_alloc SET max_id = ?, update_time = CURRENT_TIMESTAMP WHERE biz_tag = ? AND max_id < ?"), atLeast, key, atLeast); err != nil {
		return 0, fmt.Errorf("sqlstore: raise %q to %d: %w", key, atLeast, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("sqlstore: raise %q to %d: commit: %w", key, atLeast, err)
	}
	return before, nil
}

// Identity names the database server (sqldb.Identity): a change means a
// failover or a restore happened behind the store's URL.
func (s *Store) Identity(ctx context.Context) (string, error) {
	ctx, cancel := s.db.Bound(ctx)
	defer cancel()
	return sqldb.Identity(ctx, s.db.Dialect, s.db.DB)
}

// Create inserts a row.
func (s *Store) Create(ctx context.Context, k segment.KeyInfo) error {
	k, err := segment.ValidateKeyInfo(k)
	if err != nil {
		return err
	}
	var desc any
	if k.Description != "" {
		desc = k.Description
	}
	ctx, cancel := s.db.Bound(ctx)
	defer cancel()
	_, err = s.db.ExecContext(ctx, s.db.Dialect.Rebind(
		"INSERT INTO leaf_alloc (biz_tag, max_id, step, description, update_time) VALUES (?, ?, ?, ?, CURRENT_TIMESTAMP)"),
		k.Key, k.MaxID, k.Step, desc)
	if sqldb.IsDuplicate(err) {
		return fmt.Errorf("%w: %q", segment.ErrKeyExists, k.Key)
	}
	if err != nil {
		return fmt.Errorf("sqlstore: create %q: %w", k.Key, err)
	}
	return nil
}

// createBatch is how many rows one INSERT of CreateMissing carries (5
// parameters each, well under every dialect's limit); createTx is how many
// rows one of its transactions carries.
const (
	createBatch = 200
	createTx    = 1000
)

// CreateMissing inserts the rows of keys that do not exist, in
// transactions of 1,000 rows of multi-row INSERTs that skip existing keys.
// Each transaction gets its own DB.Timeout, so the time allowed grows with
// the number of keys: 100,000 rows in one transaction under one 5 s
// deadline did not finish on a loaded machine. A failure leaves the
// transactions committed before it.
func (s *Store) CreateMissing(ctx context.Context, keys []segment.KeyInfo) error {
	valid, err := segment.ValidateKeyInfos(keys)
	if err != nil {
		return err
	}
	for start := 0; start < len(valid); start += createTx {
		if err := s.createTx(ctx, valid[start:min(start+createTx, len(valid))]); err != nil {
			return fmt.Errorf("sqlstore: create %d keys: %w", len(valid), err)
		}
	}
	return nil
}

// createTx inserts the rows of valid that do not exist, in one transaction.
func (s *Store) createTx(ctx context.Context, valid []segment.KeyInfo) error {
	ctx, cancel := s.db.Bound(ctx)
	defer cancel()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for start := 0; start < len(valid); start += createBatch {
		batch := valid[start:min(start+createBatch, len(valid))]
		var q strings.Builder
		if s.db.Dialect == sqldb.SQLite {
			q.WriteString("INSERT OR IGNORE")
		} else {
			q.WriteString("INSERT")
		}
		q.WriteString(" INTO leaf_alloc (biz_tag, max_id, step, description, update_time) VALUES ")
		args := make([]any, 0, 4*len(batch))
		for i, k := range batch {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?, CURRENT_TIMESTAMP)")
			var desc any
			if k.Description != "" {
				desc = k.Description
			}
			args = append(args, k.Key, k.MaxID, k.Step, desc)
		}
		switch s.db.Dialect {
		case sqldb.Postgres:
			q.WriteString(" ON CONFLICT (biz_tag) DO NOTHING")
		case sqldb.MySQL:
			// A no-op update: INSERT IGNORE would also turn other errors
			// into warnings.
			q.WriteString(" ON DUPLICATE KEY UPDATE biz_tag = biz_tag")
		}
		if _, err := tx.ExecContext(ctx, s.db.Dialect.Rebind(q.String()), args...); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func scanInfo(sc interface{ Scan(...any) error }) (segment.KeyInfo, error) {
	var k segment.KeyInfo
	var desc sql.NullString
	var t sql.NullTime
	if err := sc.Scan(&k.Key, &k.MaxID, &k.Step, &desc, &t); err != nil {
		return k, err
	}
	k.Description = desc.String
	if t.Valid {
		k.UpdateTime = t.Time.UTC()
	}
	return k, nil
}

// Get reads one row.
func (s *Store) Get(ctx context.Context, key string) (segment.KeyInfo, error) {
	if err := segment.ValidateKey(key); err != nil {
		return segment.KeyInfo{}, err
	}
	ctx, cancel := s.db.Bound(ctx)
	defer cancel()
	k, err := scanInfo(s.db.QueryRowContext(ctx, s.selectRow, key))
	if errors.Is(err, sql.ErrNoRows) {
		return k, fmt.Errorf("%w: %q", segment.ErrUnknownKey, key)
	}
	if err != nil {
		return k, fmt.Errorf("sqlstore: get %q: %w", key, err)
	}
	return k, nil
}

// List reads every row, ordered by biz_tag.
func (s *Store) List(ctx context.Context) ([]segment.KeyInfo, error) {
	ctx, cancel := s.db.Bound(ctx)
	defer cancel()
	rows, err := s.db.QueryContext(ctx, "SELECT biz_tag, max_id, step, description, update_time FROM leaf_alloc ORDER BY biz_tag")
	if err != nil {
		return nil, fmt.Errorf("sqlstore: list: %w", err)
	}
	defer rows.Close()
	var out []segment.KeyInfo
	for rows.Next() {
		k, err := scanInfo(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: list: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: list: %w", err)
	}
	return out, nil
}

// SetStep changes the step column.
func (s *Store) SetStep(ctx context.Context, key string, step int64) error {
	if err := segment.ValidateKey(key); err != nil {
		return err
	}
	if err := segment.ValidateStep(step); err != nil {
		return fmt.Errorf("key %q: %w", key, err)
	}
	ctx, cancel := s.db.Bound(ctx)
	defer cancel()
	res, err := s.db.ExecContext(ctx, s.db.Dialect.Rebind("UPDATE leaf_alloc SET step = ?, update_time = CURRENT_TIMESTAMP WHERE biz_tag = ?"), step, key)
	return s.affected(ctx, "set step of", key, res, err)
}

// Delete removes the row.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := segment.ValidateKey(key); err != nil {
		return err
	}
	ctx, cancel := s.db.Bound(ctx)
	defer cancel()
	res, err := s.db.ExecContext(ctx, s.db.Dialect.Rebind("DELETE FROM leaf_alloc WHERE biz_tag = ?"), key)
	return s.affected(ctx, "delete", key, res, err)
}

// affected turns "no row changed" into ErrUnknownKey — after checking,
// since MySQL counts only rows whose values changed.
func (s *Store) affected(ctx context.Context, op, key string, res sql.Result, err error) error {
	if err != nil {
		return fmt.Errorf("sqlstore: %s %q: %w", op, key, err)
	}
	if n, err := res.RowsAffected(); err == nil && n > 0 {
		return nil
	}
	if _, err := s.Get(ctx, key); err != nil {
		return err
	}
	return nil
}
