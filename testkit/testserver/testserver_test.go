package testserver

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
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

// fakeT records what Start does to a test: its failure and its cleanups.
// Fatalf ends the goroutine, as testing.T's does.
type fakeT struct {
	testing.TB
	dir      string // what TempDir returns
	failed   string
	cleanups []func()
}

func (f *fakeT) TempDir() string     { return f.dir }
func (f *fakeT) Helper()             {}
func (f *fakeT) Cleanup(fn func())   { f.cleanups = append(f.cleanups, fn) }
func (f *fakeT) Logf(string, ...any) {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestStartThatHangs: a start that never returns is cut off, fails the test
// with the log's tail, and the server it launched is killed afterwards.
// (servers.sh once waited forever on a ZooKeeper that never answered; the
// JVM then outlived the test, because the kill was registered only after
// the start returned.)
func TestStartThatHangs(t *testing.T) {
	dir := t.TempDir()
	ctl := filepath.Join(dir, "servers.sh")
	// A stand-in for servers.sh: start launches a long sleep as "the
	// server", logs, and hangs; kill kills what server.pid names.
	script := `set -e
case "$1" in
start) d=$3; echo "booting on port $4" >"$d/server.log"; echo "NullPointerException at start-up" >>"$d/server.log"
	setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! >"$d/server.pid"; exec sleep 300 ;;
kill) [ -f "$2/server.pid" ] && kill -KILL "$(cat "$2/server.pid")"; rm -f "$2/server.pid" ;;
esac
`
	if err := os.WriteFile(ctl, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("IDMINT_TEST_SERVERCTL", ctl)
	old := ctlTimeout
	ctlTimeout = 2 * time.Second
	t.Cleanup(func() { ctlTimeout = old })

	ft := &fakeT{TB: t, dir: t.TempDir()}
	done := make(chan *Server, 1)
	began := time.Now()
	go func() {
		defer close(done)
		done <- Start(ft, ZooKeeper)
	}()
	select {
	case s := <-done:
		if s != nil {
			t.Fatal("Start returned a server that never came up")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Start still waiting after 30 s on a server that never answers")
	}
	if took := time.Since(began); took > 15*time.Second {
		t.Errorf("Start gave up after %v; want about ctlTimeout (2 s)", took)
	}
	for _, want := range []string{"no answer within", "server.log", "NullPointerException at start-up"} {
		if !strings.Contains(ft.failed, want) {
			t.Errorf("failure message lacks %q:\n%s", want, ft.failed)
		}
	}
	// The pid the hung start wrote: the cleanups must kill it.
	b, err := os.ReadFile(filepath.Join(ft.dir, "server.pid"))
	if err != nil {
		t.Fatalf("the hung start left no server.pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) }) // should the test fail
	for _, fn := range ft.cleanups {
		fn()
	}
	Eventually(t, fmt.Sprintf("launched pid %d to be killed by the cleanup", pid), 10*time.Second, func() bool {
		return syscall.Kill(pid, 0) != nil
	})
}

// procState returns the scheduler state letters of every thread of pid
// ("S", "T"...), or "" when pid is gone.
func procState(pid int) string {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	states := ""
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) && !strings.ContainsRune(states, rune(b[i+2])) {
			states += string(b[i+2])
		}
	}
	return states
}

// stoppedUnder lists the stopped processes whose command line names dir.
func stoppedUnder(dir string) []string {
	var out []string
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range cmdlines {
		b, err := os.ReadFile(f)
		if err != nil || !strings.Contains(string(b), dir) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if strings.ContainsRune(procState(pid), 'T') {
			out = append(out, fmt.Sprintf("%d %s", pid, strings.ReplaceAll(string(b), "\x00", " ")))
		}
	}
	return out
}

// TestPausePostgres: Pause stops PostgreSQL whole — an open connection's
// backend as well as the postmaster — and Resume leaves nothing stopped
// behind (run as root, postgres once ran under runuser, which stopped
// itself with its child and stayed stopped).
func TestPausePostgres(t *testing.T) {
	t.Parallel()
	s := Start(t, Postgres)
	db, err := sql.Open("pgx", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx) // a backend that exists before the pause
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	query := func(c *sql.Conn) error {
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		var one int
		return c.QueryRowContext(qctx, "SELECT 1").Scan(&one)
	}
	if err := query(conn); err != nil {
		t.Fatalf("before the pause: %v", err)
	}
	pid := s.Pid(t)
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if got := strings.TrimSpace(string(comm)); got != "postgres" {
		t.Errorf("server.pid names %d, a %q; want the postmaster", pid, got)
	}

	s.Pause(t)
	if st := procState(pid); st != "T" {
		t.Errorf("postmaster thread states after Pause: %q, want all T", st)
	}
	if err := query(conn); err == nil {
		t.Error("an open connection answered while the server was paused")
	}
	if err := ping(t, "pgx", s.Addr()); err == nil {
		t.Error("a new connection answered while the server was paused")
	}
	s.Resume(t)
	if st := stoppedUnder(s.Dir); len(st) > 0 {
		t.Errorf("stopped processes left after Resume:\n%s", strings.Join(st, "\n"))
	}
	if err := ping(t, "pgx", s.Addr()); err != nil {
		t.Fatalf("after Resume: %v", err)
	}
}
