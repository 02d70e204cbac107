package worker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/idmint/idmint/worker"
)

// A static worker ID keeps its horizon in a file, so the next run (even
// with its clock set back) starts after everything this run may stamp.
func ExampleWithHorizonFile() {
	dir, _ := os.MkdirTemp("", "idmint-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	u := "static://3?horizon=" + filepath.Join(dir, "static.horizon")
	h := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for run := range 2 {
		a, _ := worker.Open(ctx, u)
		l, err := a.Acquire(ctx, 31)
		if err != nil {
			fmt.Println(err)
			return
		}
		got, _ := l.Load(ctx)
		fmt.Printf("run %d: worker %d, generation %d, horizon %s\n", run, l.ID(), l.Generation(), got.Format(time.RFC3339))
		l.Extend(ctx, h) // a generator does this before stamping past it
		l.Close()
	}
	// Output:
	// run 0: worker 3, generation 1, horizon 0001-01-01T00:00:00Z
	// run 1: worker 3, generation 2, horizon 2030-01-02T03:04:05Z
}
