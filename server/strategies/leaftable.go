package strategies

import (
	"context"
	"fmt"
	"strings"

	"github.com/idmint/idmint/ordernum"
	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/server"
)

// withLeafTable lets the server ask the segment strategy for a whole
// store's table (server.LeafTableOption): the server serves every row of
// the default store on Leaf's /api/segment/get/{tag}, as Leaf's
// SegmentIDGenImpl serves every biz_tag of leaf_alloc
// (Meituan-Dianping/Leaf, leaf-core SegmentIDGenImpl.updateCacheFromDb).
// Keys from a config or the admin API cannot set the option: the
// strategy's Check refuses options it does not know.
func withLeafTable(st server.Strategy) server.Strategy {
	next := st.New
	st.New = func(ctx context.Context, env *server.Env, name string, k server.KeyConfig) (server.Issuer, error) {
		if k.Options[server.LeafTableOption] == "true" {
			a, err := openAllocator(ctx, env, k.Store)
			if err != nil {
				return nil, err
			}
			return &leafTable{a: a, store: k.Store}, nil
		}
		return next(ctx, env, name, k)
	}
	return st
}

// leafTable is a server.LeafTable over the Allocator shared by a store's
// segment keys: a tag served from it and a configured key of the same
// name share one double buffer.
type leafTable struct {
	a     *segment.Allocator
	store string
}

var _ server.LeafTable = (*leafTable)(nil)

// Rows lists the store's rows (Leaf's IDAllocMapper.getAllLeafAllocs).
func (t *leafTable) Rows(ctx context.Context) ([]server.StoreRow, error) {
	infos, err := t.a.Keys(ctx)
	if err != nil {
		return nil, &retryable{fmt.Errorf("list store %q: %w", t.store, err), 0}
	}
	out := make([]server.StoreRow, 0, len(infos))
	for _, info := range infos {
		// Order-number sequences are no Leaf tag and no /db row: their
		// max_id is the volume the order numbers hide (design.md U10).
		if strings.HasPrefix(info.Key, ordernum.SequencePrefix) {
			continue
		}
		out = append(out, server.StoreRow{Key: info.Key, MaxID: info.MaxID, Step: info.Step, UpdateTime: info.UpdateTime, Description: info.Description})
	}
	return out, nil
}

// Open returns the issuer of an existing row without creating one: a row
// deleted meanwhile fails its requests with segment.ErrUnknownKey rather
// than starting again at max_id 1 (which would repeat IDs).
func (t *leafTable) Open(tag string) (server.Issuer, error) {
	k, err := t.a.Key(tag)
	if err != nil {
		return nil, err
	}
	return &segmentKey{a: t.a, k: k, name: tag}, nil
}

// Close does nothing: the Allocator is shared and closed with the server.
func (t *leafTable) Close(ctx context.Context) error { return nil }
