package gene

import (
	"errors"
	"fmt"
	"testing"
)

func refKey() (k [KeySize]byte) {
	for i := range k {
		k[i] = byte(i)
	}
	return k
}

// TestSum64Vectors checks SipHash-2-4 against the reference test vectors:
// the worked example in Appendix A of the SipHash paper (key 00..0f, message
// 00..0e → a129ca6149be45e5) and entries of vectors.h in the reference
// implementation (github.com/veorq/SipHash), whose output bytes are the
// little-endian encoding of the 64-bit result.
func TestSum64Vectors(t *testing.T) {
	t.Parallel()
	key := refKey()
	msg := make([]byte, 64)
	for i := range msg {
		msg[i] = byte(i)
	}
	for _, tc := range []struct {
		n    int
		want uint64
	}{
		{0, 0x726fdb47dd0e0e31},
		{1, 0x74f839c593dc67fd},
		{15, 0xa129ca6149be45e5},
		{63, 0x958a324ceb064572},
	} {
		if got := Sum64(key, msg[:tc.n]); got != tc.want {
			t.Errorf("Sum64(len %d) = %#016x, want %#016x", tc.n, got, tc.want)
		}
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	key := refKey()
	for _, tc := range []struct {
		key  []byte
		bits int
		want error
	}{
		{key[:15], 8, ErrKeySize},
		{append(key[:], 0), 8, ErrKeySize},
		{key[:], 0, ErrBits},
		{key[:], MaxBits + 1, ErrBits},
		{key[:], 1, nil},
		{key[:], MaxBits, nil},
	} {
		_, err := New(tc.key, tc.bits)
		if !errors.Is(err, tc.want) {
			t.Errorf("New(%d-byte key, %d) = %v, want %v", len(tc.key), tc.bits, err, tc.want)
		}
	}
}

func TestGeneIsStableSpreadAndKeyed(t *testing.T) {
	t.Parallel()
	k := refKey()
	h, err := New(k[:], 4)
	if err != nil {
		t.Fatal(err)
	}
	k[0] ^= 1
	other, _ := New(k[:], 4)
	counts := make([]int, 16)
	differ := 0
	const n = 16000
	for m := range uint64(n) {
		g := h.OfUint64(m)
		if g >= 16 {
			t.Fatalf("gene %d exceeds 4 bits", g)
		}
		if h.OfUint64(m) != g {
			t.Fatal("gene is not stable")
		}
		counts[g]++
		if other.OfUint64(m) != g {
			differ++
		}
	}
	for g, c := range counts {
		// Expected 1000 per shard; 6 sigma ≈ 180.
		if c < 800 || c > 1200 {
			t.Errorf("shard %d got %d of %d members: not uniform", g, c, n)
		}
	}
	if differ < n/2 {
		t.Errorf("a different key changed only %d of %d genes", differ, n)
	}
	if h.OfString("member-42") != h.Of([]byte("member-42")) {
		t.Error("OfString disagrees with Of")
	}
	if h.Bits() != 4 {
		t.Errorf("Bits = %d", h.Bits())
	}
}

func ExampleHasher() {
	key := []byte("0123456789abcdef") // a secret in real use
	h, _ := New(key, 10)              // 1024 shards
	a := h.OfString("member-1001")
	b := h.OfString("member-1001")
	fmt.Println(a == b, a < 1024)
	// Output: true true
}

func BenchmarkOfUint64(b *testing.B) {
	h, _ := New(make([]byte, KeySize), 13)
	b.ReportAllocs()
	var m uint64
	for b.Loop() {
		m++
		_ = h.OfUint64(m)
	}
}
