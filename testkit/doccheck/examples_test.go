package doccheck

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/testkit/idtest"
)

// An example is a fenced block of the README or docs/ whose lines start
// with "$ ": each such line is a command, the lines up to the next one its
// expected output. TestExamples runs every example against a real
// `idmint serve` on its zero-config default and compares the output by
// shape: runs of digits and hex stand for any number, runs of spaces for
// any spacing, a line "..." for any lines, a line ending in "..." for any
// rest of the line, and "  # comment" after an expected line is ignored.
// A block preceded by <!-- not run: REASON --> is listed, not run.
type example struct {
	page, cmd string
	line      int
	want      []string
	skip      string
}

var notRunRE = regexp.MustCompile(`<!-- not run: (.*?) -->`)

func examples(t *testing.T) []example {
	pages, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	pages = append([]string{filepath.Join(root, "README.md")}, pages...)
	var out []example
	for _, p := range pages {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		in, skip, prev := false, "", ""
		cur := -1 // the example of the open block that lines belong to
		n := 0
		for sc.Scan() {
			n++
			l := sc.Text()
			switch {
			case strings.HasPrefix(l, "```"):
				in, cur, skip = !in, -1, ""
				if m := notRunRE.FindStringSubmatch(prev); in && m != nil {
					skip = m[1]
				}
			case in && strings.HasPrefix(l, "$ "):
				out = append(out, example{page: rel(p), line: n, cmd: l[2:], skip: skip})
				cur = len(out) - 1
			case in && cur >= 0:
				out[cur].want = append(out[cur].want, l)
			}
			if strings.TrimSpace(l) != "" {
				prev = l
			}
		}
		f.Close()
	}
	return out
}

var (
	// A number, or a hex group without a digit: a random UUID group such
	// as "bbcb" (about one in 50 four-digit groups) is a number too.
	numRE     = regexp.MustCompile(`[0-9a-fA-F]*[0-9][0-9a-fA-F]*|\b[a-fA-F]{4,}\b`)
	spaceRE   = regexp.MustCompile(`\s+`)
	commentRE = regexp.MustCompile(`\s{2,}# .*$`)
)

func shape(s string) string {
	s = numRE.ReplaceAllString(s, "0")
	return strings.TrimSpace(spaceRE.ReplaceAllString(s, " "))
}

// match reports whether got has the shape of want.
func match(want, got []string) bool {
	if len(want) == 0 {
		return true
	}
	w := strings.TrimSpace(commentRE.ReplaceAllString(want[0], ""))
	if w == "..." {
		for i := 0; i <= len(got); i++ {
			if match(want[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	if len(got) == 0 {
		return false
	}
	sw, sg := shape(w), shape(got[0])
	if strings.HasSuffix(sw, "...") {
		if !strings.HasPrefix(sg, strings.TrimSpace(strings.TrimSuffix(sw, "..."))) {
			return false
		}
	} else if sw != sg {
		return false
	}
	return match(want[1:], got[1:])
}

func TestExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("builds idmint and runs a server; without -short")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("the examples use curl; install it (apt-get install curl) to run them")
	}
	exs := examples(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "idmint")
	build := idtest.BuildCommand(bin)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv := exec.CommandContext(ctx, bin, "serve", "--listen", "127.0.0.1:0")
	srv.WaitDelay = 10 * time.Second
	srv.Dir = dir
	stdout, _ := srv.StdoutPipe()
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); srv.Wait() }()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := regexp.MustCompile(`listening on https?://([0-9.:]+)`).FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	var base string
	select {
	case base = <-addr:
	case <-time.After(60 * time.Second):
		t.Fatal("idmint serve did not say where it listens within 60 s")
	}
	ready := false
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		out, _ := exec.Command("curl", "-s", "http://"+base+"/readyz").Output()
		if strings.Contains(string(out), "ready") {
			ready = true
			break
		}
		time.Sleep(100 * time.Millisecond) // polling a real process's readiness
	}
	if !ready {
		t.Fatal("idmint serve not ready within 60 s")
	}
	run, skipped := 0, 0
	for _, ex := range exs {
		if ex.skip != "" {
			skipped++
			t.Logf("not run: %s:%d %s (%s)", ex.page, ex.line, ex.cmd, ex.skip)
			continue
		}
		cmd := ex.cmd
		cmd = strings.ReplaceAll(cmd, "go run ./cmd/idmint", bin)
		if strings.HasPrefix(cmd, "idmint ") {
			cmd = bin + cmd[len("idmint"):]
		}
		cmd = strings.ReplaceAll(cmd, "127.0.0.1:8080", base)
		cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
		c := exec.CommandContext(cctx, "bash", "-c", cmd)
		c.Dir = dir
		var stderr strings.Builder
		c.Stderr = &stderr
		out, err := c.Output()
		ccancel()
		run++
		got := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
		if len(out) == 0 {
			got = nil
		}
		want := ex.want
		for len(want) > 0 && strings.TrimSpace(want[len(want)-1]) == "" {
			want = want[:len(want)-1]
		}
		if !match(want, got) {
			t.Errorf("%s:%d: $ %s\n(exit %v, stderr %q)\ngot:\n%s\nwant the shape of:\n%s", ex.page, ex.line, ex.cmd, err, stderr.String(), strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	t.Logf("%d examples run, %d marked not run", run, skipped)
	if run == 0 {
		t.Fatal("no example ran: the scan of the docs is broken")
	}
}

// The shape comparison itself: numbers and spacing are free, words are not.
func TestMatchShape(t *testing.T) {
	for _, c := range []struct {
		want, got string
		ok        bool
	}{
		{`{"ids":["1","2"]}`, `{"ids":["17","18"]}`, true},
		{`{"ids":["1","2"]}`, `{"id":["17","18"]}`, false},
		{"a  b", "a b", true},
		{"x\n...\nz", "x\ny\ny\nz", true},
		{"x\n...", "x", true},
		{"x\nz", "x\ny", false},
		{"ab...", "abc def", true},
		{`{"first":"4"}     # comment`, `{"first":"9"}`, true},
		{"01a22fc5-5417-7355", "0193ffe1-0000-7aaa", true},
		{"01a24eca-2d27-7285-8d7a-1773f6719266", "01a24eca-2d27-7285-bbcb-1773f6719266", true},
	} {
		if got := match(strings.Split(c.want, "\n"), strings.Split(c.got, "\n")); got != c.ok {
			t.Errorf("match(%q, %q) = %v, want %v", c.want, c.got, got, c.ok)
		}
	}
}
