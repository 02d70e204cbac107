package sim

import (
	"flag"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var seeds = flag.Int("sim.seeds", 0, "how many seeds each sweep runs (0: 10000, 1000 under -race or -short; long mode: more)")

// budget is the number of seeds a sweep runs.
func budget() int {
	switch {
	case *seeds > 0:
		return *seeds
	case raceEnabled || testing.Short():
		return 1000
	}
	return 10000
}

// sweep runs seeds 1..n of cfg on GOMAXPROCS workers and returns the
// lowest failing seed's result (ok false when none failed) and the IDs
// issued in all.
func sweep(n int, cfg Config) (first Result, ok bool, issued int64) {
	var (
		mu   sync.Mutex
		next atomic.Uint64
		wg   sync.WaitGroup
		tot  atomic.Int64
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				seed := next.Add(1)
				if seed > uint64(n) {
					return
				}
				mu.Lock()
				stop := ok && seed > first.Seed
				mu.Unlock()
				if stop {
					return
				}
				r := Run(seed, cfg)
				tot.Add(int64(r.Issued))
				if r.Failed() {
					mu.Lock()
					if !ok || r.Seed < first.Seed {
						first, ok = r, true
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return first, ok, tot.Load()
}

func TestSeeds(t *testing.T) {
	n := budget()
	r, failed, issued := sweep(n, Config{})
	if failed {
		t.Fatal(r.Report())
	}
	t.Logf("%d seeds, %d IDs issued, no violation", n, issued)
	if issued < int64(n)*50 {
		t.Errorf("only %d IDs issued in %d seeds: the runs barely issue, so the checks prove little", issued, n)
	}
}

// TestDeterministic replays seeds one at a time and then three at once,
// while other runs compete for the CPUs, and requires the same trace:
// nothing in a run may depend on goroutine scheduling.
func TestDeterministic(t *testing.T) {
	const n = 150
	cfg := Config{Bugs: Bugs{DeadlineFromReply: true}} // failing runs too
	want := map[uint64]uint64{}
	for seed := uint64(1); seed <= n; seed++ {
		want[seed] = Run(seed, cfg).Hash
	}
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := uint64(1 + w); seed <= n; seed += 3 {
				if r := Run(seed, cfg); r.Hash != want[seed] {
					mu.Lock()
					t.Errorf("seed %d ran two ways (trace hash %x, then %x); last events of the second:\n%s",
						seed, want[seed], r.Hash, strings.Join(r.Trace, "\n"))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if want[1] == want[2] {
		t.Error("seeds 1 and 2 gave the same trace: the seed does not drive the run")
	}
}

// TestBugsFound re-introduces known mistakes through the seams and
// requires the simulator to find each within the CI seed budget.
func TestBugsFound(t *testing.T) {
	if raceEnabled && *seeds == 0 {
		t.Skip("the race detector leaves time for too few seeds; scripts/test.sh runs this package without it too")
	}
	for _, tc := range []struct {
		name string
		bugs Bugs
	}{
		{"fence removed", Bugs{NoFence: true}},
		{"new holder starts at the old horizon", Bugs{StartAtHorizon: true}},
		{"acquire deadline from the reply time", Bugs{DeadlineFromReply: true}},
		{"keepalive deadline from the reply time", Bugs{KeepaliveFromReply: true}},
		{"late keepalive revives a lost lease", Bugs{ReviveAfterLoss: true}},
		{"first tick past the horizon", Bugs{PastHorizon: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := budget()
			r, failed, _ := sweep(n, Config{Bugs: tc.bugs})
			if !failed {
				t.Fatalf("no violation in %d seeds", n)
			}
			t.Logf("found after %d seeds (seed %d): %s", r.Seed, r.Seed, r.Violation)
		})
	}
}

var (
	one     = flag.Uint64("sim.seed", 0, "run only this seed of the snowflake world (with TestOneSeed) and print its last events")
	oneMono = flag.Uint64("sim.monoseed", 0, "run only this seed of the monotonic world (with TestOneSeed) and print its last events")
)

// TestOneSeed replays one seed, as a failing sweep's report says to.
func TestOneSeed(t *testing.T) {
	var r Result
	switch {
	case *one != 0:
		r = Run(*one, Config{})
	case *oneMono != 0:
		r = RunMonotonic(*oneMono, MonoConfig{})
	default:
		t.Skip("replays one seed; run with -sim.seed=N or -sim.monoseed=N")
	}
	if r.Failed() {
		t.Fatal(r.Report())
	}
	t.Logf("seed %d: %d events, %d IDs issued, no violation; last events:\n%s", r.Seed, r.Events, r.Issued, strings.Join(r.Trace, "\n"))
}

// fileDir is where the runs keep their nodes' horizon files: memory when
// the machine has a tmpfs, so ten thousand runs' fsyncs cost nothing.
func fileDir(t *testing.T) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "idmint-sim-")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

// TestForgetfulDomains: one of the two places a worker ID's horizon is
// kept forgets, and no ID repeats: the coordinator restored from an older
// snapshot (one node: the node's own file remembers), or the node's disk
// losing what it wrote since its start (the coordinator remembers).
func TestForgetfulDomains(t *testing.T) {
	dir := fileDir(t)
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"coordinator restored", Config{Nodes: 1, Dir: dir, Restores: true, MaxOffset: 5 * time.Second}},
		{"disk lies", Config{Dir: dir, LyingDisk: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := budget() / 10
			r, failed, issued := sweep(n, tc.cfg)
			if failed {
				t.Fatal(r.Report())
			}
			t.Logf("%d seeds, %d IDs issued, no violation", n, issued)
		})
	}
}

// TestForgetfulBugsFound: without the node's own file, a restored
// coordinator and a clock set back by seconds make the one node repeat
// IDs, and the simulator sees it.
func TestForgetfulBugsFound(t *testing.T) {
	if raceEnabled && *seeds == 0 {
		t.Skip("the race detector leaves time for too few seeds; scripts/test.sh runs this package without it too")
	}
	n := budget()
	r, failed, _ := sweep(n, Config{Nodes: 1, Restores: true, MaxOffset: 5 * time.Second})
	if !failed {
		t.Fatalf("no violation in %d seeds of a restored coordinator with no horizon file", n)
	}
	t.Logf("found after %d seeds (seed %d): %s", r.Seed, r.Seed, r.Violation)
}
