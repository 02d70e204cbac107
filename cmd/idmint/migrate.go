package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/segment/stores"
	"github.com/idmint/idmint/sqldb"
	"github.com/idmint/idmint/witness"
)

func init() {
	register(command{name: "migrate", summary: "create or upgrade a segment store's tables (Leaf's leaf_alloc); with --key and a floor source, start a key above the IDs that exist already", run: runMigrate})
}

type migrateFlags struct {
	store, key, dataDir, witness string
	floor                        string
	floorSQL, floorQuery         string
	floorLeaf, floorFile         string
	step                         int64
}

func runMigrate(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "migrate", "[--store URL] [--key NAME (--floor N | --floor-sql URL --floor-query SQL | --floor-leaf URL | --floor-file PATH) [--data-dir DIR] [--witness URL]]")
	var f migrateFlags
	fs.StringVar(&f.store, "store", defaultStore, "segment store: sqlite:///path, postgres://..., mysql://..., redis://...")
	fs.StringVar(&f.key, "key", "", "the segment key to start above the IDs that exist already (with one floor source)")
	fs.StringVar(&f.floor, "floor", "", "the largest ID that exists already, as a number")
	fs.StringVar(&f.floorSQL, "floor-sql", "", "a database holding the IDs that exist (postgres://, mysql://, sqlite://), with --floor-query")
	fs.StringVar(&f.floorQuery, "floor-query", "", "a query answering one whole number, the largest ID that exists, e.g. 'SELECT MAX(id) FROM orders' (NULL: an empty table)")
	fs.StringVar(&f.floorLeaf, "floor-leaf", "", "Leaf's database: the floor is max_id of the leaf_alloc row whose biz_tag is --key (Leaf never issued an ID at or above it)")
	fs.StringVar(&f.floorFile, "floor-file", "", "a file of IDs, one whole number a line (blank lines skipped): the floor is the largest")
	fs.StringVar(&f.dataDir, "data-dir", "idmint-data", "the data directory of the node that will serve the key (its witness marks are raised too)")
	fs.StringVar(&f.witness, "witness", "", "the cluster witness the nodes use (etcd://, zk://, postgres://, mysql://), raised too; the serve config's witness:, or its etcd/zk coordinator")
	fs.Int64Var(&f.step, "step", 0, "the step of the key's row when it has to be created (default 1000)")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if err := ensureSQLiteDir(f.store); err != nil {
		return err
	}
	sources := 0
	for _, v := range []string{f.floor, f.floorSQL, f.floorLeaf, f.floorFile} {
		if v != "" {
			sources++
		}
	}
	switch {
	case sources > 1:
		return usagef("give one floor source: --floor, --floor-sql, --floor-leaf or --floor-file")
	case sources == 1 && f.key == "":
		return usagef("flag --key: a floor needs the key it applies to")
	case sources == 0 && f.key != "":
		return usagef("flag --key %q: name where its floor comes from: --floor N, --floor-sql URL --floor-query SQL, --floor-leaf URL or --floor-file PATH", f.key)
	case (f.floorSQL == "") != (f.floorQuery == ""):
		return usagef("--floor-sql and --floor-query go together")
	}
	if f.key != "" {
		if err := segment.ValidateKey(f.key); err != nil {
			return usagef("flag --key %q: %v", f.key, err)
		}
	}
	if f.step != 0 {
		if err := segment.ValidateStep(f.step); err != nil {
			return usagef("flag --step %d: %v", f.step, err)
		}
	}
	if err := stores.Migrate(ctx, f.store); err != nil {
		if errors.Is(err, stores.ErrScheme) || errors.Is(err, sqldb.ErrURL) {
			return usagef("flag --store: %v", err)
		}
		return fmt.Errorf("flag --store %s: %w", sqldb.Redact(f.store), err)
	}
	fmt.Fprintf(e.stdout, "migrated %s\n", sqldb.Redact(f.store))
	if sources == 0 {
		return nil
	}
	floor, from, err := readFloor(ctx, f)
	if err != nil {
		return err
	}
	return raiseFloor(ctx, e, f, floor, from)
}

// readFloor finds the largest ID that exists already, and says where from.
func readFloor(ctx context.Context, f migrateFlags) (int64, string, error) {
	switch {
	case f.floor != "":
		n, err := strconv.ParseInt(strings.ReplaceAll(f.floor, "_", ""), 10, 64)
		if err != nil || n < 0 {
			return 0, "", usagef("flag --floor %q: not a whole number from 0 to %d", f.floor, int64(1<<63-1))
		}
		return n, "--floor", nil
	case f.floorFile != "":
		return floorFromFile(f.floorFile)
	case f.floorLeaf != "":
		n, err := floorFromSQL(ctx, f.floorLeaf, "SELECT max_id FROM leaf_alloc WHERE biz_tag = ?", f.key)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, "", fmt.Errorf("flag --floor-leaf %s: leaf_alloc has no row with biz_tag %q", sqldb.Redact(f.floorLeaf), f.key)
		}
		if err != nil {
			return 0, "", fmt.Errorf("flag --floor-leaf %s: %w", sqldb.Redact(f.floorLeaf), err)
		}
		return n, fmt.Sprintf("leaf_alloc.max_id of %q in %s", f.key, sqldb.Redact(f.floorLeaf)), nil
	default:
		n, err := floorFromSQL(ctx, f.floorSQL, f.floorQuery)
		if err != nil {
			return 0, "", fmt.Errorf("flag --floor-query %q on %s: %w", f.floorQuery, sqldb.Redact(f.floorSQL), err)
		}
		return n, fmt.Sprintf("%q on %s", f.floorQuery, sqldb.Redact(f.floorSQL)), nil
	}
}

