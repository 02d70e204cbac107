package segment_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/witness"
)

// A floor puts every number the key serves above the largest ID a team
// already has, and keeps it there when the store later forgets the raise
// (a failover to a replica that never saw it): the witness holds the floor
// too, so the store is raised again before a number is served.
func TestRaiseFloor(t *testing.T) {
	ctx := context.Background()
	const floor = 5_000_000
	for _, withWitness := range []bool{false, true} {
		f := newFake()
		if err := f.Create(ctx, segment.KeyInfo{Key: "k", Step: 100}); err != nil {
			t.Fatal(err)
		}
		opts := segment.Options{Step: segment.StepPolicy{Fixed: true}}
		if withWitness {
			w, err := witness.OpenFile(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			opts.Witness = w
		}
		a, err := segment.New(f, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		before, err := a.RaiseFloor(ctx, "k", floor)
		if err != nil || before != 1 {
			t.Fatalf("witness %v: RaiseFloor: before %d, %v", withWitness, before, err)
		}
		// Idempotent: a restart with the same floor changes nothing.
		if before, err := a.RaiseFloor(ctx, "k", floor); err != nil || before != floor+1 {
			t.Fatalf("witness %v: second RaiseFloor: before %d, %v", withWitness, before, err)
		}
		if withWitness {
			forget(f, "k", 1) // the raise is lost before the first lease
		}
		k, _ := a.Key("k")
		for i := range 250 {
			id, err := k.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if id <= floor {
				t.Fatalf("witness %v: ID %d (the %dth) is not above the floor %d", withWitness, id, i, floor)
			}
		}
	}
}

func TestRaiseFloorRefuses(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	if err := f.Create(ctx, segment.KeyInfo{Key: "k", Step: 100}); err != nil {
		t.Fatal(err)
	}
	a, err := segment.New(f, segment.Options{Step: segment.StepPolicy{Fixed: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.RaiseFloor(ctx, "k", -1); !errors.Is(err, segment.ErrBadMaxID) {
		t.Fatalf("negative floor: %v", err)
	}
	if _, err := a.RaiseFloor(ctx, "nosuch", 10); !errors.Is(err, segment.ErrUnknownKey) {
		t.Fatalf("unknown key: %v", err)
	}
	k, _ := a.Key("k")
	if _, err := k.Next(ctx); err != nil {
		t.Fatal(err)
	}
	// The key already serves numbers below the floor in this process.
	if _, err := a.RaiseFloor(ctx, "k", 1000); err == nil || !strings.Contains(err.Error(), "before it serves") {
		t.Fatalf("floor above a serving key: %v", err)
	}
}
