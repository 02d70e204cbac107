package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeAddressInUse: a taken --listen address fails with a hint naming
// --listen and :0, before the worker lease is taken (the data directory
// has no worker lease afterwards).
func TestServeAddressInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	data := t.TempDir()
	code, _, stderr := runCLI(t, "serve", "--listen", ln.Addr().String(), "--data", data)
	if code == 0 || !strings.Contains(stderr, "already in use") || !strings.Contains(stderr, "--listen") || !strings.Contains(stderr, "127.0.0.1:0") {
		t.Fatalf("serve on a taken address: exit %d, stderr %q; want a hint naming --listen and 127.0.0.1:0", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(data, "worker")); !os.IsNotExist(err) {
		t.Errorf("serve that could not listen left a worker lease in %s (stat: %v); listen must come first", data, err)
	}
}

// TestServeRefusesPlaceholderToken: the example files' admin token
// (CHANGE-ME-...) is refused by --check and by serve, naming the field.
func TestServeRefusesPlaceholderToken(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"serve", "--check"}, {"serve", "--listen", "127.0.0.1:0"}} {
		args = append(args, "--data", t.TempDir())
		code, _, stderr := runCLIEnv(t, map[string]string{"IDMINT_ADMIN_TOKEN": "CHANGE-ME-to-a-long-random-token"}, args...)
		if code == 0 || !strings.Contains(stderr, "admin_token") || !strings.Contains(stderr, "IDMINT_ADMIN_TOKEN") {
			t.Errorf("idmint %s with the placeholder token: exit %d, stderr %q; want a refusal naming admin_token", strings.Join(args, " "), code, stderr)
		}
	}
	code, out, stderr := runCLIEnv(t, map[string]string{"IDMINT_ADMIN_TOKEN": "3f9c1e7a52b84d06a1e2c9d7b4f08a6e"}, "serve", "--check", "--data", t.TempDir())
	if code != 0 || !strings.Contains(out, "configuration OK") {
		t.Errorf("serve --check with a real token: exit %d, %q %q", code, out, stderr)
	}
}
