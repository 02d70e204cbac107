package main

import (
	"os"
	"path/filepath"
	"regexp"
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
	if code, out, errOut := runCLI(t, "workers"); code != 0 || !strings.Contains(out, "no worker IDs") {
		t.Fatalf("workers in an empty directory: exit %d\n%s%s", code, out, errOut)
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
