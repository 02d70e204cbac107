package javatest

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idmint/idmint/monotonic/lincheck"
	"github.com/idmint/idmint/testkit/idtest"
	"github.com/idmint/idmint/testkit/servenode"
	"github.com/idmint/idmint/testkit/testserver"
)

// mavenRepo is Debian's packaged Maven repository, which holds every
// plugin and library the build needs: the build runs offline (-o).
const mavenRepo = "/usr/share/maven-repo"

// need returns the path of tool, or skips the test (fails it under
// CI=true) when it is not installed.
func need(t *testing.T, tool string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed under CI=true: scripts/test.sh installs maven, openjdk and junit5", tool)
		}
		t.Skipf("skipping: %s is not installed; scripts/test.sh installs maven, openjdk and junit5", tool)
	}
	return p
}

// javaBuild is the Maven build shared by the tests: `mvn test` (which
// compiles the client and its tests, and runs the JUnit tests) once into
// a directory of its own.
var javaBuild struct {
	once sync.Once
	dir  string
	out  []byte
	err  error
	took time.Duration
}

func buildJava(t *testing.T) string {
	t.Helper()
	mvn := need(t, "mvn")
	need(t, "java")
	javaBuild.once.Do(func() {
		// IDMINT_JAVA_BUILD names the output of an earlier `mvn
		// -Didmint.build=DIR test-compile` (classes and test-classes) to
		// drive instead of building: a mutant's build, or a quicker rerun.
		if dir := os.Getenv("IDMINT_JAVA_BUILD"); dir != "" {
			javaBuild.dir = dir
			return
		}
		dir, err := os.MkdirTemp("", "idmint-java-")
		if err != nil {
			javaBuild.err = err
			return
		}
		javaBuild.dir = dir
		t0 := time.Now()
		cmd := exec.Command(mvn, "-o", "-q", "-B", "-Dmaven.repo.local="+mavenRepo, "-Didmint.build="+dir, "test")
		cmd.Dir = ".."
		javaBuild.out, javaBuild.err = cmd.CombinedOutput()
		javaBuild.took = time.Since(t0)
	})
	if javaBuild.err != nil {
		t.Fatalf("mvn -o test in clients/java: %v\n%s", javaBuild.err, javaBuild.out)
	}
	return javaBuild.dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if javaBuild.dir != "" && javaBuild.dir != os.Getenv("IDMINT_JAVA_BUILD") {
		os.RemoveAll(javaBuild.dir)
	}
	os.Exit(code)
}

// TestJavaUnit runs the Java client's JUnit tests (fake nodes in the JVM).
func TestJavaUnit(t *testing.T) {
	if os.Getenv("IDMINT_JAVA_BUILD") != "" {
		t.Skip("skipping: IDMINT_JAVA_BUILD names a build to drive; the JUnit tests run when the test builds it")
	}
	dir := buildJava(t)
	reports, _ := filepath.Glob(filepath.Join(dir, "surefire-reports", "TEST-*.xml"))
	if len(reports) == 0 {
		t.Fatalf("mvn test ran no JUnit test (no report in %s)", dir)
	}
	tests := 0
	re := regexp.MustCompile(`tests="(\d+)"`)
	for _, r := range reports {
		b, err := os.ReadFile(r)
		if err != nil {
			t.Fatal(err)
		}
		if m := re.FindSubmatch(b); m != nil {
			n, _ := strconv.Atoi(string(m[1]))
			tests += n
		}
	}
	if tests < 10 {
		t.Fatalf("mvn test ran %d JUnit tests; want the client's whole suite", tests)
	}
	t.Logf("mvn -o test: %d JUnit tests passed in %v", tests, javaBuild.took.Round(time.Second))
}

// node is one `idmint serve` process.
type node = servenode.Node

