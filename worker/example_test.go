package worker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/idmint/idmint/worker"
)

// A static worker ID from configuration, checked against the layout's
// 5-bit worker field (0..31). It has no coordinator to keep the time
// horizon in, so it names a file for it (horizon=memory would accept that a
// restart with the clock set back repeats IDs); without either, Acquire
// refuses.
func ExampleOpen() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "idmint-example")
	defer os.RemoveAll(dir)
	a, err := worker.Open(ctx, "static://3?horizon="+filepath.Join(dir, "static.horizon"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	l, err := a.Acquire(ctx, 31)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	fmt.Println("worker id", l.ID(), "valid", l.Valid())

	_, err = a.Acquire(ctx, 31)
	fmt.Println(errors.Is(err, worker.ErrHeld))

	b, _ := worker.Open(ctx, "static://40?horizon=memory")
	_, err = b.Acquire(ctx, 31)
	fmt.Println(err)

	c, _ := worker.Open(ctx, "static://4")
	_, err = c.Acquire(ctx, 31)
	fmt.Println(errors.Is(err, worker.ErrNoHorizon))
	// Output:
	// worker id 3 valid true
	// true
	// worker: worker id 40 (from static) is out of range 0..31 for this layout
	// true
}

// The file assigner keeps the worker ID (and the horizon) on disk and gives
// the same ID back after a restart.
func ExampleNewFile() {
	dir, _ := os.MkdirTemp("", "idmint-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	for restart := range 2 {
		a, _ := worker.NewFile(filepath.Join(dir, "worker"), 7)
		l, err := a.Acquire(ctx, 1023)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("start %d: worker id %d, generation %d\n", restart, l.ID(), l.Generation())
		l.Close()
	}
	// Output:
	// start 0: worker id 7, generation 1
	// start 1: worker id 7, generation 2
}

// A bad coordinator URL names the field and the value.
func ExampleOpen_badURL() {
	_, err := worker.Open(context.Background(), "etcd://127.0.0.1:2379/idmint?name=a/b")
	fmt.Println(err)
	// Output:
	// worker: bad coordinator url: etcd url: name "a/b" must not contain '/' or spaces
}
