// Package testserver gives tests the real PostgreSQL, MariaDB, Redis, etcd
// and ZooKeeper servers that scripts/test.sh starts, and private instances a
// test may stop, kill -9, pause and restart without disturbing other tests.
//
// Shared instances are announced by scripts/test.sh through IDMINT_TEST_*
// environment variables. When one is missing, the test is skipped with a
// message saying how to run it, except under CI=true, where a missing server
// fails the test: CI never skips silently.
package testserver

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // database/sql driver "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

// Kind names a server.
type Kind string

// The servers tests can ask for.
const (
	Postgres  Kind = "postgres"
	MariaDB   Kind = "mariadb"
	Redis     Kind = "redis"
	Etcd      Kind = "etcd"
	ZooKeeper Kind = "zookeeper"
)

var envOf = map[Kind]string{
	Postgres:  "IDMINT_TEST_POSTGRES",
	MariaDB:   "IDMINT_TEST_MYSQL",
	Redis:     "IDMINT_TEST_REDIS",
	Etcd:      "IDMINT_TEST_ETCD",
	ZooKeeper: "IDMINT_TEST_ZOOKEEPER",
}

const howTo = "run the whole suite with scripts/test.sh, which installs and starts the servers"

func missing(t testing.TB, what string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is not available under CI=true; %s", what, howTo)
	}
	t.Skipf("skipping: %s is not available; %s", what, howTo)
}

// Addr returns the shared instance of k: a DSN for Postgres ("postgres://...")
// and MariaDB (go-sql-driver form "root@tcp(host:port)/db"), host:port for
// the others. Tests on a shared instance must keep to their own database,
// key prefix or path (see Database and Prefix) and must not stop it.
func Addr(t testing.TB, k Kind) string {
	t.Helper()
	v := os.Getenv(envOf[k])
	if v == "" {
		missing(t, fmt.Sprintf("%s (%s)", k, envOf[k]))
	}
	return v
}

// Prefix returns a name unique to this test run, for keys, paths and table
// names on shared servers: "t_" followed by 12 hex digits.
func Prefix(t testing.TB) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "t_" + hex.EncodeToString(b[:])
}

// Database creates a fresh database on the shared Postgres or MariaDB
// instance, drops it when the test ends, and returns a DSN for it in the
// form the kind's driver takes (pgx URL, or go-sql-driver DSN).
func Database(t testing.TB, k Kind) string {
	t.Helper()
	return database(t, k, Addr(t, k))
}

func database(t testing.TB, k Kind, dsn string) string {
	t.Helper()
	name := Prefix(t)
	driver := map[Kind]string{Postgres: "pgx", MariaDB: "mysql"}[k]
	if driver == "" {
		t.Fatalf("testserver: Database wants postgres or mariadb, not %s", k)
	}
	admin, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatalf("testserver: open %s: %v", k, err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("testserver: create database on %s: %v", k, err)
	}
	t.Cleanup(func() {
		db, err := sql.Open(driver, dsn)
		if err != nil {
			return
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		q := "DROP DATABASE IF EXISTS " + name
		if k == Postgres {
			q += " WITH (FORCE)"
		}
		_, _ = db.ExecContext(ctx, q)
	})
	return withDatabase(k, dsn, name)
}

// withDatabase swaps the database name in a DSN.
func withDatabase(k Kind, dsn, name string) string {
	if k == Postgres {
		// postgres://user@host:port/db?opts
		rest := strings.SplitN(strings.TrimPrefix(dsn, "postgres://"), "?", 2)
		hostPart := rest[0]
		if i := strings.Index(hostPart, "/"); i >= 0 {
			hostPart = hostPart[:i]
		}
		out := "postgres://" + hostPart + "/" + name
		if len(rest) == 2 {
			out += "?" + rest[1]
		}
		return out
	}
	// user@tcp(host:port)/db?opts
	i := strings.LastIndex(dsn, "/")
	tail := ""
	if j := strings.Index(dsn[i:], "?"); j >= 0 {
		tail = dsn[i+j:]
	}
	return dsn[:i] + "/" + name + tail
}

// Server is a private instance started for one test; the test may stop,
// kill, pause and restart it. It is killed when the test ends.
type Server struct {
	Kind Kind
	Dir  string // data, log and pid file
	Port int
	args []string
	bash string // path of servers.sh
}

// ctlTimeout bounds one servers.sh command. servers.sh bounds its own
// waits (60 s for a start, probes of 2 s each); this is the backstop should
// the script itself hang. A variable so the package's tests can shorten it.
var ctlTimeout = 3 * time.Minute

// Start launches a private instance of k on a free port in a temporary
// directory, waits until it answers, and returns it. Extra args go to the
// server's command line (for example Redis persistence settings).
//
// The instance is killed when the test ends, whether or not it came up: the
// cleanup is registered before the start, so a start that fails or hangs
// halfway leaves no server behind. A server that does not come up fails
// the test with the tail of its log.
func Start(t testing.TB, k Kind, args ...string) *Server {
	t.Helper()
	ctl := os.Getenv("IDMINT_TEST_SERVERCTL")
	if ctl == "" {
		missing(t, fmt.Sprintf("a private %s (IDMINT_TEST_SERVERCTL)", k))
	}
	s := &Server{Kind: k, Dir: t.TempDir(), Port: freePort(t, k), args: args, bash: ctl}
	t.Cleanup(func() {
		if out, err := s.ctl(ctlTimeout, "kill", s.Dir); err != nil {
			t.Logf("testserver: kill %s in %s at the end of the test: %v\n%s", k, s.Dir, err, out)
		}
	})
	s.Restart(t)
	if k == Postgres {
		s.exec(t, "psql", "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-U", "postgres", "-c", "CREATE DATABASE idmint")
	}
	if k == MariaDB {
		s.exec(t, "mariadb", "--no-defaults", "-h127.0.0.1", "-P"+strconv.Itoa(s.Port), "-uroot", "-e", "CREATE DATABASE idmint")
	}
	return s
}

func (s *Server) exec(t testing.TB, name string, args ...string) {
	t.Helper()
	if name == "psql" {
		if p, err := exec.Command("bash", "-c", "ls -d /usr/lib/postgresql/*/bin/psql 2>/dev/null | head -n1").Output(); err == nil && len(p) > 0 {
			name = strings.TrimSpace(string(p))
		}
	}
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("testserver: %s %v: %v\n%s", name, args, err, out)
	}
}

