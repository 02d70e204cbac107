package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idmint/idmint/testkit/testserver"
)

// refillLog records every range the client fetched.
type refillLog struct {
	mu     sync.Mutex
	ranges []Range
	events []RefillEvent
}

func (l *refillLog) hook(ev RefillEvent) {
	l.mu.Lock()
	l.ranges = append(l.ranges, ev.Ranges...)
	l.events = append(l.events, ev)
	l.mu.Unlock()
}

func (l *refillLog) snapshot() []Range {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ranges)
}

// checkDraws checks draws (one slice per goroutine, in the order drawn)
// for duplicates and, for a range key, that every ID lies in a range the
// client fetched and that each goroutine's IDs from one range increase.
func checkDraws(t *testing.T, draws [][]int64, ranges []Range) {
	t.Helper()
	var all []int64
	for _, d := range draws {
		all = append(all, d...)
	}
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("duplicate ID %d among %d", all[i], len(all))
		}
	}
	if ranges == nil {
		return
	}
	rs := slices.Clone(ranges)
	sort.Slice(rs, func(i, j int) bool { return rs[i].First < rs[j].First })
	for i := 1; i < len(rs); i++ {
		if rs[i].First < rs[i-1].First+rs[i-1].Count {
			t.Fatalf("ranges %v and %v fetched by the client overlap", rs[i-1], rs[i])
		}
	}
	find := func(id int64) int {
		i := sort.Search(len(rs), func(i int) bool { return rs[i].First+rs[i].Count > id })
		if i == len(rs) || id < rs[i].First {
			return -1
		}
		return i
	}
	for g, d := range draws {
		lastIn := map[int]int64{}
		for _, id := range d {
			r := find(id)
			if r < 0 {
				continue // the probe's single ID (an ids answer, not a range)
			}
			if prev, ok := lastIn[r]; ok && id <= prev {
				t.Fatalf("goroutine %d drew %d after %d from one refill range %v: not increasing", g, id, prev, rs[r])
			}
			lastIn[r] = id
		}
	}
}

