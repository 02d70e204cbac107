package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// What a new user meets in the first ten minutes (issue 14, item 6).

// -h is asked-for output: it goes to stdout, exits 0, and each flag reads
// as --name TYPE, never as a word lifted out of backquotes in its usage
// ("-layout idmint layouts").
func TestHelpOnStdout(t *testing.T) {
	t.Parallel()
	cmds := [][]string{{"decode", "-h"}, {"layouts", "-h"}, {"workers", "--help"}, {"version", "-h"}, {"sql", "-h"},
		{"sql", "instagram", "-h"}, {"gen", "snowflake", "-h"}, {"gen", "uuid-v7", "-h"}, {"migrate", "-h"},
		{"ordernum", "-h"}, {"analyze", "-h"}, {"serve", "-h"}}
	lifted := regexp.MustCompile(`(?m)^\s+-+[a-z-]+ idmint`)
	for _, args := range cmds {
		code, out, errOut := runCLI(t, args...)
		if code != 0 || errOut != "" || !strings.HasPrefix(out, "Usage: idmint ") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want the usage on stdout and exit 0", args, code, out, errOut)
			continue
		}
		if m := lifted.FindString(out); m != "" {
			t.Errorf("%v: flag rendered as %q:\n%s", args, m, out)
		}
	}
	_, out, _ := runCLI(t, "decode", "-h")
	if !strings.Contains(out, "  --layout string\n") {
		t.Errorf("decode -h does not show --layout string:\n%s", out)
	}
}

// A bad flag is reported once, on stderr, with the way to the flags.
func TestFlagErrorPrintedOnce(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCLI(t, "decode", "--bogus", "1")
	if code != 2 || out != "" {
		t.Fatalf("exit %d stdout %q", code, out)
	}
	if strings.Count(errOut, "bogus") != 1 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "idmint decode -h") {
		t.Fatalf("stderr %q: want one line naming -bogus and `idmint decode -h`", errOut)
	}
}

func TestVersionFlag(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"--version", "-version"} {
		if code, out, errOut := runCLI(t, f); code != 0 || !strings.HasPrefix(out, "idmint ") {
			t.Errorf("%s: exit %d stdout %q stderr %q", f, code, out, errOut)
		}
	}
}

// A stray argument is an error naming it, never silently ignored.
func TestStrayArgumentsRefused(t *testing.T) {
	t.Parallel()
	cases := [][]string{
		{"version", "now"},
		{"layouts", "twitter"},
		{"workers", "list"},
		{"migrate", "up"},
		{"gen", "uuid-v7", "5"},
		{"gen", "snowflake", "--node", "worker=1", "3"},
		{"gen", "timeid-member", "--member", "9", "x"},
		{"sql", "instagram", "--schema", "s", "--shard", "1", "extra"},
	}
	for _, args := range cases {
		code, out, errOut := runCLI(t, args...)
		if code != 2 || out != "" || !strings.Contains(errOut, `unexpected argument "`+args[len(args)-1]+`"`) {
			t.Errorf("%v: exit %d stdout %q stderr %q", args, code, out, errOut)
		}
	}
}

// `idmint workers` with its default reads ./idmint-data/worker, where a
// zero-config `idmint serve` keeps its worker ID (a file:// URL must be
// absolute, so a relative default failed with its own error).
func TestWorkersDefaultCoordinator(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	// In a folder without ./idmint-data it says where it looked and fails,
	// and creates nothing there.
	data := filepath.Join(dir, "idmint-data")
	if code, out, errOut := runCLI(t, "workers"); code != 1 || out != "" || !strings.Contains(errOut, data) || !strings.Contains(errOut, "--coordinator") {
		t.Fatalf("workers in an empty directory: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("workers in an empty directory created %s (stat: %v)", data, err)
	}
	// With the directory but no lease yet it says which coordinator is empty.
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI(t, "workers"); code != 0 || !strings.Contains(out, "no worker IDs recorded in file://"+data) {
		t.Fatalf("workers with an empty data directory: exit %d\n%s%s", code, out, errOut)
	}
	url := "file://" + filepath.Join(dir, "idmint-data", "worker")
	if code, _, errOut := runCLI(t, "gen", "snowflake", "--layout", "leaf", "--coordinator", url, "-n", "3"); code != 0 {
		t.Fatalf("gen: %s", errOut)
	}
	code, out, errOut := runCLI(t, "workers")
	if code != 0 || !strings.Contains(out, "GENERATION") || strings.Contains(out, "no worker IDs") {
		t.Fatalf("workers after a lease: exit %d\n%s%s", code, out, errOut)
	}
}

// `idmint migrate` with its default store creates ./idmint-data first.
func TestMigrateDefaultStore(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if code, out, errOut := runCLI(t, "migrate"); code != 0 || !strings.Contains(out, "migrated") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "idmint-data", "segments.db")); err != nil {
		t.Fatal(err)
	}
}

