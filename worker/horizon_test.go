package worker

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/snowflake"
)

var hz0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// fixedRun is one process's run of a static or ip coordinator: a lease from
// a fresh assigner on the horizon file, a snowflake generator bound to it.
type fixedRun struct {
	l   *Lease
	g   *snowflake.Generator
	lay snowflake.Layout
}

func startFixed(t *testing.T, rawURL, layout, field string, clk clock.Clock, rb snowflake.Rollback) *fixedRun {
	t.Helper()
	lay, ok := snowflake.Lookup(layout)
	if !ok {
		t.Fatalf("no layout %s", layout)
	}
	a, err := Open(context.Background(), rawURL, WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	var max int64
	for _, f := range lay.NodeFields() {
		if f.Name == field {
			max = 1<<f.Bits - 1
		}
	}
	l, err := a.Acquire(context.Background(), max)
	if err != nil {
		t.Fatal(err)
	}
	node := map[string]int64{field: l.ID()}
	if layout == "twitter" {
		node["datacenter"] = 1
	}
	g, err := snowflake.New(lay, snowflake.Settings{Node: node, Clock: clk, Horizon: l, Fence: l,
		Rollback: rb, LogicalLimit: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(); l.Close() })
	return &fixedRun{l: l, g: g, lay: lay}
}

func (r *fixedRun) stamp(t *testing.T, id int64) time.Time {
	t.Helper()
	p, err := snowflake.Decode(r.lay, id)
	if err != nil {
		t.Fatal(err)
	}
	return p.Time
}

// TestFixedHorizonSurvivesRestart is design.md U6 for static:// and ip://:
// the horizon a run records goes to the horizon file, so a restart whose
// clock is set back, after a crash or a clean close, issues nothing at or
// below what the last run issued. With the horizon in memory only, the
// restarted run stamps IDs an hour in the past again.
func TestFixedHorizonSurvivesRestart(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, url, layout, field string }{
		{"static", "static://3", "twitter", "worker"},
		{"ip", "ip://10.0.1.3", "sonyflake", "machine"},
	} {
		for _, run := range []struct {
			crash bool
			start time.Time // the restarted run's clock
		}{
			{true, hz0.Add(-time.Hour)}, {false, hz0.Add(-time.Hour)}, // set back an hour
			{true, hz0}, {false, hz0}, // set back to where the last run began
		} {
			crash := run.crash
			name := c.name + "/clean-close/" + hz0.Sub(run.start).String()
			if crash {
				name = c.name + "/crash/" + hz0.Sub(run.start).String()
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				path := filepath.Join(t.TempDir(), "data", c.name+".horizon")
				u := c.url + "?horizon=" + path
				f1 := clock.NewFake(hz0)
				r1 := startFixed(t, u, c.layout, c.field, f1, snowflake.RollbackWait)
				var issued []int64
				for range 2000 {
					id, err := r1.g.Next(ctx)
					if err != nil {
						t.Fatal(err)
					}
					issued = append(issued, id)
					f1.Advance(time.Millisecond)
				}
				last := r1.stamp(t, issued[len(issued)-1])
				if crash {
					// kill -9: the lease ends (the flock goes with the
					// process) but nobody lowers the horizon.
					r1.l.Close()
					r1.g.Close()
				} else {
					r1.g.Close() // lowers the horizon to the last stamp
					r1.l.Close()
				}
				var st fileState
				data, fileErr := os.ReadFile(path)
				if fileErr == nil {
					fileErr = json.Unmarshal(data, &st)
				}

				// Restart with the clock set back, on a logical clock
				// allowed to run two hours ahead: it must start after the
				// recorded horizon.
				f2 := clock.NewFake(run.start)
				r2 := startFixed(t, u, c.layout, c.field, f2, snowflake.RollbackLogical)
				if r2.l.Generation() <= 1 {
					t.Fatalf("restart generation %d, want it above the first run's", r2.l.Generation())
				}
				seen := make(map[int64]bool, len(issued))
				for _, id := range issued {
					seen[id] = true
				}
				maxOld := slices.Max(issued)
				// Fewer than one tick holds (sonyflake: 256), so a run
				// stamping the past does not wait on the fake clock.
				dst := make([]int64, 200)
				defer func() {
					if t.Failed() {
						return
					}
					if fileErr != nil {
						t.Fatalf("horizon file after the first run: %v", fileErr)
					}
					if crash && !st.Horizon.After(last) || !crash && !st.Horizon.Equal(last) {
						t.Fatalf("recorded horizon %v, last stamp %v (crash %v)", st.Horizon, last, crash)
					}
				}()
				nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				if n, err := r2.g.NextN(nctx, dst); n != len(dst) || err != nil {
					t.Fatalf("NextN after restart = %d, %v", n, err)
				}
				for _, id := range dst {
					if seen[id] {
						t.Fatalf("restart with the clock set back repeated ID %d", id)
					}
					if id <= maxOld || !r2.stamp(t, id).After(last) {
						t.Fatalf("restart issued %d stamped %v, not above the last run's %d (%v)", id, r2.stamp(t, id), maxOld, last)
					}
				}
			})
		}
	}
}

