package main

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestSQLInstagram(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCLI(t, "sql", "instagram", "--schema", "shard_5", "--shard", "5")
	if code != 0 || !strings.Contains(out, `"shard_5"`) || !strings.Contains(out, "1314220021721") || !strings.Contains(out, "% 1024") {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sql"}, "instagram"},
		{[]string{"sql", "instagram", "--schema", "shard_5"}, "-1"},
		{[]string{"sql", "instagram", "--schema", "Robert'); DROP", "--shard", "1"}, "Robert"},
		{[]string{"sql", "instagram", "--schema", "s", "--shard", "8192"}, "8192"},
	} {
		code, _, errOut := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d %q, want exit 2 naming %q", c.args, code, errOut, c.want)
		}
	}
}

func TestMigrateSQLite(t *testing.T) {
	t.Parallel()
	url := "sqlite://" + filepath.Join(t.TempDir(), "s.db")
	for i := 0; i < 2; i++ { // idempotent
		if code, out, errOut := runCLI(t, "migrate", "--store", url); code != 0 || !strings.Contains(out, "migrated") {
			t.Fatalf("run %d: exit %d %s %s", i, code, out, errOut)
		}
	}
	if code, _, errOut := runCLI(t, "migrate", "--store", "ftp://x"); code != 2 || !strings.Contains(errOut, "ftp") {
		t.Fatalf("bad scheme: exit %d %s", code, errOut)
	}
}
