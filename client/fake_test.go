package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// cluster is the shared state of fake nodes: one counter per key, as a
// shared segment store or worker registry would give.
type cluster struct {
	mu      sync.Mutex
	next    map[string]int64
	issued  atomic.Int64 // IDs handed out by all nodes
	token   string       // required for key "secret"
	counted sync.Map     // key -> *atomic.Int64 requests; "key/op" and "key/op/count" too (op ids or range)
	max     int          // the nodes' max_count; 0: 10000

	// Like a server's answer headers: a key's strategy (overriding
	// fakeStrategy), its generation (bumped when it is re-created) and
	// the leader of its monotonic keys.
	strategy map[string]string
	gen      map[string]int
	leader   string // node name; "" unknown
}

func newCluster() *cluster {
	return &cluster{next: map[string]int64{}, token: "s3cret", strategy: map[string]string{}, gen: map[string]int{}}
}

// strategyOf returns key's strategy and generation, ok false for an
// unknown key.
func (c *cluster) strategyOf(key string) (st string, gen int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok = c.strategy[key]; !ok {
		st, ok = fakeStrategy[key]
	}
	return st, c.gen[key], ok
}

// recreate deletes key and creates it again with strategy st: a new
// generation, and IDs counted on from first.
func (c *cluster) recreate(key, st string, first int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.strategy[key] = st
	c.gen[key]++
	c.next[key] = first - 1
}

// last returns the last ID of key handed out.
func (c *cluster) last(key string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.next[key]
}

func (c *cluster) count(what string) {
	v, _ := c.counted.LoadOrStore(what, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

var fakeStrategy = map[string]string{"order": "segment", "flake": "snowflake", "tick": "ticket", "mono": "monotonic", "uuid": "uuid", "secret": "segment", "count": "counter", "stepped": "segment", "re": "segment"}

func (c *cluster) take(key string, n int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	first := c.next[key] + 1
	c.next[key] += n
	c.issued.Add(n)
	return first
}

func (c *cluster) requests(key string) int64 {
	v, _ := c.counted.LoadOrStore(key, new(atomic.Int64))
	return v.(*atomic.Int64).Load()
}

// Fault modes of a fake node.
const (
	modeOK = iota
	modeGarbage
	mode500
	modeSlow // answers after the request is cancelled, or never
	mode429
	mode503
	modeGate // answers normally once gate is closed
)

// fakeNode is one HTTP node of a cluster with a switchable fault.
type fakeNode struct {
	c     *cluster
	name  string // Idmint-Node; "" sends none (a server before the header)
	mode  atomic.Int32
	srv   *httptest.Server
	calls atomic.Int64
	byKey sync.Map      // key -> *atomic.Int64: requests of that key it answered
	hold  chan struct{} // modeSlow waits on it or the request
	gate  chan struct{} // modeGate waits on it, then answers
}

func newFakeNode(t *testing.T, c *cluster) *fakeNode {
	return newNamedNode(t, c, "")
}

// newNamedNode is newFakeNode whose answers carry the headers of a
// current server: Idmint-Node: name, and the key's.
func newNamedNode(t *testing.T, c *cluster, name string) *fakeNode {
	n := &fakeNode{c: c, name: name, hold: make(chan struct{}), gate: make(chan struct{})}
	n.srv = httptest.NewServer(n)
	t.Cleanup(func() {
		close(n.hold)
		n.srv.Close()
	})
	return n
}

func (n *fakeNode) url() string { return n.srv.URL }

// keyCalls returns how many requests of key n answered.
func (n *fakeNode) keyCalls(key string) int64 {
	v, _ := n.byKey.LoadOrStore(key, new(atomic.Int64))
	return v.(*atomic.Int64).Load()
}

func writeErr(w http.ResponseWriter, status int, code, field, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": msg, "field": field}})
	w.Write(b)
}

func (n *fakeNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n.calls.Add(1)
	if n.name != "" {
		w.Header().Set("Idmint-Node", n.name)
	}
	switch n.mode.Load() {
	case modeGarbage:
		w.Write([]byte(`{"first":"12","last":"oops`))
		return
	case mode500:
		w.WriteHeader(500)
		w.Write([]byte("internal error"))
		return
	case modeSlow:
		select {
		case <-r.Context().Done():
		case <-n.hold:
		}
		return
	case modeGate:
		select {
		case <-r.Context().Done():
			return
		case <-n.gate:
		}
	case mode429:
		w.Header().Set("Retry-After", "7")
		writeErr(w, 429, "rate_limited", "key", "slow down")
		return
	case mode503:
		w.Header().Set("Retry-After", "1")
		writeErr(w, 503, "unavailable", "", "cannot issue now")
		return
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1/keys/"), "/")
	if len(parts) != 2 {
		writeErr(w, 404, "not_found", "path", "no such endpoint")
		return
	}
	key, op := parts[0], parts[1]
	st, gen, ok := n.c.strategyOf(key)
	if !ok {
		writeErr(w, 404, "unknown_key", "key", "no key called "+strconv.Quote(key))
		return
	}
	v, _ := n.byKey.LoadOrStore(key, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
	n.c.count(key)
	n.c.count(key + "/" + op)
	n.c.count(key + "/" + op + "/" + r.URL.Query().Get("count"))
	if key == "secret" && r.Header.Get("Authorization") != "Bearer "+n.c.token {
		if r.Header.Get("Authorization") == "" {
			writeErr(w, 401, "unauthorized", "Authorization", "a bearer token is required")
		} else {
			writeErr(w, 403, "forbidden", "Authorization", "wrong token")
		}
		return
	}
	if n.name != "" {
		w.Header().Set("Idmint-Strategy", st)
		w.Header().Set("Idmint-Key-Generation", n.name+"."+strconv.Itoa(gen))
		n.c.mu.Lock()
		if l := n.c.leader; l != "" && st == "monotonic" {
			w.Header().Set("Idmint-Leader", l)
		}
		n.c.mu.Unlock()
	}
	count, err := strconv.Atoi(r.URL.Query().Get("count"))
	maxCount := 10000
	if n.c.max > 0 {
		maxCount = n.c.max
	}
	if err != nil || count < 1 || count > maxCount {
		writeErr(w, 400, "bad_count", "count", "count: "+r.URL.Query().Get("count")+" is out of range")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch op {
	case "range":
		if (st != "segment" && st != "monotonic") || key == "stepped" {
			writeErr(w, 400, "unsupported", "key", "no ranges")
			return
		}
		first := n.c.take(key, int64(count))
		fmt.Fprintf(w, `{"key":%q,"first":"%d","last":"%d","count":%d}`, key, first, first+int64(count)-1, count)
	case "ids":
		ids := make([]string, count)
		if st == "uuid" {
			for i := range ids {
				ids[i] = fmt.Sprintf("0190a2b4-0000-7000-8000-%012d", n.c.take(key, 1))
			}
		} else {
			first := n.c.take(key, int64(count))
			for i := range ids {
				ids[i] = strconv.FormatInt(first+int64(i), 10)
			}
		}
		b, _ := json.Marshal(map[string]any{"key": key, "strategy": st, "ids": ids})
		w.Write(b)
	default:
		writeErr(w, 404, "not_found", "path", "no such endpoint")
	}
}

// down makes the node refuse connections (closed listener); up is not
// possible for an httptest server, so tests that bring nodes back use
// mode503 instead.
func (n *fakeNode) down() { n.srv.CloseClientConnections(); n.srv.Listener.Close() }

// testCtx bounds a test's call.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newClient(t *testing.T, eps []string, opts Options) *Client {
	t.Helper()
	c, err := New(eps, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
