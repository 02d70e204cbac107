package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idmint/idmint/monotonic/lincheck"
	"github.com/idmint/idmint/testkit/testserver"
)

// history records calls (Sent: when the call began, Received: when it
// returned) on one monotonic clock, for lincheck.
type history struct {
	start time.Time
	mu    sync.Mutex
	ops   []lincheck.Op
}

func newHistory() *history { return &history{start: time.Now()} }

func (h *history) now() time.Duration { return time.Since(h.start) }

func (h *history) add(sent time.Duration, label string, ids ...int64) {
	op := lincheck.Op{Sent: sent, Received: h.now(), IDs: ids, Label: label}
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

func (h *history) check(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if v := lincheck.Check(h.ops, 5); len(v) > 0 {
		t.Fatalf("%d calls are not linearizable: %v", len(h.ops), v)
	}
}

// Concurrent calls on a monotonic key share requests, and the history of
// calls stays linearizable (the fake cluster's counter is).
func TestMonotonicCallsShareRequests(t *testing.T) {
	cl := newCluster()
	a, b := newNamedNode(t, cl, "a"), newNamedNode(t, cl, "b")
	c := newClient(t, []string{a.url(), b.url()}, Options{})
	ctx := testCtx(t)
	h := newHistory()
	const goroutines, each = 64, 200
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			buf := make([]int64, 3)
			for i := range each {
				sent := h.now()
				if (g+i)%4 == 0 {
					if err := c.NextN(ctx, "mono", buf); err != nil {
						errs <- err
						return
					}
					h.add(sent, "NextN", append([]int64(nil), buf...)...)
					continue
				}
				id, err := c.Next(ctx, "mono")
				if err != nil {
					errs <- err
					return
				}
				h.add(sent, "Next", id)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	h.check(t)
	calls := int64(goroutines * each)
	reqs := cl.requests("mono/range") + cl.requests("mono/ids")
	t.Logf("%d calls, %d requests (%d ranges)", calls, reqs, cl.requests("mono/range"))
	if reqs >= calls/2 {
		t.Errorf("%d concurrent calls sent %d requests; want them shared", calls, reqs)
	}
	if st := c.Stats().Keys[0]; st.Requests != cl.requests("mono/range") || st.Prefetched || st.Buffered != 0 {
		t.Errorf("stats %+v; want %d requests, nothing prefetched or buffered", st, cl.requests("mono/range"))
	}
}

// countLog records the count of every request a gated node received.
type countLog struct {
	mu     sync.Mutex
	counts []int
}

func (l *countLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("count"))
		l.mu.Lock()
		l.counts = append(l.counts, n)
		l.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (l *countLog) snapshot() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int(nil), l.counts...)
}

// A call that arrives while a request is in flight is not in it: it
// waits for the next request, which is sent only after the first answer
// (one slot), and carries every call that arrived meanwhile.
func TestMonotonicLateCallWaitsForNextRequest(t *testing.T) {
	cl := newCluster()
	n := &fakeNode{c: cl, name: "a", hold: make(chan struct{}), gate: make(chan struct{})}
	var log countLog
	srv := httptest.NewServer(log.wrap(n))
	t.Cleanup(srv.Close)
	c := newClient(t, []string{srv.URL}, Options{MaxInFlight: 1, HedgeAfter: -1})
	ctx := testCtx(t)
	if _, err := c.Next(ctx, "mono"); err != nil { // the probe and one request
		t.Fatal(err)
	}
	n.mode.Store(modeGate)
	type res struct {
		id  int64
		err error
	}
	first := make(chan res, 1)
	go func() {
		id, err := c.Next(ctx, "mono")
		first <- res{id, err}
	}()
	testserver.Eventually(t, "the first call's request to reach the node", 10*time.Second, func() bool { return len(log.snapshot()) == 3 })
	late := make(chan res, 5)
	for range 5 {
		go func() {
			id, err := c.Next(ctx, "mono")
			late <- res{id, err}
		}()
	}
	testserver.Eventually(t, "the late calls to join the gathering batch", 10*time.Second, func() bool {
		k := (*c.keys.Load())["mono"]
		k.co.mu.Lock()
		defer k.co.mu.Unlock()
		return k.co.gather != nil && len(k.co.gather.calls) == 5
	})
	close(n.gate)
	r := <-first
	if r.err != nil {
		t.Fatal(r.err)
	}
	for range 5 {
		l := <-late
		if l.err != nil {
			t.Fatal(l.err)
		}
		if l.id <= r.id {
			t.Errorf("a late call got %d, not above %d of the call in flight", l.id, r.id)
		}
	}
	counts := log.snapshot()
	if len(counts) != 4 || counts[2] != 1 || counts[3] != 5 {
		t.Fatalf("requests asked for %v; want the probe, 1, the first call alone (1), then the 5 late calls together (5)", counts)
	}
}

