package snowflake

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
)

// TestFirstTickAfterHorizon is design.md U3 at its edge: a generator
// restarted on a recorded horizon stamps its first ID on the first tick
// strictly after it, never on the horizon's own tick (the previous holder
// may have stamped that tick's whole sequence), and not later than needed.
// The restarted clock reads exactly the horizon, or a tick before it, so
// only the horizon decides; the horizon falls on a tick boundary or inside
// a tick, for layouts with 1 ms and 10 ms ticks.
func TestFirstTickAfterHorizon(t *testing.T) {
	t.Parallel()
	for _, layout := range []string{"twitter", "sonyflake"} {
		l, ok := Lookup(layout)
		if !ok {
			t.Fatalf("no %s layout", layout)
		}
		for _, tc := range []struct {
			name   string
			inTick time.Duration // where in its tick the horizon falls
			behind int64         // restarted clock: ticks before the horizon's
		}{
			{"on a tick boundary, clock at the horizon", 0, 0},
			{"inside a tick, clock at the horizon", l.Unit() / 2, 0},
			{"inside a tick, clock a tick behind", l.Unit()*3/4 + 1, 1},
		} {
			t.Run(layout+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				tick := l.tickOf(t0) + 5
				h := l.tickTime(tick).Add(tc.inTick)
				path := filepath.Join(t.TempDir(), "horizon")
				if got, err := NewFileHorizon(path).Extend(ctx, h); err != nil || !got.Equal(h) {
					t.Fatalf("record the horizon %v: %v, %v", h, got, err)
				}
				f := clock.NewFake(l.tickTime(tick - tc.behind).Add(tc.inTick))
				g, _ := newGen(t, l, Settings{Clock: f, Horizon: NewFileHorizon(path)})
				defer g.Close()
				ids, errs := nextAsync(g)
				var id int64
				for done := false; !done; {
					select {
					case id = <-ids:
						done = true
					case err := <-errs:
						t.Fatalf("first Next after the restart: %v", err)
					case <-ctx.Done():
						t.Fatalf("no ID 30s after the restart (clock %v, horizon %v)", f.Now(), h)
					case <-time.After(10 * time.Millisecond):
						// Waiting for its clock to pass the horizon: move it
						// on by a tenth of a tick.
						if f.Sleepers() > 0 {
							f.Advance(l.Unit() / 10)
						}
					}
				}
				got := mustDecode(t, l, id)
				if gt := l.tickOf(got.Time); gt <= tick {
					t.Fatalf("first ID after a restart on the horizon %v (tick %d) is stamped %v (tick %d): not after the horizon, "+
						"so it may repeat what the previous holder stamped", h, tick, got.Time, gt)
				} else if gt != tick+1 {
					t.Fatalf("first ID after a restart on the horizon %v (tick %d) is stamped %v (tick %d); want the very next tick %d",
						h, tick, got.Time, gt, tick+1)
				}
			})
		}
	}
}