// Addr returns the instance's address in the same form as the package-level
// Addr: a DSN for Postgres and MariaDB, host:port for the others.
func (s *Server) Addr() string {
	hp := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
	switch s.Kind {
	case Postgres:
		return "postgres://postgres@" + hp + "/idmint?sslmode=disable"
	case MariaDB:
		return "root@tcp(" + hp + ")/idmint"
	}
	return hp
}

// Database creates a fresh database on this Postgres or MariaDB instance and
// returns its DSN.
func (s *Server) Database(t testing.TB) string {
	t.Helper()
	return database(t, s.Kind, s.Addr())
}

// ctl runs servers.sh with args, killing it (and the probes it started,
// all in its process group) after d.
func (s *Server) ctl(d time.Duration, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{s.bash}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second // a child still holding the output pipe
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("no answer within %v: %w", d, err)
	}
	return out, err
}

func (s *Server) ctlRun(t testing.TB, args ...string) {
	t.Helper()
	if out, err := s.ctl(ctlTimeout, args...); err != nil {
		t.Fatalf("testserver: servers.sh %s: %v\n%s%s", strings.Join(args, " "), err, out, s.logTail(30))
	}
}

// logTail returns the last n lines of the server's log, labelled, or "".
func (s *Server) logTail(n int) string {
	b, err := os.ReadFile(filepath.Join(s.Dir, "server.log"))
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	lines = lines[max(0, len(lines)-n):]
	return fmt.Sprintf("--- last %d lines of %s/server.log:\n%s\n", len(lines), s.Dir, strings.Join(lines, "\n"))
}

// Restart starts the instance again on the same port and data (after Stop or
// Kill), and waits until it answers.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.ctlRun(t, append([]string{"start", string(s.Kind), s.Dir, strconv.Itoa(s.Port)}, s.args...)...)
}

// Stop shuts the instance down gracefully and waits for it to exit.
func (s *Server) Stop(t testing.TB) { t.Helper(); s.ctlRun(t, "stop", s.Dir) }

// Kill sends SIGKILL to the instance and waits for it to exit.
func (s *Server) Kill(t testing.TB) { t.Helper(); s.ctlRun(t, "kill", s.Dir) }

// Pause stops the instance with SIGSTOP (PostgreSQL: the postmaster and
// every backend) and returns once every thread of it has stopped: from then
// on connections stay open and nothing answers, not even a request already
// waiting in a socket. (kill(2) returns before the stop takes effect; a
// server thread woken by a request could answer it in between.)
func (s *Server) Pause(t testing.TB) { t.Helper(); s.ctlRun(t, "pause", s.Dir) }

// Resume continues a paused instance with SIGCONT and returns once no
// process of it is stopped.
func (s *Server) Resume(t testing.TB) { t.Helper(); s.ctlRun(t, "resume", s.Dir) }

// Pid returns the server's process id, from its pid file.
func (s *Server) Pid(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.Dir, "server.pid"))
	if err != nil {
		t.Fatalf("testserver: %s is not running: %v", s.Kind, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("testserver: bad pid file %s/server.pid: %v", s.Dir, err)
	}
	return pid
}

// freePort finds a port that is free now, and for etcd also the next one
// (its peer port).
func freePort(t testing.TB, k Kind) int {
	t.Helper()
	for range 200 {
		// Below Linux's ephemeral range (32768-60999 by default): a port
		// the kernel hands out to outgoing connections could be taken by
		// one of them while a test has the server stopped. A restarted
		// etcd of a loaded run found its peer port (client port + 1)
		// taken that way.
		p := 20000 + mrand.IntN(12000)
		if !portFree(p) || (k == Etcd && !portFree(p+1)) {
			continue
		}
		return p
	}
	t.Fatal("testserver: no free port")
	return 0
}

func portFree(p int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// Eventually polls cond every 20 ms until it holds, failing the test with
// what when it has not within d. It is for things that happen on a real
// server or process, where no fake clock can say when; tests of idmint's
// own timing use clock.Fake instead.
func Eventually(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// FreePort returns a free loopback TCP port below the kernel's ephemeral
// range, for a process a test stops and restarts on the same port.
func FreePort(t testing.TB) int {
	t.Helper()
	return freePort(t, "")
}
