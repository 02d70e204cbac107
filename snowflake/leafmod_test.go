package snowflake

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// mix64 is SplitMix64's finalizer (Steele, Lea and Flood, "Fast Splittable
// Pseudorandom Number Generators", 2014, with Stafford's Mix13 constants):
// every output bit depends on every input bit, so mix64(id) % n spreads IDs
// evenly whatever their low bits hold. docs/migrating-from-leaf.md shows
// the same function in Java.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// TestLeafSeqStartModulo measures what sharding by id % N does to IDs of
// the leaf layout drawn at a low rate (docs/migrating-from-leaf.md quotes
// the figures it logs; run it with -v). Leaf's SnowflakeIDGenImpl.java, and
// idmint's leaf layout with it, start each millisecond's sequence at a
// random value in [0, 100), and the sequence is the ID's low 12 bits, so for
// a power of two N <= 4096, id % N is the sequence % N. At one ID per
// millisecond that is the random start itself: residues 0-3 of 8 get 13 of
// every 100 IDs and residues 4-7 get 12, and of 128 residues only 0-99 are
// ever used. A sequence that starts at 0 is worse (every ID is 0 mod 8);
// a 64-bit mixer spreads all of them evenly.
func TestLeafSeqStartModulo(t *testing.T) {
	t.Parallel()
	const draws = 100_000
	leaf, _ := Lookup("leaf")
	zero, err := ParseLayout("time=41:1ms,worker=10,seq=12,epoch=2010-11-04T01:42:54.657Z")
	if err != nil {
		t.Fatal(err)
	}
	// draw returns draws IDs taken perMs at a time, one millisecond apart,
	// with a seeded source for the random starts so the logged figures
	// repeat from run to run.
	draw := func(l Layout, perMs int) []int64 {
		r := rand.New(rand.NewPCG(1, 2))
		g, f := newGen(t, l, Settings{Rand: r.Int64N})
		ids := make([]int64, 0, draws)
		for len(ids) < draws {
			for range perMs {
				ids = append(ids, mustNext(t, g))
			}
			f.Advance(time.Millisecond)
		}
		return ids
	}
	count := func(ids []int64, n uint64, key func(int64) uint64) []int {
		c := make([]int, n)
		for _, id := range ids {
			c[key(id)%n]++
		}
		return c
	}
	plain := func(id int64) uint64 { return uint64(id) }
	mixed := func(id int64) uint64 { return mix64(uint64(id)) }
	show := func(c []int) string {
		var b strings.Builder
		for i, v := range c {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%d", v)
		}
		return b.String()
	}
	share := func(c []int, lo, hi int) float64 {
		s := 0
		for _, v := range c[lo:hi] {
			s += v
		}
		return 100 * float64(s) / float64(draws)
	}

	for _, perMs := range []int{1, 10} {
		ids := draw(leaf, perMs)
		by8 := count(ids, 8, plain)
		by128 := count(ids, 128, plain)
		mix8 := count(ids, 8, mixed)
		by10 := count(ids, 10, plain)
		empty := 0
		for _, v := range by128 {
			if v == 0 {
				empty++
			}
		}
		t.Logf("leaf, %d ID/ms, %d IDs: id %% 8 = [%s] (residues 0-3: %.1f%%, 4-7: %.1f%%); id %% 128: %d of 128 residues never used; id %% 10 = [%s]; mix64(id) %% 8 = [%s]",
			perMs, draws, show(by8), share(by8, 0, 4), share(by8, 4, 8), empty, show(by10), show(mix8))
		if perMs == 1 {
			// Expected shares 52 % and 48 %; a margin of 1 point is about 6
			// standard deviations of the random draw.
			if lo, hi := share(by8, 0, 4), share(by8, 4, 8); lo < 51 || lo > 53 || hi < 47 || hi > 49 {
				t.Errorf("id %% 8 at 1 ID/ms: residues 0-3 hold %.1f%%, 4-7 hold %.1f%%; want the random 0-99 start to favour 0-3 (52%% vs 48%%)", lo, hi)
			}
			for i, v := range by128[100:] {
				if v != 0 {
					t.Errorf("id %% 128 = %d at 1 ID/ms: %d IDs; a start below 100 can never reach it", 100+i, v)
				}
			}
		}
		// The mixer, and a modulus that is not a power of two (the time and
		// worker bits enter the remainder): every residue within 5 % of its
		// even share (about 16 standard deviations).
		for _, c := range []struct {
			what   string
			counts []int
		}{{"mix64(id) % 8", mix8}, {"id % 10", by10}} {
			even := draws / len(c.counts)
			for i, v := range c.counts {
				if v < even*95/100 || v > even*105/100 {
					t.Errorf("%s = %d holds %d of %d IDs at %d ID/ms; want about %d", c.what, i, v, draws, perMs, even)
				}
			}
		}
	}

	ids := draw(zero, 1)
	by8 := count(ids, 8, plain)
	t.Logf("sequence starting at 0, 1 ID/ms: id %% 8 = [%s]", show(by8))
	if by8[0] != draws {
		t.Errorf("a sequence starting at 0 at 1 ID/ms put %d of %d IDs on residue 0 of 8; want all", by8[0], draws)
	}
}

// TestUidGeneratorLayoutEnds checks the end dates docs/migrating-from-uid-generator.md
// gives: 2^28 s after DefaultUidGenerator's default epoch (2016-05-20 +08:00)
// and 2^29 s after the epoch of the README's sample beans (2016-09-20
// +08:00, timeBits 29, workerBits 21, seqBits 13).
func TestUidGeneratorLayoutEnds(t *testing.T) {
	t.Parallel()
	for spec, want := range map[string]string{
		"baidu": "2024-11-20T13:24:16Z",
		"time=29:1s,worker=21,seq=13,epoch=2016-09-19T16:00:00Z": "2033-09-24T10:48:32Z",
	} {
		l, err := ParseLayout(spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.End().Format(time.RFC3339); got != want {
			t.Errorf("%s ends %s, want %s", spec, got, want)
		}
	}
}
