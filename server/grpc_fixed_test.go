package server

import (
	"context"
	"testing"

	v1 "github.com/idmint/idmint/api/idmintv1"
)

// TestGRPCFixedIDs: a NextIDs request with Fixed gets its numeric IDs as
// 8-byte little-endian integers in IdsLe (and nothing in Ids), the same
// IDs in the same order as a plain request would; text IDs are unchanged.
func TestGRPCFixedIDs(t *testing.T) {
	c, _ := grpcFixture(t)
	ctx := context.Background()
	r, err := c.NextIDs(ctx, &v1.NextIDsRequest{Key: "order", Count: 3, Fixed: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GetIds()) != 0 || len(r.GetIdsLe()) != 24 {
		t.Fatalf("fixed answer: %d in ids, %d bytes in ids_le; want 0 and 24", len(r.GetIds()), len(r.GetIdsLe()))
	}
	ids, err := r.NumericIDs(nil)
	if err != nil || len(ids) != 3 || ids[0] != 1 || ids[2] != 3 {
		t.Fatalf("NumericIDs = %v, %v; want [1 2 3]", ids, err)
	}
	plain, err := c.NextIDs(ctx, &v1.NextIDsRequest{Key: "order", Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	if ids, _ := plain.NumericIDs(nil); len(ids) != 2 || ids[0] != 4 {
		t.Fatalf("plain answer after the fixed one: %v", ids)
	}
	if r, err := c.NextIDs(ctx, &v1.NextIDsRequest{Key: "note", Count: 2, Fixed: true}); err != nil || len(r.GetTextIds()) != 2 || len(r.GetIdsLe()) != 0 {
		t.Fatalf("text key with fixed: %v %v", r, err)
	}
	bad := &v1.NextIDsResponse{IdsLe: make([]byte, 7)}
	if _, err := bad.NumericIDs(nil); err == nil {
		t.Fatal("NumericIDs of 7 bytes succeeded")
	}
}
