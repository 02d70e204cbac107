package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// lockFileName is the file in the data directory `idmint serve` holds an
// exclusive lock on for as long as it runs.
const lockFileName = "idmint.lock"

// errDataDirInUse is wrapped by lockDataDir's error when another process
// holds the data directory.
var errDataDirInUse = errors.New("data directory in use")

// dataDirLock is the held lock on a data directory; Release gives it up
// (process exit does too, whatever the cause).
type dataDirLock struct{ f *os.File }

// Release unlocks the data directory.
func (l *dataDirLock) Release() error { return l.f.Close() }

// lockDataDir takes an exclusive lock on dir's lock file without waiting,
// so that only one server runs on a data directory: two servers on one
// SQLite store and one file:// worker ID issue the same IDs. The file then
// holds this process's pid, which a refused server names.
func lockDataDir(dir string) (*dataDirLock, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	path := filepath.Join(abs, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock data directory %s: %w", abs, err)
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock data directory %s: %s: %w", abs, path, err)
	}
	if !held {
		holder := "another process"
		if b, err := os.ReadFile(path); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				holder = "pid " + strconv.Itoa(pid)
			}
		}
		f.Close()
		return nil, fmt.Errorf("%w: %s is locked by another idmint serve (%s; lock file %s): one server per data directory, "+
			"or the two issue the same IDs; stop it, or give this server its own --data (and, on another host, a shared etcd://, zk:// or SQL --coordinator)",
			errDataDirInUse, abs, holder, path)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dataDirLock{f: f}, nil
}
