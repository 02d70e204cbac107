package timeid

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/testkit/idtest"
)

var (
	t0  = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	key = []byte("0123456789abcdef")
)

func TestCollisionProbabilityFormula(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n, b int
		want float64
	}{
		{1, 22, 0},
		{2, 22, 1 / math.Ldexp(1, 22)},
		{100, 22, 1.18e-3},
		{1000, 22, 0.112},
		{17, 4, 1},
	} {
		got := CollisionProbability(tc.n, tc.b)
		if math.Abs(got-tc.want) > tc.want*0.01+1e-12 {
			t.Errorf("CollisionProbability(%d, %d) = %g, want %g", tc.n, tc.b, got, tc.want)
		}
	}
}

// TestMeasuredCollisionRate draws n = 10 IDs in one millisecond from 10
// independent generators with 8 random bits, 4,000 times, and compares the
// fraction of trials with a collision to CollisionProbability(10, 8) ≈
// 0.164. With σ = sqrt(p(1-p)/4000) ≈ 0.0059 the bound below is 5σ; the
// seeds are fixed, so the test is deterministic.
func TestMeasuredCollisionRate(t *testing.T) {
	t.Parallel()
	const n, bits, trials = 10, 8, 4000
	clk := clock.NewFake(t0)
	seed := rand.NewPCG(1, 2)
	hits := 0
	for range trials {
		seen := map[int64]bool{}
		collided := false
		for range n {
			var s [32]byte
			for i := range 4 {
				v := seed.Uint64()
				for j := range 8 {
					s[i*8+j] = byte(v >> (8 * j))
				}
			}
			g, err := NewRandom(RandomSettings{Settings: Settings{Clock: clk}, Rand: rand.NewChaCha8(s), Bits: bits})
			if err != nil {
				t.Fatal(err)
			}
			id, err := g.Next(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			collided = collided || seen[id]
			seen[id] = true
		}
		if collided {
			hits++
		}
	}
	p := CollisionProbability(n, bits)
	got := float64(hits) / trials
	sigma := math.Sqrt(p * (1 - p) / trials)
	if math.Abs(got-p) > 5*sigma {
		t.Fatalf("measured collision rate %.4f, formula %.4f (σ %.4f)", got, p, sigma)
	}
	t.Logf("measured %.4f, formula %.4f", got, p)
}

func TestRandomNeverRepeatsItself(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	g, _ := NewRandom(RandomSettings{Settings: Settings{Clock: clk}, Bits: 4})
	ctx := t.Context()
	seen := map[int64]bool{}
	for range 9 { // half of 16 values, plus one
		id, err := g.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if seen[id] {
			t.Fatalf("repeat %d", id)
		}
		seen[id] = true
	}
	id := idtest.AfterWait(t, clk, time.Millisecond, func() (int64, error) { return g.Next(ctx) })
	p, _ := g.Decode(id)
	if !p.Time.Equal(t0.Add(time.Millisecond)) || p.Random >= 16 {
		t.Fatalf("after a full millisecond: %+v", p)
	}
}

func TestMemberLeaksAndWaits(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	g, _ := NewMember(Settings{Clock: clk})
	ctx := t.Context()
	a, err := g.Next(ctx, 12345)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := g.Decode(a)
	if p.Member != 12345 || !p.Time.Equal(t0) {
		t.Fatalf("Decode = %+v: the member ID should be readable in clear", p)
	}
	if b, _ := g.Next(ctx, 777); b == a {
		t.Fatal("two members collided")
	}
	if b := idtest.AfterWait(t, clk, time.Millisecond, func() (int64, error) { return g.Next(ctx, 12345) }); b == a || b <= a {
		t.Fatalf("same member, next millisecond: %d after %d", b, a)
	}
	if _, err := g.Next(ctx, 1<<22); !errors.Is(err, ErrMember) {
		t.Fatalf("member 2^22: %v", err)
	}
}

func TestGeneShardsWithoutRevealing(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	g, err := NewGene(3, GeneSettings{Settings: Settings{Clock: clk}, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var prev int64
	shards := map[uint64]bool{}
	for m := range uint64(2000) {
		id, err := g.NextUint64(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		if id <= prev {
			t.Fatalf("not increasing: %d after %d", id, prev)
		}
		prev = id
		var b [8]byte
		for i := range 8 {
			b[i] = byte(m >> (56 - 8*i))
		}
		if g.Shard(id) != g.ShardOf(b[:]) {
			t.Fatalf("member %d: ID shard %d, member shard %d", m, g.Shard(id), g.ShardOf(b[:]))
		}
		p, _ := g.Decode(id)
		if p.Worker != 3 || p.Gene != g.Shard(id) {
			t.Fatalf("Decode = %+v", p)
		}
		shards[p.Gene] = true
		clk.Advance(time.Microsecond * 100)
	}
	if len(shards) < 200 { // 2000 members over 256 shards: all but a few used
		t.Fatalf("only %d of 256 shards used", len(shards))
	}
	// Same member, many IDs: one shard.
	for range 50 {
		id, _ := g.Next(ctx, []byte("alice"))
		if g.Shard(id) != g.ShardOf([]byte("alice")) {
			t.Fatal("alice moved shard")
		}
	}
}

func TestGeneSequenceExhaustion(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	g, _ := NewGene(0, GeneSettings{Settings: Settings{Clock: clk}, Key: key, GeneBits: 10, WorkerBits: 10}) // 2 seq bits: 4 per ms
	ctx := t.Context()
	for range 4 {
		if _, err := g.Next(ctx, []byte("m")); err != nil {
			t.Fatal(err)
		}
	}
	clk.Step(-5 * time.Second)
	if _, err := g.Next(ctx, []byte("m")); !errors.Is(err, ErrExhausted) {
		t.Fatalf("full millisecond 5 s ahead: %v", err)
	}
	if a := g.Ahead(); a != 5*time.Second {
		t.Fatalf("Ahead = %v", a)
	}
}

func TestSettingsErrors(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	for name, err := range map[string]error{
		"Bits 23":          second(NewRandom(RandomSettings{Bits: 23})),
		"MaxWait -1":       second(NewMember(Settings{MaxWait: -1})),
		"epoch ended":      second(NewMember(Settings{Clock: clk, Epoch: time.Date(1950, 1, 1, 0, 0, 0, 0, time.UTC)})),
		"GeneBits 22":      second(NewGene(0, GeneSettings{Key: key, GeneBits: 22})),
		"worker too large": second(NewGene(16, GeneSettings{Key: key})),
		"short key":        second(NewGene(0, GeneSettings{Key: key[:8]})),
	} {
		if !errors.Is(err, ErrSettings) {
			t.Errorf("%s: %v, want ErrSettings", name, err)
		}
	}
	g, _ := NewMember(Settings{Clock: clock.NewFake(DefaultEpoch.Add(-time.Second))})
	if _, err := g.Next(t.Context(), 1); !errors.Is(err, ErrTime) {
		t.Errorf("before epoch: %v", err)
	}
	if _, err := g.Decode(-1); !errors.Is(err, ErrTime) {
		t.Errorf("Decode(-1): %v", err)
	}
}

func second[T any](_ T, err error) error { return err }

func TestUniqueUnderConcurrency(t *testing.T) {
	t.Parallel()
	const workers, n = 8, 10000
	clk := clock.NewFake(t0)
	rnd, _ := NewRandom(RandomSettings{Settings: Settings{Clock: clk}})
	mem, _ := NewMember(Settings{Clock: clk})
	gen, _ := NewGene(1, GeneSettings{Settings: Settings{Clock: clk}, Key: key})
	for name, next := range map[string]func(ctx context.Context, w, i int) (int64, error){
		"random": func(ctx context.Context, _, _ int) (int64, error) { return rnd.Next(ctx) },
		"member": func(ctx context.Context, w, i int) (int64, error) { return mem.Next(ctx, uint64(w*n+i)) },
		"gene":   func(ctx context.Context, w, _ int) (int64, error) { return gen.NextUint64(ctx, uint64(w)) },
	} {
		t.Run(name, func(t *testing.T) {
			idtest.Unique(t, workers, n, func(w, i int) (int64, error) {
				id, err := next(t.Context(), w, i)
				if i%50 == 0 {
					clk.Advance(time.Millisecond)
				}
				return id, err
			}, nil)
		})
	}
}

func ExampleGene() {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	g, _ := NewGene(5, GeneSettings{Settings: Settings{Clock: clk}, Key: []byte("secret-gene-key!"), GeneBits: 10})
	a, _ := g.Next(context.Background(), []byte("member-1001"))
	b, _ := g.Next(context.Background(), []byte("member-1001"))
	p, _ := g.Decode(b)
	fmt.Println(g.Shard(a) == g.Shard(b), g.Shard(a) == g.ShardOf([]byte("member-1001")))
	fmt.Println(p.Time, p.Worker, p.Seq)
	// Output:
	// true true
	// 2026-01-01 00:00:00 +0000 UTC 5 1
}

func ExampleCollisionProbability() {
	fmt.Printf("%.2g %.2g\n", CollisionProbability(100, 22), CollisionProbability(1000, 22))
	// Output: 0.0012 0.11
}

func BenchmarkRandom(b *testing.B) {
	g, _ := NewRandom(RandomSettings{})
	b.ReportAllocs()
	for b.Loop() {
		_, _ = g.Next(context.Background())
	}
}

func BenchmarkGene(b *testing.B) {
	g, _ := NewGene(1, GeneSettings{Key: key})
	m := []byte("member-1001")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = g.Next(context.Background(), m)
		}
	})
}

func TestDefaultDecoders(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	g, _ := NewGene(9, GeneSettings{Settings: Settings{Clock: clk}, Key: key})
	id, _ := g.Next(t.Context(), []byte("x"))
	a, _ := g.Decode(id)
	b, err := DecodeGene(id)
	if err != nil || a != b {
		t.Fatalf("DecodeGene = %+v, %v; generator says %+v", b, err, a)
	}
	m, _ := NewMember(Settings{Clock: clk})
	id, _ = m.Next(t.Context(), 42)
	if p, _ := DecodeMember(id); p.Member != 42 || !p.Time.Equal(t0) {
		t.Fatalf("DecodeMember = %+v", p)
	}
	r, _ := NewRandom(RandomSettings{Settings: Settings{Clock: clk}})
	id, _ = r.Next(t.Context())
	if p, _ := DecodeRandom(id); !p.Time.Equal(t0) {
		t.Fatalf("DecodeRandom = %+v", p)
	}
}
