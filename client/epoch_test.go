package client

import (
	"context"
	"testing"
	"time"

	"github.com/idmint/idmint/testkit/testserver"
)

// gated is the client's own transport whose answers wait for release,
// telling asked when a request arrives. Its answers carry m.
type gated struct {
	asked   chan struct{}
	release chan struct{}
	m       meta
}

func newGated(m meta) *gated {
	return &gated{asked: make(chan struct{}, 16), release: make(chan struct{}), m: m}
}

func (g *gated) wait(ctx context.Context) error {
	g.asked <- struct{}{}
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gated) rangeOf(ctx context.Context, _, _ string, n int) (int64, int64, meta, error) {
	if err := g.wait(ctx); err != nil {
		return 0, 0, meta{}, err
	}
	return 1, int64(n), g.m, nil
}

func (g *gated) ids(ctx context.Context, _, _ string, n int) ([]int64, bool, meta, error) {
	if err := g.wait(ctx); err != nil {
		return nil, false, meta{}, err
	}
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	return ids, false, g.m, nil
}

func (g *gated) close() {}

// staleRefill starts one refill of key (a probe while the key is not
// known), lets it reach the endpoint, resets the key as an answer that
// said it changed would, then lets the refill's answer come and waits for
// the refill to end. It returns the key's state.
func staleRefill(t *testing.T, m meta, mode int32) *keyState {
	t.Helper()
	c := newClient(t, []string{"http://127.0.0.1:1"}, Options{HedgeAfter: -1})
	g := newGated(m)
	c.pool.eps[0].t = g
	k, err := c.key("order")
	if err != nil {
		t.Fatal(err)
	}
	k.mu.Lock()
	if mode != modeUnknown {
		k.strategy = "segment"
		k.mode.Store(mode)
	} else {
		k.probing = true
	}
	k.startLocked(10, 10)
	k.mu.Unlock()
	select {
	case <-g.asked:
	case <-testCtx(t).Done():
		t.Fatal("the refill never reached the endpoint")
	}
	k.mu.Lock()
	k.resetLocked() // the key was deleted and created again meanwhile
	k.mu.Unlock()
	close(g.release)
	testserver.Eventually(t, "the refill to end", 10*time.Second, func() bool {
		k.mu.Lock()
		defer k.mu.Unlock()
		return k.inflight == 0
	})
	return k
}

// TestRefillAcrossResetBuffersNothing: a refill sent before the key was
// reset (an answer said it was deleted and created again, perhaps with
// another strategy) answers IDs of the key as it was. They are a gap:
// whether the answer says nothing of the key, or names its old strategy
// and generation, none of them is buffered.
func TestRefillAcrossResetBuffersNothing(t *testing.T) {
	for _, m := range []meta{{}, {strategy: "segment", generation: "g1"}} {
		for _, mode := range []int32{modeRange, modeBatch} {
			k := staleRefill(t, m, mode)
			if n := k.buffered(); n != 0 {
				t.Fatalf("mode %d, answer %+v: %d IDs of the refill sent before the reset are buffered; want none", mode, m, n)
			}
		}
	}
}

// TestProbeAcrossResetTeachesNothing: a probe sent before the key was
// reset answers the old key's strategy. It neither sets how the key is
// served (a segment key re-created as a monotonic one must not be
// prefetched on its old strategy's word) nor buffers its ID: the next
// refill probes again.
func TestProbeAcrossResetTeachesNothing(t *testing.T) {
	k := staleRefill(t, meta{strategy: "segment", generation: "g1"}, modeUnknown)
	if m, n := k.mode.Load(), k.buffered(); m != modeUnknown || n != 0 {
		t.Fatalf("after a probe sent before the reset answered: mode %d, %d IDs buffered; want the key still unknown (%d), none buffered", m, n, modeUnknown)
	}
}
