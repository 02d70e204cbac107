// Package servenode runs real `idmint serve` processes for tests that
// kill, pause and restart them: the client's cluster tests and the Java
// client's, which drive the same nodes from another language.
package servenode

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idmint/idmint/testkit/idtest"
	"github.com/idmint/idmint/testkit/testserver"
)

// Node is one `idmint serve` process on fixed ports, so a client finds it
// again after a restart. Set the fields, then Start it; Cleanup at the end.
type Node struct {
	Name   string   // for messages and logs
	Bin    string   // the idmint binary (Build)
	Config string   // the config file
	Data   string   // the data directory, kept across restarts
	Port   int      // the public listener's port on 127.0.0.1 (testserver.FreePort)
	GRPC   int      // the gRPC listener's port; 0: none
	Log    *os.File // the process's output

	cmd  *exec.Cmd
	done chan struct{}
}

// URL is the node's public address.
func (n *Node) URL() string { return "http://127.0.0.1:" + strconv.Itoa(n.Port) }

// Start runs the process and waits (up to a minute) until /readyz answers 200.
func (n *Node) Start(t testing.TB) {
	t.Helper()
	args := []string{"serve", "--config", n.Config, "--data", n.Data, "--listen", "127.0.0.1:" + strconv.Itoa(n.Port)}
	if n.GRPC != 0 {
		args = append(args, "--grpc-listen", "127.0.0.1:"+strconv.Itoa(n.GRPC))
	}
	n.cmd = exec.Command(n.Bin, args...)
	n.cmd.Env = append(os.Environ(), "IDMINT_CONFIG=")
	n.cmd.Stdout, n.cmd.Stderr = n.Log, n.Log
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	n.done = done
	cmd := n.cmd
	go func() { cmd.Wait(); close(done) }()
	hc := &http.Client{Timeout: time.Second}
	testserver.Eventually(t, n.Name+" to answer /readyz", 60*time.Second, func() bool {
		resp, err := hc.Get(n.URL() + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// Done is closed when the process started last has exited.
func (n *Node) Done() <-chan struct{} { return n.done }

// Exited reports whether the process started last has exited.
func (n *Node) Exited() bool {
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// Signal sends s to the process.
func (n *Node) Signal(t testing.TB, s syscall.Signal) {
	t.Helper()
	if err := n.cmd.Process.Signal(s); err != nil {
		t.Fatalf("%s: signal %v: %v", n.Name, s, err)
	}
}

// Kill sends SIGKILL and waits (up to 30 s) for the process to exit.
func (n *Node) Kill(t testing.TB) {
	t.Helper()
	n.Signal(t, syscall.SIGKILL)
	select {
	case <-n.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not exit after kill -9", n.Name)
	}
}

// Cleanup kills the process if it runs (continuing it first if stopped),
// closes its log, and shows the log's end when the test failed.
func (n *Node) Cleanup(t testing.TB) {
	if n.cmd != nil && n.cmd.ProcessState == nil {
		n.cmd.Process.Signal(syscall.SIGCONT)
		n.cmd.Process.Kill()
		<-n.done
	}
	n.Log.Close()
	if t.Failed() {
		b, _ := os.ReadFile(n.Log.Name())
		t.Logf("log of %s (last 3000 bytes):\n%s", n.Name, b[max(0, len(b)-3000):])
	}
}

// Build builds cmd/idmint into dir as the other tests build it (so the
// build cache serves them all), or returns IDMINT_CLIENT_BIN when set (a
// given build: a build of the tree takes a minute on a loaded machine).
func Build(t testing.TB, dir string) string {
	t.Helper()
	if bin := os.Getenv("IDMINT_CLIENT_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(dir, "idmint")
	if out, err := idtest.BuildCommand(bin).CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/idmint: %v\n%s", err, out)
	}
	return bin
}

// StartN writes config to dir/idmint.yaml and starts n nodes on it at once
// (each waits for the servers the config names), each with its own data
// directory and log in dir and a free port (and a gRPC port when grpc is
// set); they are cleaned up when the test ends. A node that does not
// become ready ends the test.
func StartN(t testing.TB, bin, dir, config string, n int, grpc bool) []*Node {
	t.Helper()
	cfg := filepath.Join(dir, "idmint.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	nodes := make([]*Node, n)
	for i := range nodes {
		name := "n" + strconv.Itoa(i)
		lf, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		nd := &Node{Name: name, Bin: bin, Config: cfg, Data: filepath.Join(dir, name), Port: testserver.FreePort(t), Log: lf}
		if grpc {
			nd.GRPC = testserver.FreePort(t)
		}
		nodes[i] = nd
		t.Cleanup(func() { nd.Cleanup(t) })
	}
	var wg sync.WaitGroup
	for _, nd := range nodes {
		wg.Go(func() { nd.Start(t) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return nodes
}
