package segment_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/segment/sqlstore"
)

func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "segment")
	defer os.RemoveAll(dir)

	// The embedded default: Leaf's leaf_alloc table in a SQLite file.
	store, err := sqlstore.Open(ctx, "sqlite://"+filepath.Join(dir, "idmint.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	a, err := segment.New(store, segment.Options{CloseStore: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()

	if err := a.CreateKey(ctx, segment.KeyInfo{Key: "order", Step: 1000, Description: "order numbers"}); err != nil {
		fmt.Println(err)
		return
	}
	order, _ := a.Key("order") // keep the handle on hot paths
	id1, _ := order.Next(ctx)
	id2, _ := order.Next(ctx)
	blk, _ := order.Range(ctx, 100)
	fmt.Println(id1, id2, blk.Start, blk.End)

	_, err = a.Next(ctx, "unknown")
	fmt.Println(err)
	// Output:
	// 1 2 3 103
	// segment: unknown key: "unknown"
}

func ExampleOptions_tinyid() {
	ctx := context.Background()
	f := newFake()
	_ = f.Create(ctx, segment.KeyInfo{Key: "odd", Step: 10})
	// Tinyid's delta/remainder: odd numbers only, 20 % used before the
	// next segment loads.
	a, _ := segment.New(f, segment.Options{Delta: 2, Remainder: 1, LoadAt: 0.2})
	defer a.Close()
	for range 4 {
		id, _ := a.Next(ctx, "odd")
		fmt.Print(id, " ")
	}
	fmt.Println()
	// Output: 1 3 5 7
}
