package snowflake

import (
	"context"
	"errors"
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

// TestNoStampPastHorizon is design.md U3 at the horizon's far edge: once
// the horizon cannot be extended (the coordinator refuses the holder), the
// generator issues on the horizon's own tick but never on the tick just
// past it, nor later; it answers ErrHorizon instead. The clock is put
// exactly on each tick in turn, so a check off by one tick shows.
func TestNoStampPastHorizon(t *testing.T) {
	t.Parallel()
	for _, layout := range []string{"twitter", "sonyflake"} {
		l, ok := Lookup(layout)
		if !ok {
			t.Fatalf("no %s layout", layout)
		}
		t.Run(layout, func(t *testing.T) {
			t.Parallel()
			m := &memHorizon{}
			f := clock.NewFake(l.tickTime(l.tickOf(t0)))
			g, _ := newGen(t, l, Settings{Clock: f, Horizon: m, HorizonLead: 20 * l.Unit()})
			mustNext(t, g) // loads the horizon and records the first one
			m.mu.Lock()
			m.err = errors.New("lease lost: the coordinator refuses the write")
			h := m.cur
			m.mu.Unlock()
			hz := l.tickOf(h)
			if hz <= l.tickOf(f.Now()) {
				t.Fatalf("recorded horizon %v (tick %d) is not ahead of the clock %v", h, hz, f.Now())
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for tick := l.tickOf(f.Now()) + 1; tick <= hz+2; tick++ {
				f.Advance(l.tickTime(tick).Sub(f.Now()))
				id, err := g.Next(ctx)
				switch {
				case tick <= hz && err != nil:
					t.Fatalf("clock on tick %d, horizon on tick %d: Next = %v; want an ID under the horizon", tick, hz, err)
				case tick > hz && err == nil:
					p := mustDecode(t, l, id)
					t.Fatalf("clock on tick %d, horizon %v on tick %d, no extension possible: Next issued %d stamped %v (tick %d), past the horizon",
						tick, h, hz, id, p.Time, l.tickOf(p.Time))
				case tick > hz && !errors.Is(err, ErrHorizon):
					t.Fatalf("clock on tick %d past the horizon's tick %d: Next = %v; want ErrHorizon", tick, hz, err)
				case err == nil:
					if p := mustDecode(t, l, id); p.Time.After(h) {
						t.Fatalf("ID stamped %v past the recorded horizon %v", p.Time, h)
					}
				}
			}
		})
	}
}
