package worker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/idmint/idmint/testkit/testserver"
)

// TestMain doubles as the child process of the race tests: with
// IDMINT_WORKER_CHILD set to a coordinator URL it acquires one lease,
// prints "ok <id> <generation>" or "err <message>", and holds the lease
// until its stdin closes.
func TestMain(m *testing.M) {
	if u := os.Getenv("IDMINT_WORKER_CHILD"); u != "" {
		os.Exit(child(u))
	}
	os.Exit(m.Run())
}

func child(u string) int {
	max, _ := strconv.ParseInt(os.Getenv("IDMINT_WORKER_MAX"), 10, 64)
	ctx := context.Background()
	a, err := Open(ctx, u, WithTTL(3*time.Second), WithTimeout(10*time.Second))
	if err != nil {
		fmt.Printf("err %v\n", err)
		return 0
	}
	defer a.Close()
	l, err := a.Acquire(ctx, max)
	if err != nil {
		fmt.Printf("err %v\n", err)
		return 0
	}
	fmt.Printf("ok %d %d\n", l.ID(), l.Generation())
	io.Copy(io.Discard, os.Stdin)
	l.Close()
	return 0
}

// kin is one backend under the contract tests.
type kin struct {
	name string
	// url returns the coordinator URL process i uses (ZooKeeper processes
	// differ by endpoint, as Leaf nodes do).
	url func(i int) string
	// steal makes the coordinator forget l, as an expiry would.
	steal func(t *testing.T, l *Lease)
}

func kins(t *testing.T) []kin {
	t.Helper()
	var out []kin
	out = append(out, kin{name: "sqlite", url: func() func(int) string {
		u := "sqlite://" + filepath.Join(t.TempDir(), "ids.db")
		return func(int) string { return u }
	}(), steal: stealSQL})
	if os.Getenv("IDMINT_TEST_ETCD") != "" || os.Getenv("CI") == "true" {
		addr := testserver.Addr(t, testserver.Etcd)
		u := "etcd://" + addr + "/idmint?name=" + testserver.Prefix(t)
		out = append(out, kin{name: "etcd", url: func(int) string { return u }, steal: func(t *testing.T, l *Lease) {
			b := l.b.(*etcdBackend)
			if _, err := b.a.cli.Revoke(context.Background(), b.lease); err != nil {
				t.Fatal(err)
			}
		}})
	}
	if os.Getenv("IDMINT_TEST_ZOOKEEPER") != "" || os.Getenv("CI") == "true" {
		addr := testserver.Addr(t, testserver.ZooKeeper)
		root := "/" + testserver.Prefix(t) + "/snowflake/app"
		out = append(out, kin{name: "zookeeper", url: func(i int) string {
			return fmt.Sprintf("zk://%s%s?endpoint=10.0.0.%d:8080", addr, root, i+1)
		}, steal: func(t *testing.T, l *Lease) {
			b := l.b.(*zkBackend)
			if err := b.a.conn.Delete(b.lock, -1); err != nil {
				t.Fatal(err)
			}
		}})
	}
	if os.Getenv("IDMINT_TEST_POSTGRES") != "" || os.Getenv("CI") == "true" {
		u := testserver.Database(t, testserver.Postgres)
		out = append(out, kin{name: "postgres", url: func(int) string { return u }, steal: stealSQL})
	}
	if os.Getenv("IDMINT_TEST_MYSQL") != "" || os.Getenv("CI") == "true" {
		u := "mysql://" + testserver.Database(t, testserver.MariaDB)
		out = append(out, kin{name: "mariadb", url: func(int) string { return u }, steal: stealSQL})
	}
	if len(out) == 1 {
		t.Log("only sqlite runs: the etcd, ZooKeeper and database variants need scripts/test.sh (or source /tmp/idmint-dev.env)")
	}
	return out
}

func stealSQL(t *testing.T, l *Lease) {
	b := l.b.(*sqlBackend)
	if _, err := b.a.db.ExecContext(context.Background(), b.a.db.Dialect.Rebind("UPDATE WORKER_NODE SET GENERATION = GENERATION + 1 WHERE ID = ?"), b.id); err != nil {
		t.Fatal(err)
	}
}

