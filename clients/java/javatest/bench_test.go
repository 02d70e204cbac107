package javatest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestJavaBench measures the Java client beside the Go one, in the same
// run: next() from memory (the Go client's BenchmarkNext, NextParallel
// and NextN100, then the Java harness's forks), and end to end against
// three real nodes: flat out (the capacity), then at half of it, where no
// call may wait for a refill. It runs only with IDMINT_JAVA_BENCH set to
// the seconds each load phase lasts:
//
//	IDMINT_JAVA_BENCH=20 go test -run TestJavaBench -v ./clients/java/javatest/
func TestJavaBench(t *testing.T) {
	secs := os.Getenv("IDMINT_JAVA_BENCH")
	if secs == "" {
		t.Skip("skipping: set IDMINT_JAVA_BENCH to the seconds of each load phase (e.g. 20) to run the benchmarks")
	}
	if n, err := strconv.Atoi(secs); err != nil || n < 1 {
		t.Fatalf("IDMINT_JAVA_BENCH: %q: want a whole number of seconds, such as 20", secs)
	}
	build := buildJava(t)
	java := need(t, "java")
	cp := filepath.Join(build, "classes") + string(os.PathListSeparator) + filepath.Join(build, "test-classes")
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		t.Logf("$ %s %s\n%s", filepath.Base(name), strings.Join(args, " "), out)
		return string(out)
	}
	for range 2 { // interleaved, so both see the same load
		run("go", "test", "-run", "^$", "-bench", "Next$|NextParallel|NextN100", "-benchtime", "2s", "-count", "3", "github.com/idmint/idmint/client")
		run(java, "-cp", cp, "dev.idmint.client.Bench", "memory", "3", "2")
	}

	nodes := startNodes(t)
	urls := make([]string, len(nodes))
	for i, n := range nodes {
		urls[i] = n.URL()
	}
	out := run(java, "-cp", cp, "dev.idmint.client.Bench", "load", strings.Join(urls, ","), "order", "16", secs)
	m := regexp.MustCompile(`RESULT capacity=(\d+) half=(\d+) halfwaits=(\d+) errors=(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no RESULT line from the load benchmark")
	}
	if m[3] != "0" {
		t.Errorf("at half capacity (%s IDs/s) %s calls waited for a refill; want 0", m[2], m[3])
	}
	if m[4] != "0" {
		t.Errorf("%s calls failed at half capacity", m[4])
	}
}