// A call whose context ends leaves: the IDs answered for it are never
// handed to a later call (another client was answered above them
// meanwhile).
func TestMonotonicAbandonedCallIDsDropped(t *testing.T) {
	cl := newCluster()
	n := newNamedNode(t, cl, "a")
	c := newClient(t, []string{n.url()}, Options{MaxInFlight: 1, HedgeAfter: -1})
	other := newClient(t, []string{n.url()}, Options{})
	ctx := testCtx(t)
	if _, err := c.Next(ctx, "mono"); err != nil {
		t.Fatal(err)
	}
	n.mode.Store(modeGate)
	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	before := cl.requests("mono/range")
	dst := make([]int64, 10)
	if err := c.NextN(short, "mono", dst); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("NextN while the node holds the request = %v; want the deadline", err)
	}
	n.mode.Store(modeOK)
	close(n.gate) // the held request is answered now, to nobody
	testserver.Eventually(t, "the held request to be answered", 10*time.Second, func() bool {
		return cl.requests("mono/range") > before && cl.last("mono") >= 12
	})
	b, err := other.Next(ctx, "mono")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]int64, 10)
	if err := c.NextN(ctx, "mono", got); err != nil {
		t.Fatal(err)
	}
	for _, id := range got {
		if id <= b {
			t.Fatalf("answered %v after another client was answered %d: the abandoned call's IDs were served late", got, b)
		}
	}
}

// With the leader's name known (Idmint-Leader) and an endpoint that
// says it is that node (Idmint-Node), a monotonic key's requests go to
// it; when it fails they fall back to the others.
func TestMonotonicGoesToLeader(t *testing.T) {
	cl := newCluster()
	nodes := []*fakeNode{newNamedNode(t, cl, "n0"), newNamedNode(t, cl, "n1"), newNamedNode(t, cl, "n2")}
	cl.leader = "n1"
	c := newClient(t, []string{nodes[0].url(), nodes[1].url(), nodes[2].url()}, Options{HedgeAfter: -1})
	ctx := testCtx(t)
	// Learn the names: other keys' refills visit every endpoint in turn.
	for i := 0; i < 3; i++ {
		if _, err := c.Next(ctx, "flake"); err != nil {
			t.Fatal(err)
		}
		c.Next(ctx, "tick")
		c.Next(ctx, "order")
	}
	testserver.Eventually(t, "the client to learn every endpoint's node name", 10*time.Second, func() bool {
		for _, e := range c.Stats().Endpoints {
			if e.Node == "" {
				c.Next(ctx, "mono")
				return false
			}
		}
		return true
	})
	if _, err := c.Next(ctx, "mono"); err != nil { // the probe, and the leader's name
		t.Fatal(err)
	}
	before := make([]int64, 3)
	for i, n := range nodes {
		before[i] = n.keyCalls("mono")
	}
	for range 100 {
		if _, err := c.Next(ctx, "mono"); err != nil {
			t.Fatal(err)
		}
	}
	for i, n := range nodes {
		got := n.keyCalls("mono") - before[i]
		if i == 1 && got != 100 || i != 1 && got != 0 {
			t.Fatalf("node %s got %d of 100 sequential calls' requests; want all at the leader n1, none elsewhere", n.name, got)
		}
	}
	if l := c.Stats().Keys; l[len(l)-1].Key == "mono" && l[len(l)-1].Leader != "n1" {
		t.Errorf("stats say the leader is %q; want n1", l[len(l)-1].Leader)
	}
	// The leader fails: requests fall back to the others.
	nodes[1].mode.Store(mode503)
	for range 20 {
		if _, err := c.Next(ctx, "mono"); err != nil {
			t.Fatalf("Next with the leader refusing: %v", err)
		}
	}
}

