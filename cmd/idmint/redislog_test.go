package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A Redis that refuses connections is reported once, as idmint's error: the
// client's own log lines (which go to the process's stderr, not to env's)
// are not printed beside it. The CLI runs in a child process so that its
// real stderr can be read.
func TestRedisClientDoesNotLog(t *testing.T) {
	if os.Getenv("IDMINT_CHILD_ARGS") != "" {
		e := &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
		os.Exit(run(context.Background(), e, strings.Split(os.Getenv("IDMINT_CHILD_ARGS"), "\x1f")))
	}
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: every dial is refused
	args := []string{"gen", "redis", "--redis", addr, "--marks", "sqlite://" + filepath.Join(t.TempDir(), "m.db")}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestRedisClientDoesNotLog$")
	cmd.Env = append(os.Environ(), "IDMINT_CHILD_ARGS="+strings.Join(args, "\x1f"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("gen redis against a closed port did not end within a minute; stderr:\n%s", stderr.String())
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want status 1; stderr:\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "idmint gen: ") || !strings.Contains(lines[0], addr) {
		t.Fatalf("stderr has %d lines, want idmint's one error naming %s:\n%s", len(lines), addr, stderr.String())
	}
}
