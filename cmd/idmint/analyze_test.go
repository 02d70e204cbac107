package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idmint/idmint/analyze"
)

// TestAnalyzeGeneratedIDs: IDs from `idmint gen` are reported without
// defects; the same IDs with a repeated line and a line moved back are
// reported with both, in text, JSON and HTML, and --check fails on them.
func TestAnalyzeGeneratedIDs(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCLI(t, "gen", "snowflake", "--layout", "twitter", "--node", "worker=3,datacenter=1", "--horizon", "memory", "-n", "5000")
	if code != 0 {
		t.Fatalf("gen: exit %d %s", code, errOut)
	}
	ids := strings.Fields(out)
	dir := t.TempDir()
	clean := filepath.Join(dir, "clean.txt")
	if err := os.WriteFile(clean, []byte(strings.Join(ids, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI(t, "analyze", clean, "--json")
	if code != 0 {
		t.Fatalf("analyze clean: exit %d %s", code, errOut)
	}
	var rep analyze.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	for _, f := range rep.Findings {
		if f.Severity == analyze.Defect {
			t.Fatalf("generated IDs have a defect: %+v", f)
		}
	}
	if rep.Count != 5000 || rep.LayoutName != "twitter" || rep.Duplicates.Extra != 0 || rep.Order.Worst.Descents != 0 {
		t.Fatalf("report %+v", rep)
	}

	// A duplicate right after its original (lines 101 and 102) and two
	// IDs 1,000 lines apart swapped.
	bad := append(append(append([]string{}, ids[:101]...), ids[100]), ids[101:]...)
	bad[2000], bad[3000] = bad[3000], bad[2000]
	badFile := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(badFile, []byte(strings.Join(bad, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	htmlFile := filepath.Join(dir, "report.html")
	code, out, errOut = runCLI(t, "analyze", badFile, "--html", htmlFile, "--check")
	if code != 1 || !strings.Contains(errOut, "--check") {
		t.Fatalf("--check on bad IDs: exit %d %s", code, errOut)
	}
	// The verdict first, in plain words and the singular where it is one;
	// the statistics only with --details.
	if !strings.HasPrefix(out, "NOT clean: ") || !strings.Contains(out, " defects in 5001 IDs of snowflake, layout twitter (guessed; --details says how)\n  defect   duplicates 1 duplicate ID: ") {
		t.Errorf("text report does not start with the verdict:\n%s", out)
	}
	for _, want := range []string{"1 duplicate ID: ", "(lines 101, 102)", "defect   disorder   2 IDs are lower than", "--details"} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "duplicates  ") || strings.Contains(out, "1 duplicate IDs") {
		t.Errorf("statistics without --details, or a plural for one:\n%s", out)
	}
	code, out, _ = runCLI(t, "analyze", badFile, "--details")
	for _, want := range []string{"NOT clean", "duplicates  1 extra copy of 1 value (5000 distinct IDs)", "lines 101, 102", "largest displacement 1000", "per worker (1 worker)"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("--details: exit %d, report lacks %q:\n%s", code, want, out)
		}
	}
	page, err := os.ReadFile(htmlFile)
	if err != nil {
		t.Fatal(err)
	}
	h := string(page)
	if strings.Count(h, "<svg") != 4 || strings.Contains(h, "<script") || strings.Contains(h, "src=") || strings.Contains(h, "href=") {
		t.Fatalf("HTML: %d charts, or it loads something", strings.Count(h, "<svg"))
	}
	for _, want := range []string{"IDs over time", "id mod N", "Out of order", "duplicates"} {
		if !strings.Contains(h, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
}

func TestAnalyzeStdinAndErrors(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader("5\n3\n4\n"), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	if code := run(context.Background(), e, []string{"analyze", "-", "--format", "integer"}); code != 0 || !strings.Contains(out.String(), "in 3 IDs of integer") {
		t.Fatalf("stdin: exit %d %s %s", code, out.String(), errb.String())
	}
	// Standard error is no terminal here: no progress line on it.
	if errb.Len() != 0 {
		t.Fatalf("stderr %q; want nothing when it is not a terminal", errb.String())
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"analyze", "/nonexistent/ids.txt"}, "ids.txt"},
		{[]string{"analyze", "a", "b"}, "too many arguments"},
		{[]string{"analyze", "--layout", "bogus"}, "bogus"},
		{[]string{"analyze", "--format", "nosuch"}, `"nosuch"`},
		{[]string{"analyze", "--format", "ordernum", "--order-format", "length=3"}, "order-format"},
		{[]string{"analyze", "--mod-sample", "-1"}, "mod-sample"},
		{[]string{"analyze"}, "no IDs"},
	} {
		code, _, errOut := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}

// The progress line redraws itself (a carriage return, no newline) with
// the lines read.
func TestAnalyzeProgressLine(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	p := progressLine(&b)
	p(65536)
	p(70000)
	if got := b.String(); got != "\ridmint analyze: 65536 lines read\ridmint analyze: 70000 lines read" {
		t.Fatalf("progress %q", got)
	}
	if isTerminal(&b) {
		t.Fatal("a buffer taken for a terminal")
	}
}
