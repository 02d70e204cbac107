package testserver

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/idmint/idmint/testkit/tcpproxy"
)

func TestWithAddr(t *testing.T) {
	t.Parallel()
	cases := []struct {
		k       Kind
		in, out string
	}{
		{Postgres, "postgres://postgres@127.0.0.1:1/idmint?sslmode=disable", "postgres://postgres@127.0.0.1:9/idmint?sslmode=disable"},
		{Postgres, "postgres://postgres@127.0.0.1:1", "postgres://postgres@127.0.0.1:9"},
		{Postgres, "postgres://127.0.0.1:1/x", "postgres://127.0.0.1:9/x"},
		{Postgres, "postgres://postgres@127.0.0.1:1?sslmode=disable", "postgres://postgres@127.0.0.1:9?sslmode=disable"},
		{MariaDB, "root@tcp(127.0.0.1:2)/idmint", "root@tcp(127.0.0.1:9)/idmint"},
		{MariaDB, "root@tcp(127.0.0.1:2)/idmint?parseTime=true", "root@tcp(127.0.0.1:9)/idmint?parseTime=true"},
	}
	for _, c := range cases {
		if got := WithAddr(c.k, c.in, "127.0.0.1:9"); got != c.out {
			t.Errorf("WithAddr(%s, %q) = %q, want %q", c.k, c.in, got, c.out)
		}
	}
}

func TestGtidReached(t *testing.T) {
	t.Parallel()
	cases := []struct {
		at, target string
		want       bool
	}{
		{"", "", true},
		{"0-1-5", "", true},
		{"", "0-1-1", false},
		{"0-1-5", "0-1-5", true},
		{"0-2-6", "0-1-5", true},
		{"0-1-4", "0-1-5", false},
		{"0-1-9,1-1-2", "1-1-3,0-1-5", false},
		{"1-1-3,0-1-9", "0-1-5,1-1-3", true},
	}
	for _, c := range cases {
		if got, err := gtidReached(c.at, c.target); err != nil || got != c.want {
			t.Errorf("gtidReached(%q, %q) = %v, %v; want %v", c.at, c.target, got, err, c.want)
		}
	}
	if _, err := gtidReached("0-1", "0-1-1"); err == nil {
		t.Error("gtidReached took a malformed GTID")
	}
}

// TestReplicaFailover stages a failover to a lagging asynchronous replica,
// on both databases: the replica follows the primary, catches up again
// after its link is cut and healed, and blackholed and healed, then the link is cut for good, the
// primary acknowledges writes the replica never gets and is killed -9, the
// replica is promoted, and the clients' address (a proxy standing for a
// virtual IP) moves to it. It takes writes and lacks the lost ones.
func TestReplicaFailover(t *testing.T) {
	t.Parallel()
	for _, k := range []Kind{Postgres, MariaDB} {
		t.Run(string(k), func(t *testing.T) {
			t.Parallel()
			testReplicaFailover(t, k)
		})
	}
}

func testReplicaFailover(t *testing.T, k Kind) {
	began := time.Now()
	primary := Start(t, k)
	r := StartReplica(t, primary)
	t.Logf("primary and replica up in %v", time.Since(began).Round(time.Millisecond))

	vip, err := tcpproxy.Listen(primary.HostPort())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vip.Close() })
	client := openDB(t, k, WithAddr(k, primary.Addr(), vip.Addr()))
	onReplica := openDB(t, k, r.Addr()) // "idmint", which came over from the primary

	do(t, client, "CREATE TABLE failover_rows (id INT PRIMARY KEY)")
	insert := func(ids ...int) {
		t.Helper()
		for _, id := range ids {
			do(t, client, fmt.Sprintf("INSERT INTO failover_rows (id) VALUES (%d)", id))
		}
	}
	insert(1, 2, 3, 4, 5)
	r.WaitCaughtUp(t, 20*time.Second)
	wantIDs(t, "the replica, caught up", onReplica, 1, 2, 3, 4, 5)

	if !readOnly(t, k, onReplica) {
		t.Fatal("the replica takes writes before its promotion")
	}

	// A cut, then a blackhole, that heal: the replica gets what it missed.
	r.Proxy.Cut()
	insert(6)
	r.Proxy.Heal()
	r.WaitCaughtUp(t, 20*time.Second)
	wantIDs(t, "the replica, after the cut link healed", onReplica, 1, 2, 3, 4, 5, 6)
	r.Proxy.Blackhole()
	insert(7)
	r.Proxy.Heal()
	r.WaitCaughtUp(t, 20*time.Second)
	wantIDs(t, "the replica, after the blackholed link healed", onReplica, 1, 2, 3, 4, 5, 6, 7)

	// The failover. Each insert returned: the primary acknowledged it.
	r.Proxy.Cut()
	insert(8, 9, 10)
	wantIDs(t, "the primary before it dies", client, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	primary.Kill(t)
	r.Promote(t)
	if readOnly(t, k, onReplica) {
		t.Fatal("the promoted replica is still read-only")
	}
	vip.Retarget(r.HostPort())

	Eventually(t, "the clients' address to reach the promoted replica", 20*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var n int
		return client.QueryRowContext(ctx, "SELECT COUNT(*) FROM failover_rows").Scan(&n) == nil
	})
	insert(11)
	wantIDs(t, "the promoted replica", client, 1, 2, 3, 4, 5, 6, 7, 11)
	wantIDs(t, "the promoted replica, directly", onReplica, 1, 2, 3, 4, 5, 6, 7, 11)

	// Database works on the promoted replica as on any private server.
	if err := ping(t, driverOf(k), r.Database(t)); err != nil {
		t.Fatalf("a new database on the promoted replica: %v", err)
	}
	t.Logf("whole scenario in %v", time.Since(began).Round(time.Millisecond))
}

// readOnly says whether db is a replica that refuses writes: in recovery
// (PostgreSQL) or read_only (MariaDB).
func readOnly(t *testing.T, k Kind, db *sql.DB) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q := "SELECT pg_is_in_recovery()"
	if k == MariaDB {
		q = "SELECT @@read_only = 1"
	}
	var ro bool
	if err := db.QueryRowContext(ctx, q).Scan(&ro); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return ro
}

func openDB(t *testing.T, k Kind, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driverOf(k), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func do(t *testing.T, db *sql.DB, q string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func wantIDs(t *testing.T, where string, db *sql.DB, want ...int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SELECT id FROM failover_rows ORDER BY id")
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	defer rows.Close()
	var got []int
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		got = append(got, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s has rows %v, want %v", where, got, want)
	}
}
