package client

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
)

// emptyTransport is a Transport whose every answer after a key's first
// (the probe that tells its strategy) is empty: a range of no IDs, a
// batch of none. It counts the requests it answers.
type emptyTransport struct {
	probed   atomic.Bool
	requests atomic.Int64
	count    int64 // the count of its range answers: 0, or more than asked when negative
	text     bool  // its batches after the probe are text IDs instead of none
}

func (e *emptyTransport) meta(key string) Meta {
	return Meta{Node: "mem", Strategy: fakeStrategy[key], Generation: "1"}
}

func (e *emptyTransport) Range(_ context.Context, key, _ string, n int) (int64, int64, Meta, error) {
	e.requests.Add(1)
	if e.count < 0 {
		return 1, int64(n) + 1, e.meta(key), nil
	}
	return 1, e.count, e.meta(key), nil
}

func (e *emptyTransport) IDs(_ context.Context, key, _ string, n int) ([]int64, bool, Meta, error) {
	e.requests.Add(1)
	if n == 1 && e.probed.CompareAndSwap(false, true) {
		return []int64{1}, false, e.meta(key), nil
	}
	return make([]int64, 0, n), e.text, e.meta(key), nil
}

func (e *emptyTransport) Close() {}

// TestEmptyAnswersBackOff: a Transport that answers with no IDs (an empty
// range, an empty batch), with more than asked, or with text IDs for a key
// whose IDs were numbers, is refused like a
// malformed HTTP answer, and the calls waiting for it back off: over ten
// backoffs of the injected clock the endpoint is asked a few times each,
// not in a loop. Before, the client took an empty answer for a success and
// asked again at once, without a pause, until the call's deadline: a
// shared monotonic request, a segment key's range refills and a snowflake
// key's batch refills alike.
func TestEmptyAnswersBackOff(t *testing.T) {
	for _, tc := range []struct {
		key   string
		count int64
		text  bool
	}{{"mono", 0, false}, {"mono", -1, false}, {"order", 0, false}, {"order", -1, false}, {"flake", 0, false}, {"flake", 0, true}} {
		name := tc.key + map[bool]string{true: "/empty", false: "/too many"}[tc.count == 0]
		if tc.text {
			name = tc.key + "/text"
		}
		t.Run(name, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(0, 0))
			tr := &emptyTransport{count: tc.count, text: tc.text}
			c := newClient(t, []string{"mem://a:1"}, Options{Clock: clk, HedgeAfter: -1, MaxRefills: 1,
				MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second,
				Dialers: map[string]Dialer{"mem": func(Target) (Transport, error) { return tr, nil }}})
			ctx := testCtx(t)
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				for { // the probe's ID first, for a prefetched key
					if _, err := c.Next(cctx, tc.key); err != nil {
						done <- err
						return
					}
				}
			}()
			wait := func() {
				t.Helper()
				if err := clk.WaitForSleepers(ctx, 1); err != nil {
					t.Fatalf("no call backs off after %d requests answered with no IDs: %v", tr.requests.Load(), err)
				}
			}
			wait()
			first := tr.requests.Load()
			const backoffs = 10
			for range backoffs {
				clk.Advance(time.Second)
				wait()
			}
			got := tr.requests.Load() - first
			cancel()
			err := <-done
			if !errors.Is(err, errMalformed) {
				t.Errorf("the call ended with %v; want its last failure to be the malformed answer", err)
			}
			if first > 3 || got > 2*backoffs {
				t.Fatalf("%d requests before the first backoff and %d over %d backoffs; want at most 3 and 2 a backoff", first, got, backoffs)
			}
			t.Logf("%d requests before the first backoff, %d over %d backoffs", first, got, backoffs)
		})
	}
}

// emptyRanges is the client's own transport answering a monotonic key's
// probe, then ranges of no IDs: what the shared requests' guard sees
// should a transport let such an answer through.
type emptyRanges struct {
	memTransport
	requests atomic.Int64
}

func (e *emptyRanges) ids(ctx context.Context, key, token string, n int) ([]int64, bool, meta, error) {
	ids, text, m, err := e.memTransport.ids(ctx, key, token, n)
	m.strategy = "monotonic"
	return ids, text, m, err
}

func (e *emptyRanges) rangeOf(context.Context, string, string, int) (int64, int64, meta, error) {
	e.requests.Add(1)
	return 1, 0, meta{strategy: "monotonic"}, nil
}

// TestSharedRequestWithoutIDsFails: a shared request answered with no IDs
// fails its batch, and the calls back off, instead of asking again at once
// until the deadline.
func TestSharedRequestWithoutIDsFails(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	c := newClient(t, []string{"http://127.0.0.1:1"}, Options{Clock: clk, HedgeAfter: -1})
	e := &emptyRanges{}
	c.pool.eps[0].t = e
	ctx := testCtx(t)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.Next(cctx, "mono")
		done <- err
	}()
	if err := clk.WaitForSleepers(ctx, 1); err != nil {
		t.Fatalf("no call backs off after %d requests answered with no IDs: %v", e.requests.Load(), err)
	}
	if n := e.requests.Load(); n > 1 {
		t.Fatalf("%d requests before the call backed off; want 1", n)
	}
	cancel()
	if err := <-done; !errors.Is(err, errMalformed) {
		t.Fatalf("the call ended with %v; want its last failure to be the answer without IDs", err)
	}
}
