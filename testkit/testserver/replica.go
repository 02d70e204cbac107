package testserver

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/testkit/tcpproxy"
)

// Replica is an asynchronous streaming replica of a private PostgreSQL or
// MariaDB (see StartReplica). It is a *Server of its own: Kill, Stop,
// Restart, Pause, Addr and Database act on the replica, not on Primary.
type Replica struct {
	*Server
	// Primary is the server the replica follows.
	Primary *Server
	// Proxy carries the replication link: the replica reaches Primary
	// through it, so Proxy.Cut or Proxy.Blackhole cuts replication (the
	// primary keeps taking writes the replica never sees) and Proxy.Heal
	// restores it.
	Proxy *tcpproxy.Proxy
}

// StartReplica starts an asynchronous replica of primary, which must be a
// private PostgreSQL or MariaDB from Start: a tcpproxy in front of
// primary, and behind it a new instance of the same kind on a free port in
// a temporary directory, initialised from the primary (postgres:
// pg_basebackup; mariadb: the primary's binlog from its start) and
// streaming from it (see scripts/servers.sh, replica). Extra args go to the
// replica's command line, as with Start. It returns once the replica has
// caught up with everything primary had committed, so the "idmint"
// database Start created is there too.
//
// The replica is killed and the proxy closed when the test ends, whether or
// not the replica came up.
func StartReplica(t testing.TB, primary *Server, args ...string) *Replica {
	t.Helper()
	if primary.Kind != Postgres && primary.Kind != MariaDB {
		t.Fatalf("testserver: StartReplica wants a postgres or mariadb primary, not %s", primary.Kind)
	}
	link, err := tcpproxy.Listen(primary.HostPort())
	if err != nil {
		t.Fatalf("testserver: replication proxy for %s: %v", primary.Kind, err)
	}
	t.Cleanup(func() { link.Close() })
	s := &Server{Kind: primary.Kind, Dir: t.TempDir(), Port: freePort(t, primary.Kind), args: args, bash: primary.bash}
	t.Cleanup(func() {
		if out, err := s.ctl(ctlTimeout, "kill", s.Dir); err != nil {
			t.Logf("testserver: kill %s replica in %s at the end of the test: %v\n%s", s.Kind, s.Dir, err, out)
		}
	})
	s.ctlRun(t, append([]string{"replica", string(s.Kind), s.Dir, strconv.Itoa(s.Port), link.Addr()}, args...)...)
	r := &Replica{Server: s, Primary: primary, Proxy: link}
	r.WaitCaughtUp(t, time.Minute)
	return r
}

// Promote makes the replica a primary that takes writes, and returns once
// it does. PostgreSQL replays the WAL it received, MariaDB applies its relay
// log; what never reached the replica is lost. The replication link stays
// as it is; nothing flows through it any more.
func (r *Replica) Promote(t testing.TB) {
	t.Helper()
	r.ctlRun(t, "promote", r.Dir)
}