func open(t *testing.T, u string) Assigner {
	t.Helper()
	a, err := Open(context.Background(), u, WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// TestContract runs the same checks against every coordinator: distinct
// IDs, the exhaustion error, recycling with a larger generation and the
// recorded horizon, and fencing of a holder that lost its lease.
func TestContract(t *testing.T) {
	for _, k := range kins(t) {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			const max = 2
			var leases []*Lease
			seen := map[int64]bool{}
			for i := 0; i <= max; i++ {
				l, err := open(t, k.url(i)).Acquire(ctx, max)
				if err != nil {
					t.Fatalf("acquire %d: %v", i, err)
				}
				t.Cleanup(func() { l.Close() })
				if seen[l.ID()] || l.ID() < 0 || l.ID() > max {
					t.Fatalf("acquire %d: worker id %d duplicate or out of 0..%d", i, l.ID(), max)
				}
				seen[l.ID()] = true
				leases = append(leases, l)
			}
			_, err := open(t, k.url(max+1)).Acquire(ctx, max)
			var nf *NoFreeIDError
			if !errors.As(err, &nf) || !errors.Is(err, ErrNoFreeID) || nf.InUse != max+1 || !strings.Contains(err.Error(), "3 of 3 in use") {
				t.Fatalf("exhausted Acquire = %v; want *NoFreeIDError with 3 of 3 in use", err)
			}

			// Recycling: release one, record a horizon first.
			first := leases[0]
			h := time.Now().Add(time.Hour).Truncate(time.Millisecond).UTC()
			if got, err := first.Extend(ctx, h); err != nil || got.Before(h) {
				t.Fatalf("Extend = %v, %v", got, err)
			}
			hs, err := open(t, k.url(0)).List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(hs) < max+1 {
				t.Fatalf("List = %+v, want %d holders", hs, max+1)
			}
			if err := first.Close(); err != nil {
				t.Fatal(err)
			}
			again, err := open(t, k.url(0)).Acquire(ctx, max)
			if err != nil {
				t.Fatalf("re-acquire: %v", err)
			}
			t.Cleanup(func() { again.Close() })
			got, _ := again.Load(ctx)
			if again.ID() != first.ID() || again.Generation() <= first.Generation() || got.Before(h) {
				t.Fatalf("re-acquire: id %d gen %d horizon %v; want id %d, gen > %d, horizon >= %v",
					again.ID(), again.Generation(), got, first.ID(), first.Generation(), h)
			}

			// A clean stop lowers the horizon to the last stamp actually
			// used, so the next holder need not wait out the lead.
			low := h.Add(-30 * time.Minute)
			if err := again.Release(ctx, low); err != nil {
				t.Fatalf("Release: %v", err)
			}
			if err := again.Close(); err != nil {
				t.Fatal(err)
			}
			third, err := open(t, k.url(0)).Acquire(ctx, max)
			if err != nil {
				t.Fatalf("acquire after release: %v", err)
			}
			t.Cleanup(func() { third.Close() })
			if got, _ := third.Load(ctx); third.ID() != first.ID() || got.Before(low) || !got.Before(h) {
				t.Fatalf("after Release(%v): id %d horizon %v; want id %d, horizon in [%v, %v)", low, third.ID(), got, first.ID(), low, h)
			}

			// Fencing: once the coordinator forgets a lease, its holder can
			// no longer move the horizon, and its Done closes.
			victim := leases[1]
			k.steal(t, victim)
			if _, err := victim.Extend(ctx, h.Add(time.Hour)); !errors.Is(err, ErrLeaseLost) {
				t.Fatalf("Extend after the lease was taken = %v, want ErrLeaseLost", err)
			}
			select {
			case <-victim.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("Done not closed after loss")
			}
			if victim.Valid() {
				t.Fatal("a lost lease still claims validity")
			}
			if err := victim.Release(ctx, h.Add(-time.Hour)); err == nil {
				t.Fatal("a lost lease lowered the horizon")
			}
		})
	}
}

// TestRacingProcesses starts several real processes at once against each
// coordinator: all get distinct worker IDs, and one more than the range
// holds gets the exhaustion error.
func TestRacingProcesses(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kins(t) {
		t.Run(k.name, func(t *testing.T) {
			const procs, max = 4, 3
			type result struct {
				line string
				err  error
			}
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				results []result
				stdins  []io.WriteCloser
				cmds    []*exec.Cmd
			)
			start := make(chan struct{})
			for i := 0; i < procs; i++ {
				cmd := exec.Command(exe, "-test.run=^$")
				cmd.Env = append(os.Environ(), "IDMINT_WORKER_CHILD="+k.url(i), "IDMINT_WORKER_MAX="+strconv.Itoa(max))
				in, _ := cmd.StdinPipe()
				out, _ := cmd.StdoutPipe()
				cmd.Stderr = os.Stderr
				stdins = append(stdins, in)
				cmds = append(cmds, cmd)
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					if err := cmd.Start(); err != nil {
						mu.Lock()
						results = append(results, result{err: err})
						mu.Unlock()
						return
					}
					line, err := bufio.NewReader(out).ReadString('\n')
					mu.Lock()
					results = append(results, result{line: strings.TrimSpace(line), err: err})
					mu.Unlock()
				}()
			}
			close(start)
			wg.Wait()
			// The extra process, once all of the range is held.
			cmd := exec.Command(exe, "-test.run=^$")
			cmd.Env = append(os.Environ(), "IDMINT_WORKER_CHILD="+k.url(procs), "IDMINT_WORKER_MAX="+strconv.Itoa(max))
			cmd.Stdin = strings.NewReader("")
			extra, err := cmd.Output()
			for _, in := range stdins {
				in.Close()
			}
			for _, c := range cmds {
				c.Wait()
			}
			if err != nil {
				t.Fatal(err)
			}
			ids := map[string]bool{}
			for _, r := range results {
				f := strings.Fields(r.line)
				if r.err != nil || len(f) != 3 || f[0] != "ok" {
					t.Fatalf("child: %q, %v", r.line, r.err)
				}
				if ids[f[1]] {
					t.Fatalf("two processes got worker id %s: %+v", f[1], results)
				}
				ids[f[1]] = true
			}
			if !strings.Contains(string(extra), "no free worker id: 4 of 4 in use") {
				t.Fatalf("extra process said %q, want the exhaustion error", extra)
			}
		})
	}
}

