package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idmint/idmint/testkit/testserver"
)

// `serve --check` says what it did not check; `--check --connect` opens
// every remote store and coordinator, reports each, and fails when one is
// unreachable. Without --connect the check had said "configuration OK" of
// a file whose hosts did not exist.
func TestServeCheckConnect(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "idmint.yaml")
	body := "witness: none\nstores:\n  gone: postgres://idmint@127.0.0.1:1/idmint?sslmode=disable\nkeys:\n  a: {strategy: segment, store: gone}\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "serve", "--check", "--config", cfg, "--data", dir)
	if code != 0 || !strings.Contains(out, "configuration OK") || !strings.Contains(out, "did not connect to its 1 remote store(s)") {
		t.Fatalf("--check: %d %q %q", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "serve", "--check", "--connect", "--config", cfg, "--data", dir)
	if code == 0 || !strings.Contains(out, "FAIL  stores.gone") || !strings.Contains(errOut, "1 of 1 remote endpoint(s) failed") {
		t.Fatalf("--check --connect to a closed port: %d %q %q", code, out, errOut)
	}
	if code, _, errOut = runCLI(t, "serve", "--connect", "--config", cfg, "--data", dir); code == 0 || !strings.Contains(errOut, "--connect goes with --check") {
		t.Fatalf("--connect alone: %d %q", code, errOut)
	}
	pg := testserver.Database(t, testserver.Postgres)
	body = "witness: none\nstores:\n  default: " + pg + "\nkeys:\n  a: {strategy: segment}\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI(t, "serve", "--check", "--connect", "--config", cfg, "--data", dir)
	if code != 0 || !strings.Contains(out, "ok    stores.default") {
		t.Fatalf("--check --connect to a live PostgreSQL: %d %q %q", code, out, errOut)
	}
}
