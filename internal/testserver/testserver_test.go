package testserver

import (
	"context"
	"database/sql"
	"net"
	"testing"
	"time"
)

func TestWithDatabase(t *testing.T) {
	t.Parallel()
	cases := []struct {
		k       Kind
		in, out string
	}{
		{Postgres, "postgres://postgres@127.0.0.1:1/idmint?sslmode=disable", "postgres://postgres@127.0.0.1:1/x?sslmode=disable"},
		{Postgres, "postgres://postgres@127.0.0.1:1", "postgres://postgres@127.0.0.1:1/x"},
		{MariaDB, "root@tcp(127.0.0.1:2)/idmint", "root@tcp(127.0.0.1:2)/x"},
		{MariaDB, "root@tcp(127.0.0.1:2)/idmint?parseTime=true", "root@tcp(127.0.0.1:2)/x?parseTime=true"},
	}
	for _, c := range cases {
		if got := withDatabase(c.k, c.in, "x"); got != c.out {
			t.Errorf("withDatabase(%s, %q) = %q, want %q", c.k, c.in, got, c.out)
		}
	}
}

func ping(t *testing.T, driver, dsn string) error {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

func TestSharedDatabases(t *testing.T) {
	t.Parallel()
	if err := ping(t, "pgx", Database(t, Postgres)); err != nil {
		t.Fatalf("postgres: %v", err)
	}
	if err := ping(t, "mysql", Database(t, MariaDB)); err != nil {
		t.Fatalf("mariadb: %v", err)
	}
	for _, k := range []Kind{Redis, Etcd, ZooKeeper} {
		c, err := net.DialTimeout("tcp", Addr(t, k), 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		c.Close()
	}
}

// TestPrivateKillRestart checks the chaos controls on the cheapest server.
func TestPrivateKillRestart(t *testing.T) {
	t.Parallel()
	s := Start(t, Redis)
	dial := func() error {
		c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial(); err != nil {
		t.Fatalf("fresh instance: %v", err)
	}
	s.Kill(t)
	if err := dial(); err == nil {
		t.Fatal("killed instance still accepts connections")
	}
	s.Restart(t)
	if err := dial(); err != nil {
		t.Fatalf("restarted instance: %v", err)
	}
	s.Stop(t)
	if err := dial(); err == nil {
		t.Fatal("stopped instance still accepts connections")
	}
}
