package idtest

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
)

// PerSecondCap checks a 12-byte ID with a big-endian 32-bit second in
// bytes 0..3 and a 24-bit counter in bytes 9..11 (MongoDB ObjectID, xid):
// next, on clk frozen at at (half a second into it), issues n IDs (the
// generator's per-second budget: 2^24, or the lower one a test set) all
// stamped with that second and no counter value twice; the next one must
// not wrap the counter (the reference generators do, and repeat IDs) but
// fail with exhausted, the next second being further away than the
// generator's MaxWait (it must be below 500 ms); once the clock passes the
// second, IDs come again.
func PerSecondCap(t *testing.T, clk *clock.Fake, at time.Time, n int, next func(context.Context) ([12]byte, error), exhausted error) {
	t.Helper()
	ctx := Context(t)
	seen := make([]uint64, (1<<24)/64)
	for i := range n {
		id, err := next(ctx)
		if err != nil {
			t.Fatalf("ID %d of the second: %v", i, err)
		}
		if sec := binary.BigEndian.Uint32(id[:4]); sec != uint32(at.Unix()) {
			t.Fatalf("ID %d stamped second %d, want %d: the clock is frozen", i, sec, at.Unix())
		}
		c := uint32(id[9])<<16 | uint32(id[10])<<8 | uint32(id[11])
		if seen[c/64]&(1<<(c%64)) != 0 {
			t.Fatalf("counter %#x repeats within one second at ID %d", c, i)
		}
		seen[c/64] |= 1 << (c % 64)
	}
	if id, err := next(ctx); !errors.Is(err, exhausted) {
		t.Fatalf("ID %d of one second (budget %d) = %v, %v; want %v (the next second is 500 ms away)", n+1, n, id, err, exhausted)
	}
	clk.Advance(time.Second)
	id, err := next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sec := binary.BigEndian.Uint32(id[:4]); sec != uint32(at.Unix()+1) {
		t.Fatalf("after the second turned: stamped %d, want %d", sec, at.Unix()+1)
	}
}
