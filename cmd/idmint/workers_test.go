package main

import (
	"strings"
	"testing"
)

func TestWorkersList(t *testing.T) {
	t.Parallel()
	url := "sqlite://" + t.TempDir() + "/workers.db"
	if code, _, errOut := runCLI(t, "gen", "snowflake", "--layout", "twitter", "--node", "datacenter=2", "--coordinator", url, "-n", "5"); code != 0 {
		t.Fatalf("gen: exit %d: %s", code, errOut)
	}
	code, out, errOut := runCLI(t, "workers", "--coordinator", url)
	if code != 0 || !strings.Contains(out, "GENERATION") || !strings.Contains(out, "\n0 ") {
		t.Fatalf("workers: exit %d:\n%s%s", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, "workers", "--coordinator", "etcd://"); code != 2 || !strings.Contains(errOut, "--coordinator") {
		t.Fatalf("bad URL: exit %d %s", code, errOut)
	}
}