// WaitCaughtUp waits until the replica has replayed everything the primary
// had committed when it was called, failing the test after d with both
// positions. PostgreSQL: the replica's pg_last_wal_replay_lsn() reaches the
// primary's pg_current_wal_flush_lsn(); MariaDB: its @@gtid_slave_pos
// reaches the primary's @@gtid_binlog_pos in every replication domain. The
// primary must be up.
func (r *Replica) WaitCaughtUp(t testing.TB, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	driver := driverOf(r.Kind)
	pdb, err := sql.Open(driver, adminDSN(r.Primary))
	if err != nil {
		t.Fatalf("testserver: open %s primary: %v", r.Kind, err)
	}
	defer pdb.Close()
	rdb, err := sql.Open(driver, adminDSN(r.Server))
	if err != nil {
		t.Fatalf("testserver: open %s replica: %v", r.Kind, err)
	}
	defer rdb.Close()
	query := func(db *sql.DB, q string, args ...any) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var v sql.NullString
		err := db.QueryRowContext(ctx, q, args...).Scan(&v)
		return v.String, err
	}
	var target string
	for {
		q := "SELECT pg_current_wal_flush_lsn()::text"
		if r.Kind == MariaDB {
			q = "SELECT @@gtid_binlog_pos"
		}
		if target, err = query(pdb, q); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("testserver: %s primary on port %d did not say its position within %v: %v", r.Kind, r.Primary.Port, d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		var at string
		var done bool
		switch r.Kind {
		case Postgres:
			at, err = query(rdb, "SELECT pg_last_wal_replay_lsn()::text")
			if err == nil && at != "" {
				var ok string
				ok, err = query(rdb, "SELECT (pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn) >= 0)::text", at, target)
				done = ok == "true"
			}
		case MariaDB:
			at, err = query(rdb, "SELECT @@gtid_slave_pos")
			if err == nil {
				done, err = gtidReached(at, target)
			}
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			extra := ""
			if r.Kind == MariaDB {
				extra = "\nreplica's SHOW SLAVE STATUS: " + slaveStatus(rdb)
			}
			t.Fatalf("testserver: %s replica on port %d not caught up with its primary (port %d, through %s) after %v: primary at %q, replica at %q (last error: %v)%s\n%s",
				r.Kind, r.Port, r.Primary.Port, r.Proxy.Addr(), d, target, at, err, extra, r.logTail(20))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// gtidReached says whether the MariaDB GTID position at ("0-1-7,1-2-3")
// has reached target in every domain target names.
func gtidReached(at, target string) (bool, error) {
	seqs := func(pos string) (map[uint64]uint64, error) {
		m := map[uint64]uint64{}
		for _, g := range strings.Split(pos, ",") {
			g = strings.TrimSpace(g)
			if g == "" {
				continue
			}
			f := strings.Split(g, "-")
			if len(f) != 3 {
				return nil, fmt.Errorf("bad GTID %q in %q", g, pos)
			}
			dom, err1 := strconv.ParseUint(f[0], 10, 32)
			seq, err2 := strconv.ParseUint(f[2], 10, 64)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("bad GTID %q in %q", g, pos)
			}
			m[dom] = max(m[dom], seq)
		}
		return m, nil
	}
	have, err := seqs(at)
	if err != nil {
		return false, err
	}
	want, err := seqs(target)
	if err != nil {
		return false, err
	}
	for dom, seq := range want {
		if have[dom] < seq {
			return false, nil
		}
	}
	return true, nil
}

// slaveStatus returns the telling fields of MariaDB's SHOW SLAVE STATUS,
// for a failure message.
func slaveStatus(db *sql.DB) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err.Error()
	}
	if !rows.Next() {
		return "(not a replica)"
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return err.Error()
	}
	var out []string
	for i, c := range cols {
		switch c {
		case "Slave_IO_State", "Slave_IO_Running", "Slave_SQL_Running", "Last_IO_Error", "Last_SQL_Error", "Gtid_IO_Pos", "Seconds_Behind_Master":
			out = append(out, c+"="+strconv.Quote(vals[i].String))
		}
	}
	return strings.Join(out, " ")
}

func driverOf(k Kind) string { return map[Kind]string{Postgres: "pgx", MariaDB: "mysql"}[k] }

// adminDSN is a DSN for s that needs no database of its own ("postgres"
// on PostgreSQL, none on MariaDB), with short connect timeouts.
func adminDSN(s *Server) string {
	if s.Kind == Postgres {
		return "postgres://postgres@" + s.HostPort() + "/postgres?sslmode=disable&connect_timeout=2"
	}
	return "root@tcp(" + s.HostPort() + ")/?timeout=2s"
}

// HostPort returns the instance's "127.0.0.1:port", for a proxy in front
// of it (see WithAddr).
func (s *Server) HostPort() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// WithAddr returns dsn, a Postgres URL or MariaDB DSN in the forms this
// package hands out, with its host:port replaced by hostport: the same
// user, database and options reached at another address, a proxy's or
// a promoted replica's.
func WithAddr(k Kind, dsn, hostport string) string {
	if k == Postgres {
		// postgres://[user@]host:port[/db][?opts]
		rest := strings.TrimPrefix(dsn, "postgres://")
		end := strings.IndexAny(rest, "/?")
		if end < 0 {
			end = len(rest)
		}
		user := ""
		if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
			user = rest[:at+1]
		}
		return "postgres://" + user + hostport + rest[end:]
	}
	// user@tcp(host:port)/db?opts
	open := strings.Index(dsn, "tcp(")
	if open < 0 {
		return dsn
	}
	end := strings.Index(dsn[open:], ")")
	if end < 0 {
		return dsn
	}
	return dsn[:open] + "tcp(" + hostport + dsn[open+end:]
}