func TestNextConcurrentUnique(t *testing.T) {
	cl := newCluster()
	a, b := newFakeNode(t, cl), newFakeNode(t, cl)
	var log refillLog
	// Each call has its own deadline (Options.Timeout, for a context
	// without one), not the whole test: 240,000 draws under -race on a
	// loaded machine outlasted one 30 s context for all of them, and the
	// call in flight then failed with "no endpoint answered".
	c := newClient(t, []string{a.url(), b.url()}, Options{Hooks: Hooks{Refill: log.hook}, MinBatch: 50, MaxCount: 700, Timeout: 30 * time.Second})
	ctx := context.Background()
	const goroutines, each = 16, 5000
	for _, key := range []string{"order", "flake", "tick"} {
		draws := make([][]int64, goroutines)
		var wg sync.WaitGroup
		errs := make(chan error, goroutines)
		for g := range goroutines {
			wg.Go(func() {
				buf := make([]int64, 3)
				for i := 0; len(draws[g]) < each; i++ {
					switch i % 3 {
					case 0:
						id, err := c.Next(ctx, key)
						if err != nil {
							errs <- err
							return
						}
						draws[g] = append(draws[g], id)
					case 1:
						if err := c.NextN(ctx, key, buf); err != nil {
							errs <- err
							return
						}
						draws[g] = append(draws[g], buf...)
					default:
						if key != "order" {
							continue
						}
						first, n, err := c.Range(ctx, key, 4)
						if err != nil {
							errs <- err
							return
						}
						if n < 1 || n > 4 {
							errs <- errors.New("Range count out of 1..4")
							return
						}
						for j := range n {
							draws[g] = append(draws[g], first+j)
						}
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("%s: %v", key, err)
		}
		ranges := log.snapshot()
		if key != "order" {
			ranges = nil
		}
		checkDraws(t, draws, ranges)
	}
	st := c.Stats()
	for _, k := range st.Keys {
		if !k.Prefetched || k.Refills < 2 {
			t.Errorf("key %s: prefetched %v after %d refills; want prefetched with several refills", k.Key, k.Prefetched, k.Refills)
		}
	}
}

func TestModes(t *testing.T) {
	cl := newCluster()
	n := newFakeNode(t, cl)
	c := newClient(t, []string{n.url()}, Options{})
	ctx := testCtx(t)

	// Monotonic (and unknown) keys: every call is its own request.
	for _, key := range []string{"mono", "count"} {
		for range 20 {
			if _, err := c.Next(ctx, key); err != nil {
				t.Fatal(err)
			}
		}
		if got := cl.requests(key); got != 21 {
			t.Errorf("%s: 20 calls sent %d requests; want the probe and one each (never prefetched, the probe's ID never served)", key, got)
		}
		if b := c.Buffered(key); b != 0 {
			t.Errorf("%s: %d IDs buffered; want none", key, b)
		}
	}
	// Text keys are refused.
	if _, err := c.Next(ctx, "uuid"); !errors.Is(err, ErrTextKey) || !strings.Contains(err.Error(), `"uuid"`) {
		t.Errorf("Next(uuid) = %v; want ErrTextKey naming the key", err)
	}
	// No ranges from snowflake keys, nor from a segment key that has none.
	for _, key := range []string{"flake", "stepped"} {
		if _, err := c.Next(ctx, key); err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Range(ctx, key, 10); key == "flake" && !errors.Is(err, ErrNoRanges) {
			t.Errorf("Range(%s) = %v; want ErrNoRanges", key, err)
		}
		if _, err := c.Next(ctx, key); err != nil {
			t.Fatalf("%s after Range: %v", key, err)
		}
	}
	// Range is contiguous and never longer than asked.
	first, count, err := c.Range(ctx, "order", 1)
	if err != nil || count != 1 {
		t.Fatalf("Range(order, 1) = %d, %d, %v", first, count, err)
	}
	first2, count2, err := c.Range(ctx, "order", 30)
	if err != nil || count2 < 1 || count2 > 30 || first2 <= first {
		t.Fatalf("Range(order, 30) after %d = %d, %d, %v", first, first2, count2, err)
	}
	// Bad input names what is wrong.
	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"empty key", func() error { _, err := c.Next(ctx, ""); return err }, "key: must not be empty"},
		{"bad char", func() error { _, err := c.Next(ctx, "a/b"); return err }, `character '/'`},
		{"range n", func() error { _, _, err := c.Range(ctx, "order", 0); return err }, "n: 0 is out of range"},
	} {
		if err := tc.call(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error containing %q", tc.name, err, tc.want)
		}
	}
	if err := c.NextN(ctx, "order", nil); err != nil {
		t.Errorf("NextN(nil) = %v", err)
	}
}

func TestPermanentErrors(t *testing.T) {
	cl := newCluster()
	a, b := newFakeNode(t, cl), newFakeNode(t, cl)
	eps := []string{a.url(), b.url()}
	c := newClient(t, eps, Options{})
	// A deadline far away: permanent errors must come back at once,
	// not when it passes.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		key, code string
		status    int
	}{{"nosuch", "unknown_key", 404}, {"secret", "", 401}} {
		_, err := c.Next(ctx, tc.key)
		var e *Error
		if !errors.As(err, &e) || e.Retryable || e.Status != tc.status || (tc.code != "" && e.Code != tc.code) {
			t.Errorf("%v: Next(%s) = %v; want a permanent %d %s", eps, tc.key, err, tc.status, tc.code)
		}
		if ctx.Err() != nil {
			t.Fatalf("%v: Next(%s) waited for the deadline", eps, tc.key)
		}
	}
	if st := c.Stats(); st.Failovers != 0 {
		t.Errorf("%v: %d failovers for permanent errors; want 0", eps, st.Failovers)
	}
	// With the token, the key works.
	c2 := newClient(t, eps, Options{Tokens: map[string]string{"secret": cl.token}})
	if _, err := c2.Next(ctx, "secret"); err != nil {
		t.Errorf("%v: Next(secret) with the token: %v", eps, err)
	}
}

func TestTLS(t *testing.T) {
	cl := newCluster()
	n := &fakeNode{c: cl, hold: make(chan struct{})}
	srv := httptest.NewTLSServer(n)
	defer srv.Close()
	// Without the server's certificate the handshake fails: retryable on
	// another endpoint, so the call ends at its deadline, naming the last
	// failure. The deadline must leave room for one handshake, which under
	// -race on 2 loaded cores took more than 300 ms and then more than 2 s
	// ("no endpoint answered"): it doubles from 1 s until a handshake fits,
	// so a quiet machine still spends 1 s here.
	for d := time.Second; ; d *= 2 {
		c := newClient(t, []string{srv.URL}, Options{Timeout: d})
		_, err := c.Next(context.Background(), "order")
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Next over TLS with an unknown certificate = %v; want ErrUnavailable", err)
		}
		if strings.Contains(err.Error(), "certificate") {
			break
		}
		if d >= 32*time.Second {
			t.Fatalf("Next over TLS with an unknown certificate, %v deadline = %v; want it to name the certificate", d, err)
		}
		t.Logf("no handshake finished within %v, trying a longer deadline: %v", d, err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	c := newClient(t, []string{srv.URL}, Options{TLS: &tls.Config{RootCAs: pool}})
	if _, err := c.Next(testCtx(t), "order"); err != nil {
		t.Fatalf("Next over TLS with the server's certificate trusted: %v", err)
	}
}

// TestServerMaxCountLower: servers whose max_count is below the client's
// MaxCount answer bad_count; the client halves its requests until they fit
// instead of failing every refill, for prefetched and direct keys alike.
func TestServerMaxCountLower(t *testing.T) {
	cl := newCluster()
	cl.max = 300
	n := newFakeNode(t, cl)
	c := newClient(t, []string{n.srv.URL}, Options{MinBatch: 2000})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, key := range []string{"order", "flake", "mono"} {
		dst := make([]int64, 1000)
		if err := c.NextN(ctx, key, dst); err != nil {
			t.Fatalf("%s: NextN(1000) from servers taking at most 300: %v", key, err)
		}
		seen := map[int64]bool{}
		for _, id := range dst {
			if seen[id] {
				t.Fatalf("%s: %d twice", key, id)
			}
			seen[id] = true
		}
	}
	if m := c.maxCount.Load(); m > 300 {
		t.Fatalf("request size still %d after the server refused more than 300", m)
	}
	// bad_count is the request's fault: the node answered, so its breaker
	// stays closed (counting those answers as failures opened it, and a
	// loaded CI machine then saw "every endpoint is backing off").
	for _, e := range c.Stats().Endpoints {
		if !e.Available || e.Failures != 0 {
			t.Errorf("endpoint %s after bad_count answers: available %v, %d failures; want available, 0 failures", e.URL, e.Available, e.Failures)
		}
	}
}

// TestMonotonicProbeNotServedLate: the first call on a monotonic key
// probes its strategy and gives up before the probe answers. The probe's
// ID (1) is answered to nobody: a later call, made after another client
// was answered 2, must not get it (it did, breaking real-time order).
func TestMonotonicProbeNotServedLate(t *testing.T) {
	cl := newCluster()
	n := newFakeNode(t, cl)
	c := newClient(t, []string{n.url()}, Options{})
	other := newClient(t, []string{n.url()}, Options{})
	n.mode.Store(modeGate)
	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if id, err := c.Next(short, "mono"); err == nil {
		t.Fatalf("Next answered %d while the node held the probe", id)
	}
	n.mode.Store(modeOK)
	close(n.gate) // the probe answers now, to nobody
	ctx := testCtx(t)
	testserver.Eventually(t, "the held probe to be answered", 10*time.Second, func() bool { return cl.requests("mono") >= 1 })
	b, err := other.Next(ctx, "mono")
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Next(ctx, "mono")
	if err != nil {
		t.Fatal(err)
	}
	if a <= b {
		t.Fatalf("answered %d after another client was answered %d: the abandoned probe's ID was served late", a, b)
	}
}
