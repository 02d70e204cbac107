package main

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// TestSecureDataDirWhileFilesComeAndGo: serve tightens the data directory
// again once its stores are open, while the worker lease already rewrites
// its file (write worker.tmp, rename). A file renamed away between the
// listing and its chmod is skipped, not a reason to stop the server.
func TestSecureDataDirWhileFilesComeAndGo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		tmp, dst := filepath.Join(dir, "worker.tmp"), filepath.Join(dir, "worker")
		for !stop.Load() {
			if err := os.WriteFile(tmp, []byte("{}"), 0o600); err != nil {
				return
			}
			if err := os.Rename(tmp, dst); err != nil {
				return
			}
		}
	}()
	defer func() { stop.Store(true); <-done }()
	for i := range 3000 {
		if err := secureDataDir(dir); err != nil {
			t.Fatalf("walk %d: %v", i, err)
		}
	}
}
