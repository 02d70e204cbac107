package ticket

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/idmint/idmint/sqldb"
)

// scripted is a database server whose answers a test chooses: a query
// containing one of its keys is answered that key's row; every other
// statement succeeds. It plays a server whose settings cannot be set up
// on the shared test servers: one that keeps its own auto_increment
// settings after SET SESSION (Galera's wsrep_auto_increment_control), or
// does not flush commits.
type scripted map[string][]driver.Value

func (s scripted) Connect(context.Context) (driver.Conn, error) { return scriptedConn{s}, nil }
func (s scripted) Driver() driver.Driver                        { return scriptedDriver{} }

type scriptedDriver struct{}

func (scriptedDriver) Open(string) (driver.Conn, error) {
	return nil, errors.New("scripted: use the connector")
}

type scriptedConn struct{ s scripted }

func (scriptedConn) Prepare(string) (driver.Stmt, error) {
	return nil, errors.New("scripted: no prepare")
}
func (scriptedConn) Close() error              { return nil }
func (scriptedConn) Begin() (driver.Tx, error) { return nil, errors.New("scripted: no transactions") }

func (scriptedConn) ExecContext(context.Context, string, []driver.NamedValue) (driver.Result, error) {
	return driver.RowsAffected(0), nil
}

func (c scriptedConn) QueryContext(_ context.Context, q string, _ []driver.NamedValue) (driver.Rows, error) {
	for k, row := range c.s {
		if strings.Contains(q, k) {
			return &scriptedRows{row: row}, nil
		}
	}
	return nil, errors.New("scripted: no answer for " + q)
}

type scriptedRows struct {
	row  []driver.Value
	done bool
}

func (r *scriptedRows) Columns() []string {
	cols := make([]string, len(r.row))
	for i := range cols {
		cols[i] = "c"
	}
	return cols
}

func (r *scriptedRows) Close() error { return nil }

func (r *scriptedRows) Next(dst []driver.Value) error {
	if r.done {
		return io.EOF
	}
	r.done = true
	copy(dst, r.row)
	return nil
}

// openScripted opens a ticket source of dialect d on the scripted server
// s, for a Config of step 2 and the server at offset 2.
func openScripted(t *testing.T, d sqldb.Dialect, s scripted) error {
	t.Helper()
	cfg, err := Config{Servers: []Server{{URL: "a"}, {URL: "b"}}}.validate()
	if err != nil {
		t.Fatal(err)
	}
	db := &sqldb.DB{DB: sql.OpenDB(s), Dialect: d, URL: "scripted"}
	defer db.Close()
	var src source
	if d == sqldb.MySQL {
		src, err = newMySQL(context.Background(), db, cfg, 2, nil)
	} else {
		src, err = newPostgres(context.Background(), db, cfg, 2, nil)
	}
	if err == nil {
		src.close()
	}
	return err
}

// TestServerSettingsChecked: a ticket server is used only when its
// settings give the IDs of the residue class the Config says, and keep
// them across a crash. A MySQL server that keeps its own
// auto_increment_increment or auto_increment_offset after SET SESSION,
// or does not flush each commit (innodb_flush_log_at_trx_commit), or a
// table on an engine other than InnoDB; a PostgreSQL sequence of another
// increment, start or with CYCLE, or a server with fsync off: each is
// refused when the source opens, with an error naming the setting.
func TestServerSettingsChecked(t *testing.T) {
	mysql := func(engine string, step, off, flush int64) scripted {
		return scripted{"ENGINE": {engine}, "@@SESSION.auto_increment_increment": {step, off, flush}}
	}
	pg := func(inc, start int64, cycle bool, fsync string) scripted {
		return scripted{"pg_sequences": {inc, start, cycle}, "SHOW fsync": {fsync}}
	}
	for _, tc := range []struct {
		name string
		d    sqldb.Dialect
		s    scripted
		want error  // nil: opens
		says string // in the error
	}{
		{"mysql as configured", sqldb.MySQL, mysql("InnoDB", 2, 2, 1), nil, ""},
		{"mysql keeps its increment", sqldb.MySQL, mysql("InnoDB", 1, 2, 1), ErrConfig, "auto_increment_increment=1"},
		{"mysql keeps its offset", sqldb.MySQL, mysql("InnoDB", 2, 1, 1), ErrConfig, "auto_increment_offset=1"},
		{"mysql flushes once a second", sqldb.MySQL, mysql("InnoDB", 2, 2, 2), ErrNotDurable, "innodb_flush_log_at_trx_commit=2"},
		{"mysql on MyISAM", sqldb.MySQL, mysql("MyISAM", 2, 2, 1), ErrNotDurable, `engine "MyISAM"`},
		{"postgres as configured", sqldb.Postgres, pg(2, 2, false, "on"), nil, ""},
		{"postgres sequence of another increment", sqldb.Postgres, pg(3, 2, false, "on"), ErrConfig, "INCREMENT BY 3"},
		{"postgres sequence of another start", sqldb.Postgres, pg(2, 1, false, "on"), ErrConfig, "START WITH 1"},
		{"postgres sequence that cycles", sqldb.Postgres, pg(2, 2, true, "on"), ErrConfig, "cycle=true"},
		{"postgres without fsync", sqldb.Postgres, pg(2, 2, false, "off"), ErrNotDurable, "fsync=off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := openScripted(t, tc.d, tc.s)
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("open: %v; want it to open", err)
			case tc.want != nil && (!errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says)):
				t.Fatalf("open: %v; want %v saying %q", err, tc.want, tc.says)
			}
		})
	}
}
