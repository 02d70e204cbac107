package ticket

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/witness"
)

// racedWitness is a witness whose claims fail while down is set (the
// coordinator out of reach), and where another process raises the mark
// by one just before this one's next claim while race is set, once: that
// claim is refused.
type racedWitness struct {
	Witness
	down atomic.Bool
	race atomic.Bool
}

var errWitnessDown = errors.New("fake: witness unreachable")

func (w *racedWitness) Claim(ctx context.Context, space string, from, to int64) (int64, bool, error) {
	if w.down.Load() {
		return 0, false, errWitnessDown
	}
	if w.race.CompareAndSwap(true, false) {
		if _, _, err := w.Witness.Claim(ctx, space, from, from+1); err != nil {
			return 0, false, err
		}
	}
	return w.Witness.Claim(ctx, space, from, to)
}

// TestCeilingBeforeUse: no ticket is returned before the witness holds a
// ceiling above it. While the witness cannot be reached, a ticket at or
// above the ceiling is not returned (the call fails, naming the witness);
// a claim another process's raise got refused is not taken for a raise;
// and every ticket returned is below the mark the witness persisted.
func TestCeilingBeforeUse(t *testing.T) {
	ctx := context.Background()
	fw, err := witness.OpenFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	w := &racedWitness{Witness: fw}
	f := &fake{next: 1, step: 1}
	tk, err := open(ctx, Config{Clock: clock.NewFake(time.Unix(0, 0)), Witness: w, Block: 10, Servers: []Server{{URL: "fake://a"}}},
		func(context.Context, Config, Server, connHook) (source, error) { return f, nil })
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	persisted := func() int64 {
		m, err := fw.Mark(ctx, tk.cfg.Space)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	w.down.Store(true)
	if id, err := tk.Next(ctx); err == nil || !errors.Is(err, errWitnessDown) {
		t.Fatalf("Next with no ceiling and the witness unreachable = %d, %v; want the witness's error", id, err)
	}
	w.down.Store(false)
	w.race.Store(true)
	for i := range 100 {
		id, err := tk.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m := persisted(); id >= m || tk.Ceiling() > m {
			t.Fatalf("ticket %d (the %dth) returned with the persisted ceiling at %d and the Ticket's at %d: want every ticket below it, and the Ticket's no higher",
				id, i+1, m, tk.Ceiling())
		}
		if i == 50 {
			// Down again, half a block from the ceiling: tickets below the
			// ceiling still come (the background raise fails), then none.
			w.down.Store(true)
			for {
				id, err := tk.Next(ctx)
				if err != nil {
					if !errors.Is(err, errWitnessDown) {
						t.Fatalf("Next at the ceiling with the witness unreachable = %v; want the witness's error", err)
					}
					break
				}
				if m := persisted(); id >= m {
					t.Fatalf("ticket %d returned with the witness unreachable and the persisted ceiling at %d", id, m)
				}
			}
			w.down.Store(false)
		}
	}
}
