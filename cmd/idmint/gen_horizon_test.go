package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/snowflake"
)

// TestGenStaticCoordinatorHorizon: --horizon goes with static://, ip:// and
// mac:// coordinators, which keep no horizon of their own; each run records
// its horizon there (lowered to the last ID on exit) and the next run
// starts above it.
func TestGenStaticCoordinatorHorizon(t *testing.T) {
	t.Parallel()
	tw, _ := snowflake.Lookup("twitter")
	path := filepath.Join(t.TempDir(), "static.horizon")
	var last int64
	for run := range 2 {
		code, out, errOut := runCLI(t, "gen", "snowflake", "--layout", "twitter", "--coordinator", "static://3", "--horizon", path,
			"--node", "datacenter=1", "-n", "100")
		if code != 0 {
			t.Fatalf("run %d: exit %d: %s", run, code, errOut)
		}
		for _, l := range strings.Fields(out) {
			id, _ := strconv.ParseInt(l, 10, 64)
			if id <= last {
				t.Fatalf("run %d issued %d, not above %d from before", run, id, last)
			}
			last = id
		}
		var st struct {
			WorkerID int64     `json:"worker_id"`
			Horizon  time.Time `json:"horizon"`
		}
		data, err := os.ReadFile(path)
		if err == nil {
			err = json.Unmarshal(data, &st)
		}
		if err != nil {
			t.Fatalf("run %d: horizon file: %v", run, err)
		}
		p, _ := snowflake.Decode(tw, last)
		if st.WorkerID != 3 || !st.Horizon.Equal(p.Time) || p.Node["worker"] != 3 {
			t.Fatalf("run %d: file records worker %d horizon %v; want worker 3 and the last ID's time %v", run, st.WorkerID, st.Horizon, p.Time)
		}
	}
}

func TestGenHorizonWithCoordinatorRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct{ coord, want string }{
		{"file://" + filepath.Join(dir, "worker"), "file://: that coordinator records the horizon itself"},
		{"sqlite://" + filepath.Join(dir, "ids.db"), "sqlite://: that coordinator records the horizon itself"},
		{"static://3?horizon=" + filepath.Join(dir, "a"), "names horizon= too"},
	} {
		code, _, errOut := runCLI(t, "gen", "snowflake", "--coordinator", c.coord, "--horizon", filepath.Join(dir, "h"), "--node", "datacenter=1")
		if code != 2 || !strings.Contains(errOut, "--horizon") || !strings.Contains(errOut, c.want) {
			t.Errorf("--coordinator %s --horizon: exit %d, %q; want 2 naming %q", c.coord, code, errOut, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "worker")); !os.IsNotExist(err) {
		t.Errorf("a refused run touched the coordinator: %v", err)
	}
}

// TestGenFixedWorkerNeedsHorizon: a worker ID given with --node and one from
// --coordinator static:// carry the same risk (nothing keeps their time
// horizon, so a later run with the clock set back repeats IDs), so both are
// refused alike, with one text and one hint, until --horizon names a file
// or accepts the risk with --horizon memory (static://'s ?horizon=memory).
func TestGenFixedWorkerNeedsHorizon(t *testing.T) {
	t.Parallel()
	const rest = ", so a later run with the clock set back would repeat IDs this run issues; name a file (--horizon FILE, e.g. --horizon ./snowflake.horizon) or accept the risk with --horizon memory\n"
	for _, c := range []struct {
		args []string
		what string
	}{
		{[]string{"--node", "worker=1"}, "the worker ID from --node worker=1"},
		{[]string{"--coordinator", "static://1"}, "the worker ID from --coordinator static://1"},
		{[]string{"--layout", "twitter", "--coordinator", "static://1", "--node", "datacenter=2"}, "the worker ID from --coordinator static://1"},
		{[]string{"--layout", "simpleflake"}, "layout simpleflake (no node field)"},
	} {
		code, out, errOut := runCLI(t, append([]string{"gen", "snowflake"}, c.args...)...)
		want := "idmint gen: flag --horizon: missing: nothing keeps the time horizon of " + c.what + rest
		if code != 2 || out != "" || errOut != want {
			t.Errorf("gen snowflake %v: exit %d, stdout %q, stderr\n%q\nwant exit 2 and\n%q", c.args, code, out, errOut, want)
		}
	}
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--node", "worker=1", "--horizon", "memory"},
		{"--coordinator", "static://1", "--horizon", "memory"},
		{"--coordinator", "static://1?horizon=memory"},
		{"--node", "worker=1", "--horizon", filepath.Join(dir, "node.horizon")},
		{"--coordinator", "static://1", "--horizon", filepath.Join(dir, "static.horizon")},
	} {
		code, out, errOut := runCLI(t, append([]string{"gen", "snowflake", "-n", "3"}, args...)...)
		if code != 0 || len(strings.Fields(out)) != 3 {
			t.Errorf("gen snowflake %v: exit %d, %q %s; want 3 IDs", args, code, out, errOut)
		}
	}
	// "memory" is a word, not a file name: no file of that name appears.
	if _, err := os.Stat("memory"); !os.IsNotExist(err) {
		t.Errorf("--horizon memory wrote a file ./memory: %v", err)
	}
	for _, name := range []string{"node.horizon", "static.horizon"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("--horizon FILE: %v", err)
		}
	}
}
