package idmintv1

import (
	"encoding/binary"
	"fmt"
)

// NumericIDs appends the response's numeric IDs to dst[:0] and returns it:
// from IdsLe (8 little-endian bytes per ID, the answer to a request with
// Fixed) or else from Ids. It fails when IdsLe is not a whole number of
// IDs.
func (x *NextIDsResponse) NumericIDs(dst []int64) ([]int64, error) {
	dst = dst[:0]
	b := x.GetIdsLe()
	if len(b) == 0 {
		return append(dst, x.GetIds()...), nil
	}
	if len(b)%8 != 0 {
		return nil, fmt.Errorf("idmintv1: ids_le holds %d bytes, not a whole number of 8-byte IDs", len(b))
	}
	for i := 0; i < len(b); i += 8 {
		dst = append(dst, int64(binary.LittleEndian.Uint64(b[i:])))
	}
	return dst, nil
}