// TestLeafInterop lays out a ZooKeeper tree as Leaf nodes leave it
// (persistent sequential /snowflake/{name}/forever/{ip}:{port}-NNNNNNNNNN
// with {"ip","port","timestamp"}), then checks idmint reuses its own
// endpoint's node, respects its timestamp as the horizon, never takes
// another endpoint's sequence number, and keeps the data Leaf-readable.
func TestLeafInterop(t *testing.T) {
	addr := testserver.Addr(t, testserver.ZooKeeper)
	root := "/" + testserver.Prefix(t) + "/snowflake/leaf-app"
	conn, _, err := zk.Connect([]string{addr}, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mk := func(p string) {
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	parts := strings.Split(strings.TrimPrefix(root+"/forever", "/"), "/")
	for i := range parts {
		mk("/" + strings.Join(parts[:i+1], "/"))
	}
	future := time.Now().Add(2 * time.Second).UnixMilli()
	leaf := map[string]int64{}
	for _, n := range []struct {
		ep string
		ts int64
	}{{"10.1.0.1:2181", time.Now().Add(-time.Hour).UnixMilli()}, {"10.1.0.2:8080", future}, {"10.1.0.3:8080", time.Now().UnixMilli()}} {
		host, port, _ := strings.Cut(n.ep, ":")
		data := fmt.Sprintf(`{"ip":"%s","port":"%s","timestamp":%d}`, host, port, n.ts)
		p, err := conn.Create(root+"/forever/"+n.ep+"-", []byte(data), zk.FlagSequence, zk.WorldACL(zk.PermAll))
		if err != nil {
			t.Fatal(err)
		}
		seq, _ := strconv.ParseInt(p[len(p)-10:], 10, 64)
		leaf[n.ep] = seq
	}
	ctx := context.Background()
	// idmint on the endpoint of the second Leaf node takes over its ID and
	// its timestamp (ahead of now) as the horizon.
	a := open(t, "zk://"+addr+root+"?endpoint=10.1.0.2:8080")
	l, err := a.Acquire(ctx, 1023)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if h, _ := l.Load(ctx); l.ID() != leaf["10.1.0.2:8080"] || h.UnixMilli() != future {
		t.Fatalf("took id %d horizon %v; want Leaf's id %d and timestamp %d", l.ID(), h, leaf["10.1.0.2:8080"], future)
	}
	// A new endpoint gets a fresh sequence number, after Leaf's.
	b := open(t, "zk://"+addr+root+"?endpoint=10.1.0.9:8080")
	l2, err := b.Acquire(ctx, 1023)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	for ep, seq := range leaf {
		if l2.ID() == seq {
			t.Fatalf("new endpoint got Leaf node %s's worker id %d", ep, seq)
		}
	}
	// The forever tree still parses as Leaf parses it.
	kids, _, err := conn.Children(root + "/forever")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kids {
		f := strings.Split(k, "-")
		if len(f) != 2 || len(f[1]) != 10 {
			t.Fatalf("child %q breaks Leaf's key.split(\"-\")", k)
		}
		data, _, _ := conn.Get(root + "/forever/" + k)
		if !strings.HasPrefix(string(data), `{"ip":"`) || !strings.Contains(string(data), `"timestamp":`) {
			t.Fatalf("node %s data %s is not Leaf's endpoint JSON", k, data)
		}
	}
	hs, err := a.List(ctx)
	if err != nil || len(hs) != 4 {
		t.Fatalf("List = %+v, %v; want Leaf's 3 nodes and ours", hs, err)
	}
	// A narrow layout cannot take a sequence number beyond it.
	c := open(t, "zk://"+addr+root+"?endpoint=10.1.0.10:8080")
	if _, err := c.Acquire(ctx, 2); !errors.Is(err, ErrNoFreeID) {
		t.Fatalf("Acquire with max 2 on a tree with 4 nodes = %v, want ErrNoFreeID", err)
	}
}
