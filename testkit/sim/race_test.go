//go:build race

package sim

// raceEnabled: the race detector slows each run about tenfold.
const raceEnabled = true
