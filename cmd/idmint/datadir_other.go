//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package main

import "os"

// tryLock has no flock(2) here: the data directory is not locked, and
// running one server per data directory is up to the operator.
func tryLock(f *os.File) (bool, error) { return true, nil }

// privateFiles has no umask here; secureDataDir's chmod is what there is.
func privateFiles() {}
