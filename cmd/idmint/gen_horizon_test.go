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