// floorFromSQL runs a query that answers one whole number (NULL, an empty
// table, is 0) in a read-only transaction, so a mistaken query changes
// nothing.
func floorFromSQL(ctx context.Context, url, query string, args ...any) (int64, error) {
	db, err := sqldb.Open(ctx, url)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	if len(args) > 0 {
		query = db.Dialect.Rebind(query)
	}
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: db.Dialect != sqldb.SQLite})
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return 0, err
	}
	if len(cols) != 1 {
		return 0, fmt.Errorf("the query answers %d columns; it must answer one, the largest ID", len(cols))
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return 0, err
		}
		return 0, sql.ErrNoRows
	}
	var v sql.NullString
	if err := rows.Scan(&v); err != nil {
		return 0, err
	}
	if rows.Next() {
		return 0, fmt.Errorf("the query answers more than one row; it must answer one, the largest ID (SELECT MAX(id) ...)")
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if !v.Valid {
		return 0, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v.String), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("the query answered %q, not a whole number from 0 up", v.String)
	}
	return n, nil
}

// floorFromFile returns the largest ID in a file of one ID a line.
func floorFromFile(path string) (int64, string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return 0, "", fmt.Errorf("flag --floor-file: %w", err)
	}
	defer fh.Close()
	var top int64
	n := 0
	sc := bufio.NewScanner(fh)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" {
			continue
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			return 0, "", fmt.Errorf("flag --floor-file %s: line %d: %q is not a whole number from 0 up", path, line, s)
		}
		top = max(top, v)
		n++
	}
	if err := sc.Err(); err != nil {
		return 0, "", fmt.Errorf("flag --floor-file %s: %w", path, err)
	}
	return top, fmt.Sprintf("the largest of %d IDs in %s", n, path), nil
}

// raiseFloor raises the key's row and the witness marks above floor and
// says what to keep in the config.
func raiseFloor(ctx context.Context, e *env, f migrateFlags, floor int64, from string) error {
	if err := os.MkdirAll(f.dataDir, 0o700); err != nil {
		return err
	}
	local, err := witness.OpenFile(f.dataDir)
	if err != nil {
		return fmt.Errorf("flag --data-dir %s: %w", f.dataDir, err)
	}
	var w witness.Witness = local
	names := []string{local.String()}
	if f.witness != "" {
		cl, err := witness.Open(ctx, f.witness, 0)
		if err != nil {
			local.Close()
			return fmt.Errorf("flag --witness %s: %w", sqldb.Redact(f.witness), err)
		}
		w = witness.Multi{local, cl}
		names = append(names, cl.String())
	}
	a, err := stores.OpenAllocator(ctx, f.store, segment.Options{Witness: w})
	if err != nil {
		w.Close()
		return fmt.Errorf("flag --store %s: %w", sqldb.Redact(f.store), err)
	}
	defer w.Close()
	defer a.Close()
	step := f.step
	if step == 0 {
		step = 1000
	}
	if err := a.CreateKey(ctx, segment.KeyInfo{Key: f.key, Step: step}); err != nil && !errors.Is(err, segment.ErrKeyExists) {
		return fmt.Errorf("key %q: create its row: %w", f.key, err)
	}
	before, err := a.RaiseFloor(ctx, f.key, floor)
	if err != nil {
		return err
	}
	after := max(before, floor+1)
	fmt.Fprintf(e.stdout, "key %s: the largest ID that exists is %d (%s)\n", f.key, floor, from)
	if before > floor {
		fmt.Fprintf(e.stdout, "key %s: the store was above it already (next IDs from %d); witness marks raised to at least %d\n", f.key, before, floor+1)
	} else {
		fmt.Fprintf(e.stdout, "key %s: store raised from %d to %d; witness marks raised to %d\n", f.key, before, after, floor+1)
	}
	fmt.Fprintf(e.stdout, "witness: %s\n", strings.Join(names, "; "))
	fmt.Fprintf(e.stdout, "keep the floor in every node's config, so a node refuses the key until its store and witness hold it:\n  keys:\n    %s:\n      strategy: segment\n      options: {floor: \"%d\"}\n", f.key, floor)
	if abs, err := filepath.Abs(f.dataDir); err == nil && f.dataDir == "idmint-data" {
		fmt.Fprintf(e.stdout, "(the node witness raised is %s: run this where the node keeps its data, or pass --data-dir)\n", abs)
	}
	return nil
}
