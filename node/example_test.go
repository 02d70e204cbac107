package node_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/idmint/idmint/node"
	"github.com/idmint/idmint/snowflake"
)

// A Twitter-layout node whose worker ID comes from a coordinator URL (here
// static, with its time horizon in a file; in a cluster
// "etcd://10.0.0.1:2379/idmint?name=orders").
func ExampleNew() {
	layout, _ := snowflake.Lookup("twitter")
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "idmint-example")
	defer os.RemoveAll(dir)
	n, err := node.New(ctx, node.Config{
		Layout:      layout,
		Coordinator: "static://5?horizon=" + filepath.Join(dir, "static.horizon"),
		Node:        map[string]int64{"datacenter": 1},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer n.Close()
	id, err := n.Next(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	p, _ := snowflake.Decode(layout, id)
	worker, gen, _ := n.WorkerID()
	fmt.Println("worker", worker, "in id:", p.Node["worker"], "datacenter:", p.Node["datacenter"], "generation > 0:", gen > 0)
	// Output:
	// worker 5 in id: 5 datacenter: 1 generation > 0: true
}
