package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idmint/idmint/sqldb"
	"github.com/idmint/idmint/testkit/testserver"
)

// inProcess is an `idmint serve` run inside the test process.
type inProcess struct {
	stdout, stderr *lockedWriter
	cancel         context.CancelFunc
	again          chan struct{} // closed by stop: a second signal, which skips the drain
	againOnce      sync.Once
	done           chan int
}

// serveInProcess starts `idmint serve args...` with the environment vars
// and waits until it listens, or until it exits (then ok is false).
func serveInProcess(t *testing.T, vars map[string]string, args ...string) (p *inProcess, ok bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p = &inProcess{stdout: &lockedWriter{w: &bytes.Buffer{}}, stderr: &lockedWriter{w: &bytes.Buffer{}}, cancel: cancel, again: make(chan struct{}), done: make(chan int, 1)}
	e := &env{stdin: strings.NewReader(""), stdout: p.stdout, stderr: p.stderr, getenv: func(k string) string { return vars[k] }, again: p.again}
	go func() { p.done <- run(ctx, e, append([]string{"serve"}, args...)) }()
	t.Cleanup(func() { p.stop(t) })
	deadline := time.After(60 * time.Second)
	for {
		if strings.Contains(p.stdout.String(), "idmint: listening on ") {
			return p, true
		}
		select {
		case code := <-p.done:
			p.done <- code
			return p, false
		case <-deadline:
			t.Fatalf("idmint serve %v neither listened nor exited within 60 s; stderr:\n%s", args, p.stderr)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// stop cancels the server and returns its exit status.
func (p *inProcess) stop(t *testing.T) int {
	t.Helper()
	p.cancel()
	p.againOnce.Do(func() { close(p.again) })
	select {
	case code := <-p.done:
		p.done <- code
		return code
	case <-time.After(60 * time.Second):
		t.Fatalf("idmint serve did not stop within 60 s; stderr:\n%s", p.stderr)
		return -1
	}
}

// TestServeOneServerPerDataDir: a second server on a data directory in use
// is refused at once with a message naming the directory and the holder's
// pid, even when it brings its own coordinator; once the first stops, the
// directory is free again.
func TestServeOneServerPerDataDir(t *testing.T) {
	dir := t.TempDir()
	first, ok := serveInProcess(t, nil, "--listen", "127.0.0.1:0", "--data", dir)
	if !ok {
		t.Fatalf("first server exited: %s", first.stderr)
	}
	abs, _ := filepath.Abs(dir)
	second, ok := serveInProcess(t, nil, "--listen", "127.0.0.1:0", "--data", dir, "--coordinator", "file://"+filepath.Join(t.TempDir(), "worker"))
	if ok {
		t.Fatalf("a second server started on data directory %s, which another one serves", dir)
	}
	if code := second.stop(t); code != 1 {
		t.Errorf("second server exit %d, want 1", code)
	}
	msg := second.stderr.String()
	for _, want := range []string{abs, "pid " + strconv.Itoa(os.Getpid()), "one server per data directory", "--data"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal lacks %q:\n%s", want, msg)
		}
	}
	if code := first.stop(t); code != 0 {
		t.Fatalf("first server exit %d: %s", code, first.stderr)
	}
	third, ok := serveInProcess(t, nil, "--listen", "127.0.0.1:0", "--data", dir)
	if !ok {
		t.Fatalf("the data directory stayed locked after its server stopped: %s", third.stderr)
	}
	third.stop(t)
}

// TestServeWarnsHostLocalWorkerID: the file:// coordinator on a
// non-loopback listener warns that its worker ID is unique per host only
// and names the shared coordinators; on loopback, or with a shared
// coordinator, it does not.
func TestServeWarnsHostLocalWorkerID(t *testing.T) {
	token := map[string]string{"IDMINT_ADMIN_TOKEN": "0123456789abcdef0123"}
	const warning = "worker ID is unique on this host only"
	for _, tc := range []struct {
		name string
		args []string
		warn bool
	}{
		{"all interfaces", []string{"--listen", "0.0.0.0:0"}, true},
		{"loopback", []string{"--listen", "127.0.0.1:0"}, false},
		{"static coordinator", []string{"--listen", "0.0.0.0:0", "--coordinator", "static://7"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := serveInProcess(t, token, append(tc.args, "--data", t.TempDir())...)
			if !ok {
				t.Fatalf("serve exited: %s", p.stderr)
			}
			p.stop(t)
			log := p.stderr.String()
			if got := strings.Contains(log, warning); got != tc.warn {
				t.Fatalf("warning %q logged: %v, want %v; log:\n%s", warning, got, tc.warn, log)
			}
			if tc.warn {
				for _, want := range []string{"level=WARN", "etcd://", "zk://", "postgres://"} {
					if !strings.Contains(log, want) {
						t.Errorf("warning lacks %q:\n%s", want, log)
					}
				}
			}
		})
	}
}

// TestServeSilentStore: serve (and gen segment) pointed at a PostgreSQL or
// MySQL server that accepts TCP and never answers logs which store it is
// opening, password redacted, and fails with a clear error within the
// store deadline instead of hanging.
func TestServeSilentStore(t *testing.T) {
	addr := testserver.Silent(t)
	for name, url := range map[string]string{
		"postgres": "postgres://idmint:secret@" + addr + "/idmint?sslmode=disable",
		"mysql":    "mysql://idmint:secret@" + addr + "/idmint",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			p, ok := serveInProcess(t, nil, "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--store", url)
			if ok {
				t.Fatal("serve started on a store that never answers")
			}
			if code := p.stop(t); code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if took := time.Since(start); took > 3*sqldb.DefaultTimeout {
				t.Errorf("serve took %v to give up", took)
			}
			log := p.stderr.String()
			if !strings.Contains(log, "msg=store name=default url=") || !strings.Contains(log, "no answer within") ||
				!strings.Contains(log, "idmint:xxxxx@"+addr) || strings.Contains(log, "secret") {
				t.Fatalf("log does not name the store (password redacted) and why it failed:\n%s", log)
			}

			start = time.Now()
			done := make(chan struct{})
			var code int
			var errOut string
			go func() { code, _, errOut = runCLI(t, "gen", "segment", "--store", url); close(done) }()
			select {
			case <-done:
			case <-time.After(3 * sqldb.DefaultTimeout):
				t.Fatalf("gen segment still hangs after %v", 3*sqldb.DefaultTimeout)
			}
			if code != 1 || !strings.Contains(errOut, "no answer within") || strings.Contains(errOut, "secret") {
				t.Fatalf("gen segment: exit %d: %s", code, errOut)
			}
		})
	}
}