// gen and decode default to the layout idmint serve issues (leaf), so an
// ID idmint issued decodes as itself: worker 40 is worker 40, not
// "datacenter 1, worker 8" under Twitter's split of the same 10 bits. gen
// without --node says what --node needs.
func TestDefaultLayoutDecodesWhatIdmintIssues(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCLI(t, "gen", "snowflake", "-n", "3")
	if code != 2 || out != "" || !strings.Contains(errOut, "flag --node: missing") || !strings.Contains(errOut, "worker=0..1023") {
		t.Fatalf("gen snowflake without --node: exit %d stdout %q stderr %q", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "gen", "snowflake", "--layout", "twitter")
	if code != 2 || !strings.Contains(errOut, "datacenter=0..31,worker=0..31") {
		t.Fatalf("gen --layout twitter without --node: exit %d stderr %q", code, errOut)
	}
	code, out, errOut = runCLI(t, "gen", "snowflake", "--node", "worker=40", "--horizon", "memory")
	if code != 0 {
		t.Fatalf("gen: exit %d %s", code, errOut)
	}
	id := strings.TrimSpace(out)
	code, out, errOut = runCLI(t, "decode", id)
	if code != 0 || !strings.Contains(out, "layout     leaf (snowflake)\n") || !strings.Contains(out, "node       40 (worker)\n") ||
		strings.Contains(out, "datacenter") || !strings.Contains(out, "layout leaf assumed") {
		t.Fatalf("decode %s: exit %d\n%s%s", id, code, out, errOut)
	}
	// Meituan Leaf's own ID (snowflake/builtin_test.go): worker 378.
	code, out, _ = runCLI(t, "decode", "1541815603606036480")
	if code != 0 || !strings.Contains(out, "node       378 (worker)\n") {
		t.Fatalf("decode of a Leaf ID:\n%s", out)
	}
	// With --layout given, nothing is assumed.
	if _, out, _ = runCLI(t, "decode", "--layout", "twitter", "1050118621198921728"); strings.Contains(out, "assumed") {
		t.Fatalf("--layout given, yet:\n%s", out)
	}
}

// gen --json prints one object with every ID as a string, for every kind,
// and the IDs are the ones the line output would carry.
func TestGenJSON(t *testing.T) {
	t.Parallel()
	store := "sqlite://" + filepath.Join(t.TempDir(), "s.db")
	for _, args := range [][]string{
		{"gen", "snowflake", "--node", "worker=5", "--horizon", "memory", "-n", "5000"},
		{"gen", "uuid-v7", "-n", "3"},
		{"gen", "flake128", "--worker", "7", "-n", "2"},
		{"gen", "timeid-member", "--member", "42", "-n", "2"},
		{"gen", "segment", "--store", store, "-n", "3"},
	} {
		code, out, errOut := runCLI(t, append(args, "--json")...)
		if code != 0 {
			t.Fatalf("%v --json: exit %d %s", args, code, errOut)
		}
		var got struct {
			Kind string   `json:"kind"`
			IDs  []string `json:"ids"`
		}
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("%v --json: not one JSON object: %v\n%.300s", args, err, out)
		}
		n, _ := strconv.Atoi(args[len(args)-1])
		seen := map[string]bool{}
		for _, id := range got.IDs {
			if id == "" || seen[id] {
				t.Fatalf("%v --json: empty or repeated ID %q", args, id)
			}
			seen[id] = true
		}
		if got.Kind != args[1] || len(seen) != n {
			t.Fatalf("%v --json: kind %q, %d IDs; want %q, %d", args, got.Kind, len(seen), args[1], n)
		}
		if args[1] == "segment" && strings.Join(got.IDs, ",") != "1,2,3" {
			t.Fatalf("segment --json: %v, want the first three", got.IDs)
		}
	}
}

// A flag a kind does not use is refused, not ignored: only flake128 and
// timeid-gene have a worker, and flake128 needs one chosen.
func TestGenFlagsThatDoNotApply(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"gen", "uuid-v7", "--worker", "3"},
		{"gen", "ulid", "--worker", "3"},
		{"gen", "timeid-member", "--member", "1", "--worker", "3"},
	} {
		if code, _, errOut := runCLI(t, args...); code != 2 || !strings.Contains(errOut, "-worker") {
			t.Errorf("%v: exit %d %q; want 2 naming -worker", args, code, errOut)
		}
	}
	if code, _, errOut := runCLI(t, "gen", "flake128"); code != 2 || !strings.Contains(errOut, "flag --worker: missing") {
		t.Errorf("gen flake128 without --worker: exit %d %q", code, errOut)
	}
}

// decode of a flake128 ID names its worker as gen's --worker took it.
func TestDecodeFlake128Worker(t *testing.T) {
	t.Parallel()
	_, out, _ := runCLI(t, "gen", "flake128", "--worker", "7")
	code, out, errOut := runCLI(t, "decode", strings.TrimSpace(out))
	if code != 0 || !strings.Contains(out, "7 in decimal") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}
