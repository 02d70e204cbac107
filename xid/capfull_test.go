//go:build !race

package xid

import "testing"

// TestPerSecondCapFull issues the real budget, 2^24 IDs in one second, in
// builds without the race detector (about a second there; minutes under
// -race on a loaded machine, where TestPerSecondCap's lowered budget
// proves the same check).
func TestPerSecondCapFull(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("issues 2^24 IDs; skipped with -short")
	}
	testPerSecondCap(t, 0)
}
