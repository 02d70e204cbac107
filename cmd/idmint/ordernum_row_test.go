package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/segment/stores"
)

// TestOrdernumSharesServerRow: `idmint ordernum` draws from the row the
// server's ordernum key of the same name uses (ordernum/NAME, which no
// segment key can name), and a legacy row NAME left by an older version is
// continued, never restarted: numbers issued from it are not issued again.
func TestOrdernumSharesServerRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := "sqlite://" + filepath.Join(t.TempDir(), "seq.db")
	a, err := stores.OpenAllocator(ctx, store, segment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// An older idmint issued "orders" below 5000 from the legacy row (a
	// format without a date part: one sequence, row NAME).
	if err := a.CreateKey(ctx, segment.KeyInfo{Key: "orders", MaxID: 5000, Step: 100}); err != nil {
		t.Fatal(err)
	}
	a.Close()

	vars := map[string]string{secretEnv: "1:000102030405060708090a0b0c0d0e0f"}
	code, out, errOut := runCLIEnv(t, vars, "ordernum", "--store", store, "--format", "length=16", "-n", "3")
	if code != 0 {
		t.Fatalf("issue: exit %d: %s", code, errOut)
	}
	seqRe := regexp.MustCompile(`seq=(\d+)`)
	for _, n := range strings.Fields(out) {
		code, dec, errOut := runCLIEnv(t, vars, "ordernum", "decode", "--format", "length=16", n)
		m := seqRe.FindStringSubmatch(dec)
		if code != 0 || m == nil {
			t.Fatalf("decode %s: exit %d: %s %s", n, code, dec, errOut)
		}
		if seq, _ := strconv.ParseInt(m[1], 10, 64); seq < 5000 { // Leaf serves [max_id-step, max_id): the legacy row issued below 5000
			t.Fatalf("%s has sequence %d: the legacy row's numbers below 5000 are issued again", n, seq)
		}
	}
	a, err = stores.OpenAllocator(ctx, store, segment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	row, err := a.Describe(ctx, "ordernum/orders")
	if err != nil {
		t.Fatalf("the CLI did not draw from the server's row ordernum/orders: %v", err)
	}
	if row.MaxID <= 5000 {
		t.Fatalf("row ordernum/orders max_id %d, want above the legacy 5000", row.MaxID)
	}
}
