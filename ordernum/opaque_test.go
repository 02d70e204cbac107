package ordernum

import (
	"errors"
	"math"
	"testing"
)

func TestOpaqueRoundTrip(t *testing.T) {
	t.Parallel()
	for _, width := range []int{20, 32, 63, 64} {
		o, err := NewOpaque(testKey(t, 0), width, "user")
		if err != nil {
			t.Fatal(err)
		}
		max := uint64(math.MaxUint64) >> (64 - width)
		seen := make(map[uint64]bool)
		for _, id := range []uint64{0, 1, 2, max - 1, max, 1 << (width - 1), 1_800_000_000_000_000_000 & max} {
			x, err := o.Encode(id)
			if err != nil || x > max {
				t.Fatalf("bits %d: Encode(%d) = %d, %v", width, id, x, err)
			}
			if seen[x] {
				continue // a repeated input (small widths)
			}
			seen[x] = true
			back, err := o.Decode(x)
			if err != nil || back != id {
				t.Fatalf("bits %d: Decode(Encode(%d)) = %d, %v", width, id, back, err)
			}
		}
		if width < 64 {
			if _, err := o.Encode(max + 1); !errors.Is(err, ErrRange) {
				t.Errorf("bits %d: Encode(2^bits) = %v, want ErrRange", width, err)
			}
		}
	}
}

// TestOpaqueUnguessable: the outputs of consecutive Snowflake-like IDs have
// every bit set half of the time and are increasing half of the time, and
// distinct labels give unrelated permutations.
func TestOpaqueUnguessable(t *testing.T) {
	t.Parallel()
	o, _ := NewOpaque(testKey(t, 9), 63, "order")
	other, _ := NewOpaque(testKey(t, 9), 63, "user")
	const N = 20000
	base := int64(1_900_000_000_000_000_000) // a Snowflake-ish ID
	var ones [63]int
	increasing, same := 0, 0
	seen := make(map[int64]bool, N)
	var prev int64
	for i := range int64(N) {
		x, err := o.EncodeInt64(base + i)
		if err != nil || x < 0 {
			t.Fatalf("EncodeInt64 = %d, %v", x, err)
		}
		if seen[x] {
			t.Fatalf("duplicate opaque ID %d", x)
		}
		seen[x] = true
		for b := range 63 {
			ones[b] += int(x>>b) & 1
		}
		if i > 0 && x > prev {
			increasing++
		}
		prev = x
		y, _ := other.EncodeInt64(base + i)
		if y == x {
			same++
		}
		back, err := o.DecodeInt64(x)
		if err != nil || back != base+i {
			t.Fatalf("DecodeInt64 = %d, %v", back, err)
		}
	}
	sd := math.Sqrt(N) / 2
	for b, n := range ones {
		if math.Abs(float64(n)-N/2) > 4.5*sd {
			t.Errorf("bit %d set %d times of %d", b, n, N)
		}
	}
	if frac := float64(increasing) / (N - 1); math.Abs(frac-0.5) > 4.5*0.5/math.Sqrt(N) {
		t.Errorf("increasing %.4f of the time", frac)
	}
	if same != 0 {
		t.Errorf("labels order and user agree on %d IDs", same)
	}
}

func TestOpaqueErrors(t *testing.T) {
	t.Parallel()
	for _, w := range []int{0, 19, 65} {
		if _, err := NewOpaque(testKey(t, 0), w, ""); !errors.Is(err, ErrConfig) {
			t.Errorf("NewOpaque(bits %d) = %v, want ErrConfig", w, err)
		}
	}
	if _, err := NewOpaque(Key{}, 63, ""); !errors.Is(err, ErrKey) {
		t.Errorf("NewOpaque(zero key) = %v, want ErrKey", err)
	}
	o64, _ := NewOpaque(testKey(t, 0), 64, "")
	if _, err := o64.EncodeInt64(1); !errors.Is(err, ErrConfig) {
		t.Errorf("EncodeInt64 with 64 bits = %v, want ErrConfig", err)
	}
	o63, _ := NewOpaque(testKey(t, 0), 63, "")
	if _, err := o63.EncodeInt64(-1); !errors.Is(err, ErrRange) {
		t.Errorf("EncodeInt64(-1) = %v, want ErrRange", err)
	}
	if _, err := o63.Decode(1 << 63); !errors.Is(err, ErrRange) {
		t.Errorf("Decode(2^63) = %v, want ErrRange", err)
	}
}

func FuzzOpaque(f *testing.F) {
	o, _ := NewOpaque(testKey(f, 0), 63, "fuzz")
	o64, _ := NewOpaque(testKey(f, 0), 64, "")
	f.Add(uint64(0))
	f.Add(uint64(1) << 63)
	f.Fuzz(func(t *testing.T, id uint64) {
		for _, op := range []*Opaque{o, o64} {
			x, err := op.Encode(id)
			if id>>op.Bits() != 0 && op.Bits() < 64 {
				if !errors.Is(err, ErrRange) {
					t.Fatalf("Encode(%d) = %v, want ErrRange", id, err)
				}
				continue
			}
			back, err2 := op.Decode(x)
			if err != nil || err2 != nil || back != id {
				t.Fatalf("bits %d: %d -> %d -> %d (%v, %v)", op.Bits(), id, x, back, err, err2)
			}
		}
	})
}