// startNodes builds cmd/idmint (or takes IDMINT_CLIENT_BIN) and runs
// three `idmint serve` sharing one PostgreSQL segment store (key order,
// step 20000) and one etcd coordinator, which elects the leader of the
// monotonic key seq.
func startNodes(t *testing.T) []*node {
	etcd := testserver.Addr(t, testserver.Etcd)
	pg := testserver.Database(t, testserver.Postgres)
	dir := t.TempDir()
	bin := servenode.Build(t, dir)
	yaml := fmt.Sprintf("coordinator: etcd://%s/java_%s?ttl=3s\nstores:\n  default: %s\nkeys:\n  order:\n    strategy: segment\n    step: 20000\n  flake:\n    strategy: snowflake\n  uid:\n    strategy: uuid\n  seq:\n    strategy: monotonic\n    options:\n      ttl: \"2\"\n",
		etcd, testserver.Prefix(t), pg)
	return servenode.StartN(t, bin, dir, yaml, 3, false)
}

// leaderOf waits until exactly one running node other than not says it
// leads key seq, and returns it.
func leaderOf(t *testing.T, nodes []*node, not *node) *node {
	t.Helper()
	var l *node
	testserver.Eventually(t, "one leader of seq", 60*time.Second, func() bool {
		l = nil
		for _, n := range nodes {
			if n == not || !idtest.MonotonicLeader(n.URL(), "seq") {
				continue
			}
			if l != nil {
				return false
			}
			l = n
		}
		return l != nil
	})
	return l
}

// TestJavaCluster draws IDs through the Java client from three real
// nodes: 64 threads on the segment key order and 16 on the monotonic key
// seq, while the test kills seq's leader with kill -9, SIGSTOPs another
// node past seq's lease, restarts the first on its data and continues
// the second. Every caller must succeed; every segment ID is collected
// and must be unique; the monotonic history (each call's start, return
// and ID on one clock) must pass lincheck: no ID twice, and every ID of
// a call that returned before another began is below that other's.
func TestJavaCluster(t *testing.T) {
	nodes := startNodes(t)
	build := buildJava(t)
	java := need(t, "java")
	out := t.TempDir()
	segOut, monoOut := filepath.Join(out, "segment.bin"), filepath.Join(out, "mono.bin")
	urls := make([]string, len(nodes))
	for i, n := range nodes {
		urls[i] = n.URL()
	}
	const seconds = 14
	cp := filepath.Join(build, "classes") + string(os.PathListSeparator) + filepath.Join(build, "test-classes")
	cmd := exec.Command(java, "-Xmx1g", "-cp", cp, "dev.idmint.client.ChaosDriver",
		strings.Join(urls, ","), strconv.Itoa(seconds), "64", "15000", "order", segOut, "seq", "16", monoOut, "flake", "uid")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
	})
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var log []string
	waitFor := func(prefix string, d time.Duration) string {
		t.Helper()
		deadline := time.After(d)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the Java driver ended before %q: %v\nstdout:\n%s\nstderr:\n%s", prefix, cmd.Wait(), strings.Join(log, "\n"), stderr.String())
				}
				log = append(log, l)
				if strings.HasPrefix(l, prefix) {
					return l
				}
			case <-deadline:
				t.Fatalf("no %q from the Java driver within %v\nstdout:\n%s\nstderr:\n%s", prefix, d, strings.Join(log, "\n"), stderr.String())
			}
		}
	}
	checkAnswers(t, waitFor("CHECK", 60*time.Second))
	waitFor("READY", 60*time.Second)
	start := time.Now()
	at := func(d time.Duration) { time.Sleep(time.Until(start.Add(d))) } // the chaos schedule, not a wait for an event

	at(3 * time.Second)
	killed := leaderOf(t, nodes, nil)
	t.Logf("%v: kill -9 %s, the leader of seq", time.Since(start).Round(time.Millisecond), killed.Name)
	killed.Kill(t)
	at(5 * time.Second)
	var stopped *node
	for _, n := range nodes {
		if n != killed && idtest.MonotonicLeader(n.URL(), "seq") {
			stopped = n // the new leader, when there is one yet
		}
	}
	if stopped == nil {
		stopped = nodes[(slices.Index(nodes, killed)+1)%len(nodes)]
	}
	t.Logf("%v: SIGSTOP %s", time.Since(start).Round(time.Millisecond), stopped.Name)
	stopped.Signal(t, syscall.SIGSTOP)
	at(7 * time.Second)
	t.Logf("%v: restart %s on its data", time.Since(start).Round(time.Millisecond), killed.Name)
	killed.Start(t)
	at(9 * time.Second)
	t.Logf("%v: SIGCONT %s", time.Since(start).Round(time.Millisecond), stopped.Name)
	stopped.Signal(t, syscall.SIGCONT)

	result := waitFor("RESULT", 120*time.Second)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("java driver: %v\nstderr:\n%s", err, stderr.String())
	}
	t.Logf("java driver: %s", result)
	for _, l := range log {
		if strings.HasPrefix(l, "ERROR") {
			t.Errorf("caller error: %s", l)
		}
	}
	if !strings.Contains(result, " errors=0 ") || !strings.Contains(result, " clienterrors=0 ") {
		t.Errorf("callers saw errors: %s", result)
	}

	ids := readInt64s(t, segOut)
	if len(ids) < 64*15000*seconds/4 {
		t.Errorf("only %d segment IDs drawn in %d s; want at least a quarter of the paced %d", len(ids), seconds, 64*15000*seconds)
	}
	slices.Sort(ids)
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			t.Fatalf("segment ID %d handed out twice (of %d IDs)", ids[i], len(ids))
		}
	}
	raw := readInt64s(t, monoOut)
	ops := make([]lincheck.Op, 0, len(raw)/3)
	for i := 0; i+2 < len(raw); i += 3 {
		ops = append(ops, lincheck.Op{Sent: time.Duration(raw[i]), Received: time.Duration(raw[i+1]), IDs: []int64{raw[i+2]}, Label: "java"})
	}
	if len(ops) < 100 {
		t.Errorf("only %d monotonic calls returned", len(ops))
	}
	if v := lincheck.Check(ops, 10); len(v) > 0 {
		for _, x := range v {
			t.Errorf("monotonic history: %s: %s", x.Kind, x.Msg)
		}
	}
	t.Logf("%d segment IDs, all unique; %d monotonic calls, linearizable", len(ids), len(ops))
}

