//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package main

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes an exclusive flock(2) on f without blocking. It reports
// false when another open file description holds it — another process, or
// another server in this one. The kernel drops the lock when the process
// dies, so a killed server leaves nothing to clean up.
func tryLock(f *os.File) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		case errors.Is(err, syscall.EINTR):
			continue
		}
		return false, err
	}
}

// privateFiles makes every file the server creates from now on (SQLite's
// journals, the worker file, the marks log) readable by its owner only,
// whatever the caller's umask: the data directory holds tokens, leases and
// the segment store.
func privateFiles() { syscall.Umask(0o077) }
