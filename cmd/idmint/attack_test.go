package main

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// The data directory is 0700 and its files 0600 even when it existed
// before with looser modes (idmint issue 11, item 6).
func TestAttackDataDirModes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Unix modes")
	}
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	// Chmod, not the create mode: serve tests in this process set a 077
	// umask (privateFiles).
	for _, f := range []string{"keys.json", "segments.db", "sub/worker"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(dir, f), 0o644)
	}
	outside := filepath.Join(t.TempDir(), "outside")
	os.WriteFile(outside, []byte("x"), 0o644)
	os.Chmod(outside, 0o644)
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := secureDataDir(dir); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, "sub")} {
		if st, _ := os.Stat(p); st.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, want 0700", p, st.Mode().Perm())
		}
	}
	for _, f := range []string{"keys.json", "segments.db", "sub/worker"} {
		if st, _ := os.Stat(filepath.Join(dir, f)); st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, want 0600", f, st.Mode().Perm())
		}
	}
	if st, _ := os.Stat(outside); st.Mode().Perm() != 0o644 {
		t.Errorf("a symbolic link was followed: %s is %v", outside, st.Mode().Perm())
	}
}
