package worker

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestFileModes: the worker file and its lock are readable by their owner
// only, also after the horizon is rewritten (it is rewritten through a
// temporary file on every extension).
func TestFileModes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "worker")
	a, err := NewFile(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := a.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Extend(ctx, time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + ".lock"} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if m := st.Mode().Perm(); m != 0o600 {
			t.Errorf("%s is %v; want 0600", filepath.Base(p), m)
		}
	}
}
