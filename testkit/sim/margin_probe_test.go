package sim

import (
	"flag"
	"testing"
	"time"
)

var margins = flag.Bool("sim.margins", false, "run TestMarginProbe: how often smaller lease margins fail under large drift")

// TestMarginProbe explores, on request, how small the lease margin can be
// for a given clock drift before the simulator finds a violation: it shows
// what the margin buys, and has no pass/fail of its own.
func TestMarginProbe(t *testing.T) {
	if !*margins {
		t.Skip("exploration only; run with -sim.margins")
	}
	for _, m := range []time.Duration{time.Millisecond, 4 * time.Millisecond, 20 * time.Millisecond, 200 * time.Millisecond} {
		for _, d := range []float64{500e-6, 2000e-6} {
			n := 0
			first := uint64(0)
			viol := ""
			for seed := uint64(1); seed <= 2000; seed++ {
				if r := Run(seed, Config{Margin: m, MaxDrift: d}); r.Failed() {
					n++
					if first == 0 {
						first, viol = seed, r.Violation
					}
				}
			}
			t.Logf("margin %v drift %.0fppm: %d of 2000 seeds failed (first %d: %s)", m, d*1e6, n, first, viol)
		}
	}
}
