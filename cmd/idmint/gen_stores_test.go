package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/idmint/idmint/testkit/testserver"
)

// collectRuns runs the CLI several times and checks every ID it printed is
// unique and, within each run, strictly increasing.
func collectRuns(t *testing.T, runs int, args ...string) []int64 {
	t.Helper()
	seen := map[int64]bool{}
	var all []int64
	for r := 0; r < runs; r++ {
		code, out, errOut := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		var prev int64
		for _, f := range strings.Fields(out) {
			id, err := strconv.ParseInt(f, 10, 64)
			if err != nil || id <= prev || seen[id] {
				t.Fatalf("run %d: ID %q repeated or not increasing after %d", r, f, prev)
			}
			seen[id], prev = true, id
			all = append(all, id)
		}
	}
	return all
}

func TestGenSegment(t *testing.T) {
	t.Parallel()
	store := "sqlite://" + filepath.Join(t.TempDir(), "sub", "s.db")
	if ids := collectRuns(t, 3, "gen", "segment", "--store", store, "--key", "order", "--step", "50", "-n", "120"); len(ids) != 360 {
		t.Fatalf("%d IDs", len(ids))
	}
	if code, _, errOut := runCLI(t, "gen", "segment", "--store", store, "--key", ""); code != 2 || !strings.Contains(errOut, "--key") {
		t.Fatalf("empty key: exit %d %s", code, errOut)
	}
}

func TestGenTicketPostgres(t *testing.T) {
	t.Parallel()
	dsn := testserver.Database(t, testserver.Postgres)
	if ids := collectRuns(t, 2, "gen", "ticket", "--servers", dsn, "-n", "50"); len(ids) != 100 {
		t.Fatalf("%d IDs", len(ids))
	}
}

func TestGenRedis(t *testing.T) {
	t.Parallel()
	addr := testserver.Addr(t, testserver.Redis)
	marks := "sqlite://" + filepath.Join(t.TempDir(), "marks.db")
	key := "idmint:" + testserver.Prefix(t)
	if ids := collectRuns(t, 3, "gen", "redis", "--redis", addr, "--key", key, "--marks", marks, "-n", "100"); len(ids) != 300 {
		t.Fatalf("%d IDs", len(ids))
	}
}

func TestGenStoresBadInput(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"gen", "ticket"}, "--servers"},
		{[]string{"gen", "redis"}, "--redis"},
		{[]string{"gen", "redis", "--redis", "127.0.0.1:1", "--marks", "ftp://x"}, "--marks"},
		{[]string{"gen", "segment", "--step", "0", "--store", "sqlite://" + filepath.Join(t.TempDir(), "s.db")}, "step"},
	} {
		code, _, errOut := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d %q, want 2 naming %q", c.args, code, errOut, c.want)
		}
	}
}