// TestFixedHorizonFile checks the horizon file's lease semantics for every
// fixed assigner: Extend is on disk when it returns, Release lowers it,
// a second holder of the file is refused, and List reads it.
func TestFixedHorizonFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		url string
		id  int64
		max int64
	}{
		{"static://7", 7, 31},
		{"ip://10.0.2.9", 2<<8 | 9, 65535},
		{"mac://02:00:00:00:01:02", 0x020000000102, 1<<48 - 1},
	} {
		t.Run(strings.SplitN(c.url, ":", 2)[0], func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "h")
			u := c.url + "?horizon=" + path
			a := open(t, u)
			l, err := a.Acquire(ctx, c.max)
			if err != nil {
				t.Fatal(err)
			}
			if l.ID() != c.id {
				t.Fatalf("ID %d, want %d", l.ID(), c.id)
			}
			h := hz0.Add(123456789 * time.Nanosecond)
			if _, err := l.Extend(ctx, h); err != nil {
				t.Fatal(err)
			}
			if st, err := readFileState(path); err != nil || !st.Horizon.Equal(h) || st.WorkerID != c.id {
				t.Fatalf("file after Extend = %+v, %v; want horizon %v, worker %d", st, err, h, c.id)
			}
			// Another process with the same horizon file is refused.
			if _, err := open(t, u).Acquire(ctx, c.max); !errors.Is(err, ErrHeld) {
				t.Fatalf("second holder of the horizon file = %v, want ErrHeld", err)
			}
			if hs, err := a.List(ctx); err != nil || len(hs) != 1 || !hs[0].Live || !hs[0].Horizon.Equal(h) || hs[0].ID != c.id {
				t.Fatalf("List = %+v, %v", hs, err)
			}
			lower := h.Add(-time.Second)
			if err := l.Release(ctx, lower); err != nil {
				t.Fatal(err)
			}
			if st, _ := readFileState(path); !st.Horizon.Equal(lower) {
				t.Fatalf("horizon after Release = %v, want %v", st.Horizon, lower)
			}
			gen := l.Generation()
			l.Close()
			l2, err := open(t, u).Acquire(ctx, c.max)
			if err != nil {
				t.Fatal(err)
			}
			defer l2.Close()
			if got, _ := l2.Load(ctx); !got.Equal(lower) || l2.Generation() != gen+1 {
				t.Fatalf("reacquired: horizon %v gen %d; want %v, %d", got, l2.Generation(), lower, gen+1)
			}
		})
	}
}

// TestFixedHorizonMovesWithTheID: a horizon file used by one static ID and
// then by another keeps covering both: the new ID starts after the old
// one's horizon, and the file then records the new ID.
func TestFixedHorizonMovesWithTheID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "static.horizon")
	l, err := open(t, "static://3?horizon="+path).Acquire(ctx, 31)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Extend(ctx, hz0); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l2, err := open(t, "static://4?horizon="+path).Acquire(ctx, 31)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if got, _ := l2.Load(ctx); l2.ID() != 4 || !got.Equal(hz0) {
		t.Fatalf("static://4 on static://3's file: ID %d horizon %v, want 4, %v", l2.ID(), got, hz0)
	}
	if st, _ := readFileState(path); st.WorkerID != 4 {
		t.Fatalf("file records worker %d, want 4", st.WorkerID)
	}
}

// TestStateFileWithoutHorizonRefused: a worker file (or a static horizon
// file) that lost a field is refused and left as it is, not read as
// "horizon zero" and overwritten.
func TestStateFileWithoutHorizonRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct{ name, body, field string }{
		{"no-horizon", `{"worker_id":3,"generation":2,"holder":"h","since":"2026-01-01T00:00:00Z"}`, `"horizon"`},
		{"null-horizon", `{"worker_id":3,"generation":2,"horizon":null}`, `"horizon"`},
		{"no-worker", `{"generation":2,"horizon":"2026-01-01T00:00:00Z"}`, `"worker_id"`},
		{"no-generation", `{"worker_id":3,"horizon":"2026-01-01T00:00:00Z"}`, `"generation"`},
	} {
		for _, kind := range []string{"file", "static"} {
			// (No '#' or '?' in the name: t.TempDir keeps them, and the
			// path goes into a URL.)
			t.Run(kind+"-"+c.name, func(t *testing.T) {
				t.Parallel()
				path := filepath.Join(t.TempDir(), "worker")
				if err := os.WriteFile(path, []byte(c.body), 0o644); err != nil {
					t.Fatal(err)
				}
				u := "file://" + path
				if kind == "static" {
					u = "static://3?horizon=" + path
				}
				_, err := open(t, u).Acquire(ctx, 31)
				if err == nil || !strings.Contains(err.Error(), c.field) || !strings.Contains(err.Error(), path) {
					t.Fatalf("Acquire of %s = %v; want a refusal naming %s and the file", c.body, err, c.field)
				}
				if got, _ := os.ReadFile(path); string(got) != c.body {
					t.Fatalf("refused file was rewritten: %s", got)
				}
				// After the refusal the file is not locked: a fixed file
				// can be acquired at once.
				if err := os.WriteFile(path, []byte(`{"worker_id":3,"generation":2,"horizon":"2026-01-01T00:00:00Z"}`), 0o644); err != nil {
					t.Fatal(err)
				}
				l, err := open(t, u).Acquire(ctx, 31)
				if err != nil {
					t.Fatal(err)
				}
				l.Close()
			})
		}
	}
}

func TestHorizonURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"static://3?horizon=", "ip://10.0.0.1?horizon=", "mac://02:00:00:00:00:01?horizon="} {
		if _, err := Open(context.Background(), u); !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), `horizon ""`) {
			t.Errorf("Open(%q) = %v, want ErrBadURL naming horizon", u, err)
		}
	}
	if _, err := NewStatic(1, WithHorizonFile("")); !errors.Is(err, ErrBadOption) || !strings.Contains(err.Error(), "horizon file") {
		t.Errorf("WithHorizonFile(\"\") = %v, want ErrBadOption", err)
	}
	if _, err := Open(context.Background(), "file:///x?horizon=/y"); !errors.Is(err, ErrBadURL) {
		t.Errorf("file url with horizon = %v, want ErrBadURL (it records the horizon itself)", err)
	}
}
