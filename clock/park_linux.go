package clock

import (
	"runtime"
	"syscall"
	"time"
)

// prctl options (linux/prctl.h).
const (
	prSetTimerSlack = 29
	prGetTimerSlack = 30
)

// shortPark blocks the calling thread in nanosleep for about d (at most
// timerLead+spinWindow), with the thread's timer slack lowered to 1 µs for
// the call and restored after: the default 50 µs slack made nanosleep wake
// 65-80 µs late at p50 on the CI VM, more than the spin window. It may
// return early (a signal); the caller re-checks the clock.
func shortPark(d time.Duration) {
	runtime.LockOSThread()
	old, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prGetTimerSlack, 0, 0)
	if errno == 0 {
		syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1000, 0)
	}
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil)
	if errno == 0 {
		syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, old, 0)
	}
	runtime.UnlockOSThread()
}
