package strategies

import (
	"context"
	"testing"

	"github.com/idmint/idmint/flake128"
	"github.com/idmint/idmint/idformat"
)

// /v1/decode of a flake128 ID reports its worker as the node (it reported
// node 0 for worker 7, the worker only in extra.node as hex).
func TestDecodeFlake128Node(t *testing.T) {
	for _, worker := range []uint64{7, 1<<48 - 1} {
		g, err := flake128.New(worker, flake128.Settings{})
		if err != nil {
			t.Fatal(err)
		}
		id, err := g.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		d, err := decodeText(idformat.Flake128, id.String())
		if err != nil {
			t.Fatal(err)
		}
		if d.Node != int64(worker) {
			t.Fatalf("worker %d: decoded node %d (extra %v)", worker, d.Node, d.Extra)
		}
	}
}