// Generations are compared per endpoint: two nodes that give one key
// different tokens do not make the client drop its buffer, and a node
// whose token changes does.
func TestGenerationPerEndpoint(t *testing.T) {
	cl := newCluster()
	a, b := newNamedNode(t, cl, "a"), newNamedNode(t, cl, "b")
	var log refillLog
	c := newClient(t, []string{a.url(), b.url()}, Options{MinBatch: 10, MaxBatch: 10, Hooks: Hooks{Refill: log.hook}})
	ctx := testCtx(t)
	for range 500 {
		if _, err := c.Next(ctx, "order"); err != nil {
			t.Fatal(err)
		}
	}
	if st := c.Stats().Keys[0]; st.Resets != 0 || st.Refills < 10 {
		t.Fatalf("stats %+v: want many refills from both nodes and no reset", st)
	}
	cl.mu.Lock()
	cl.gen["order"]++ // re-created, still a segment key
	cl.mu.Unlock()
	testserver.Eventually(t, "the buffer to be dropped on the new generation", 10*time.Second, func() bool {
		if _, err := c.Next(ctx, "order"); err != nil {
			t.Fatal(err)
		}
		return c.Stats().Keys[0].Resets > 0
	})
	for range 200 {
		if _, err := c.Next(ctx, "order"); err != nil {
			t.Fatal(err)
		}
	}
	if r := c.Stats().Keys[0].Resets; r > 2 {
		t.Errorf("%d resets for one re-creation seen from two nodes; want at most 2", r)
	}
}

func ExampleClient_Next_monotonic() {
	srv := httptest.NewServer(&fakeNode{c: newCluster(), name: "n1", hold: make(chan struct{})})
	defer srv.Close()
	c, err := New([]string{srv.URL}, Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Concurrent calls of a monotonic key share requests; each still gets
	// IDs above every ID answered before it began.
	var wg sync.WaitGroup
	ids := make([]int64, 8)
	for i := range ids {
		wg.Go(func() { ids[i], _ = c.Next(ctx, "mono") })
	}
	wg.Wait()
	a, _ := c.Next(ctx, "mono")
	above := true
	for _, id := range ids {
		above = above && a > id
	}
	fmt.Println(above)
	// Output: true
}

// An answer to a refill begun before the key's latest reset is stale: it
// may carry the generation the reset replaced, overtaken by the answer
// that carried the new one. It neither resets the key again nor teaches
// the old generation back (which would reset a third time on the next
// current answer).
func TestStaleGenerationIgnored(t *testing.T) {
	c := newClient(t, []string{"http://127.0.0.1:1"}, Options{})
	k, err := c.key("order")
	if err != nil {
		t.Fatal(err)
	}
	e := c.pool.eps[0]
	if k.heard(e, meta{strategy: "segment", generation: "g1"}, k.epoch) {
		t.Fatal("the first answer reset the key")
	}
	before := k.epoch
	if !k.heard(e, meta{strategy: "segment", generation: "g2"}, before) {
		t.Fatal("a new generation did not reset the key")
	}
	if !k.heard(e, meta{strategy: "segment", generation: "g1"}, before) {
		t.Fatal("a stale answer's IDs would be buffered")
	}
	if k.heard(e, meta{strategy: "segment", generation: "g2"}, k.epoch) {
		t.Fatal("the current generation reset the key again: the stale answer taught the old one back")
	}
	if r := k.resets.Load(); r != 1 {
		t.Fatalf("%d resets for one re-creation, want 1", r)
	}
}
