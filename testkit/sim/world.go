package sim

import (
	"container/heap"
	"time"

	"github.com/idmint/idmint/clock"
)

// events is a world's queue of what happens next, in global time: events
// at the same time run in the order they were scheduled.
type events struct {
	now time.Duration
	q   queue
	seq int64
}

func (e *events) at(t time.Duration, do func()) {
	e.seq++
	heap.Push(&e.q, &event{at: t, seq: e.seq, do: do})
}

// machine is what both worlds know of one node: its clock's drift, the
// process running on it (incarnation, start, clock), and whether that
// process is paused or down.
type machine struct {
	i      int
	drift  float64
	inc    int           // incarnation: +1 per process start
	born   time.Duration // global time this process started
	clk    *clock.Fake
	paused bool
	down   bool     // crashed, not yet restarted
	held   []func() // what reached the process while it was paused
}

// mono is the process's monotonic clock at global time global.
func (m *machine) mono(global time.Duration) time.Duration {
	return time.Duration(float64(global-m.born) * (1 + m.drift))
}

// deliver runs f for the process of incarnation inc now, or when it
// resumes; never for a process that crashed.
func (m *machine) deliver(inc int, f func()) {
	if m.inc != inc || m.down {
		return
	}
	if m.paused {
		m.held = append(m.held, f)
		return
	}
	f()
}

// pause stops the process for d (GC, SIGSTOP): its clock keeps running but
// nothing reaches it; then resume gets what was held, in order. It reports
// false, doing nothing, for a process already paused or down.
func (m *machine) pause(e *events, d time.Duration, resume func(held []func())) bool {
	if m.paused || m.down {
		return false
	}
	m.paused = true
	inc := m.inc
	e.at(e.now+d, func() {
		if m.inc != inc || m.down {
			return
		}
		m.paused = false
		held := m.held
		m.held = nil
		resume(held)
	})
	return true
}