// checkAnswers checks the driver's CHECK line: a batch of snowflake IDs,
// all distinct, one of them decoded by the servers with the key's layout
// to a time near now; three UUIDs as strings; next() on the text key
// refused with text_key.
func checkAnswers(t *testing.T, line string) {
	t.Helper()
	t.Logf("java driver: %s", line)
	f := map[string]string{}
	for _, kv := range strings.Fields(line)[1:] {
		k, v, _ := strings.Cut(kv, "=")
		f[k] = v
	}
	if f["flakes"] != f["distinct"] || f["strategy"] != "snowflake" || f["decoded"] != "true" || f["layout"] == "" {
		t.Errorf("snowflake batch or its decoding: %s", line)
	}
	ms, _ := strconv.ParseInt(f["unixms"], 10, 64)
	now, _ := strconv.ParseInt(f["now"], 10, 64)
	if d := now - ms; d < 0 || d > 120_000 {
		t.Errorf("decoded time %d ms is %d ms from the driver's clock: %s", ms, d, line)
	}
	uuids := strings.Split(f["text"], ",")
	uuidRE := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	if len(uuids) != 3 || uuids[0] == uuids[1] || uuids[1] == uuids[2] {
		t.Errorf("want 3 distinct UUIDs: %s", line)
	}
	for _, u := range uuids {
		if !uuidRE.MatchString(u) {
			t.Errorf("text ID %q is not a UUID", u)
		}
	}
	if f["nexttext"] != "text_key" {
		t.Errorf("next() on a text key: want IdmintRequestException with code text_key; %s", line)
	}
}

func readInt64s(t *testing.T, path string) []int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int64, st.Size()/8)
	if err := binary.Read(bufio.NewReaderSize(f, 1<<20), binary.BigEndian, out); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return out
}
