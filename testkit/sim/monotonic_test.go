package sim

import (
	"flag"
	"strings"
	"testing"
)

var monoSeeds = flag.Int("sim.monoseeds", 0, "how many seeds the monotonic sweep runs (0: 60, 6 under -race or -short)")

func monoBudget() int {
	switch {
	case *monoSeeds > 0:
		return *monoSeeds
	case raceEnabled || testing.Short():
		return 6
	}
	return 60
}

// monoSweep runs seeds 1..n of the monotonic world, one at a time, and
// returns the first failing one.
func monoSweep(n int, cfg MonoConfig) (Result, bool, int64) {
	var values int64
	for seed := uint64(1); seed <= uint64(n); seed++ {
		r := RunMonotonic(seed, cfg)
		values += int64(r.Issued)
		if r.Failed() {
			return r, true, values
		}
	}
	return Result{}, false, values
}

func TestMonotonicSeeds(t *testing.T) {
	n := monoBudget()
	r, failed, values := monoSweep(n, MonoConfig{})
	if failed {
		t.Fatal(r.Report())
	}
	t.Logf("%d seeds, %d values issued, no violation", n, values)
	if values < int64(n)*20 {
		t.Errorf("only %d values issued in %d seeds: the runs barely issue, so the checks prove little", values, n)
	}
}

func TestMonotonicDeterministic(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector shuffles the scheduler on purpose, so goroutines the simulator wakes together may run in another order; scripts/test.sh runs this package without it too")
	}
	for seed := uint64(1); seed <= 5; seed++ {
		a, b := RunMonotonic(seed, MonoConfig{}), RunMonotonic(seed, MonoConfig{})
		if a.Hash != b.Hash {
			t.Errorf("seed %d ran two ways; last events of the second:\n%s", seed, strings.Join(b.Trace, "\n"))
		}
	}
}

// TestMonotonicBugsFound puts back, one at a time, mistakes of the
// monotonic leader and requires the simulator to find each within the CI
// seed budget.
func TestMonotonicBugsFound(t *testing.T) {
	if raceEnabled && *monoSeeds == 0 {
		t.Skip("the race detector leaves time for too few seeds; scripts/test.sh runs this package without it too")
	}
	for _, tc := range []struct {
		name string
		cfg  MonoConfig
	}{
		{"second leader after a revoke", MonoConfig{Bugs: MonoBugs{SecondLeader: true}}},
		{"successor does not wait out its predecessor", MonoConfig{Bugs: MonoBugs{NoHandoverWait: true}}},
		{"witness mark ignored", MonoConfig{Dir: fileDir(t), Witness: "separate", Issued: 1000, IssuedIn: "mark", Bugs: MonoBugs{IgnoreWitness: true}}},
		{"floor ignored", MonoConfig{Issued: 1000, IssuedIn: "floor", Bugs: MonoBugs{IgnoreWitness: true}}},
		{"leader trusts its restored key", MonoConfig{Dir: fileDir(t), Witness: "separate", Restores: true, Bugs: MonoBugs{TrustRestoredKey: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := monoBudget()
			r, failed, _ := monoSweep(n, tc.cfg)
			if !failed {
				t.Fatalf("no violation in %d seeds", n)
			}
			t.Logf("found after %d seeds (seed %d): %s", r.Seed, r.Seed, r.Violation)
		})
	}
}

// TestMonotonicIssuedBefore: the key issued values before the run where
// etcd does not show them (a File source, another prefix); the nodes know
// it from their floor, or from the marks in their data directories, and
// every value is above it.
func TestMonotonicIssuedBefore(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  MonoConfig
	}{
		{"floor", MonoConfig{Issued: 1000, IssuedIn: "floor"}},
		{"mark", MonoConfig{Dir: fileDir(t), Witness: "separate", Issued: 1000, IssuedIn: "mark"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := max(monoBudget()/30, 1)
			r, failed, values := monoSweep(n, tc.cfg)
			if failed {
				t.Fatal(r.Report())
			}
			t.Logf("%d seeds, %d values issued, no violation", n, values)
		})
	}
}

// TestMonotonicRestored: etcd restored from an older snapshot takes the
// bound back; every node's data directory and a cluster witness of its
// own keep the marks, and no value repeats or goes back.
func TestMonotonicRestored(t *testing.T) {
	n := max(monoBudget()*3/8, 3)
	r, failed, values := monoSweep(n, MonoConfig{Dir: fileDir(t), Witness: "separate", Restores: true})
	if failed {
		t.Fatal(r.Report())
	}
	t.Logf("%d seeds, %d values issued, no violation", n, values)
}

// TestMonotonicRestoreNoWitness: without a witness a restore takes the
// bound back and a new leader starts below values already issued. The
// simulator finds it.
func TestMonotonicRestoreNoWitness(t *testing.T) {
	if raceEnabled && *monoSeeds == 0 {
		t.Skip("the race detector leaves time for too few seeds; scripts/test.sh runs this package without it too")
	}
	r, failed, _ := monoSweep(monoBudget(), MonoConfig{Restores: true})
	if !failed {
		t.Fatalf("no violation in %d seeds of a restored etcd without a witness", monoBudget())
	}
	t.Logf("found after %d seeds (seed %d): %s", r.Seed, r.Seed, r.Violation)
}
