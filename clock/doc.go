// Package clock is the only place in idmint that reads wall time.
//
// Every component that needs the time takes a Clock, so tests can drive it
// with a Fake that moves forwards and backwards. Real is the production
// clock; Fake is the test clock.
//
// A Clock has two notions of time, as an operating system does:
//
//   - Now is the wall clock. It may jump forwards or backwards (NTP steps,
//     an operator, a VM restore). IDs are stamped from it.
//   - Mono is elapsed time on a monotonic clock. It never goes backwards and
//     is what leases and deadlines are judged on (design.md U4): a process
//     paused past its lease sees the pause in Mono even if the wall clock was
//     corrected meanwhile.
package clock
