package grpctransport_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	v1 "github.com/idmint/idmint/api/idmintv1"
	"github.com/idmint/idmint/client"
	"github.com/idmint/idmint/client/grpctransport"
)

// store is the state fake nodes share: one counter per key, as a shared
// segment store or worker registry would give.
type store struct {
	mu   sync.Mutex
	next map[string]int64
}

func (s *store) take(key string, n int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next == nil {
		s.next = map[string]int64{}
	}
	first := s.next[key] + 1
	s.next[key] += n
	return first
}

var strategies = map[string]string{"order": "segment", "flake": "snowflake", "uuid": "uuid", "secret": "segment"}

const token = "s3cret"

// node is a fake idmint node's gRPC service. Its answers carry the
// idmint-node and idmint-strategy header metadata, as a server's do.
type node struct {
	v1.UnimplementedIDsServer
	name string
	s    *store
	addr string
}

func newNode(t *testing.T, name string, s *store) *node {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &node{name: name, s: s, addr: l.Addr().String()}
	srv := grpc.NewServer()
	v1.RegisterIDsServer(srv, n)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return n
}

func (n *node) url() string { return "grpc://" + n.addr }

func (n *node) check(ctx context.Context, key string, count uint32) (string, error) {
	st, ok := strategies[key]
	if !ok {
		return "", status.Error(codes.NotFound, "key: no key called "+strconv.Quote(key))
	}
	grpc.SetHeader(ctx, metadata.Pairs("idmint-node", n.name, "idmint-strategy", st))
	if key == "secret" {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get("authorization"); len(v) == 0 || v[0] != "Bearer "+token {
			return "", status.Error(codes.Unauthenticated, "authorization: a valid bearer token is required")
		}
	}
	if count < 1 || count > 10000 {
		return "", status.Error(codes.InvalidArgument, "count: out of range")
	}
	return st, nil
}

func (n *node) NextRange(ctx context.Context, r *v1.NextRangeRequest) (*v1.NextRangeResponse, error) {
	st, err := n.check(ctx, r.Key, r.Count)
	if err != nil {
		return nil, err
	}
	if st != "segment" {
		return nil, status.Error(codes.InvalidArgument, "key: no ranges")
	}
	return &v1.NextRangeResponse{Key: r.Key, First: n.s.take(r.Key, int64(r.Count)), Count: int64(r.Count)}, nil
}

func (n *node) NextIDs(ctx context.Context, r *v1.NextIDsRequest) (*v1.NextIDsResponse, error) {
	st, err := n.check(ctx, r.Key, r.Count)
	if err != nil {
		return nil, err
	}
	resp := &v1.NextIDsResponse{Key: r.Key, Strategy: st}
	first := n.s.take(r.Key, int64(r.Count))
	for i := range int64(r.Count) {
		if st == "uuid" {
			resp.TextIds = append(resp.TextIds, fmt.Sprint(first+i))
		} else {
			resp.Ids = append(resp.Ids, first+i)
		}
	}
	return resp, nil
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newClient(t *testing.T, eps []string, opts client.Options) *client.Client {
	t.Helper()
	opts.Dialers = grpctransport.Dialers(grpctransport.Settings{})
	c, err := client.New(eps, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Four goroutines draw a segment key through two gRPC nodes: no ID twice,
// every ID from a range the client fetched (but the first probe's), each
// goroutine's IDs increasing within a range; snowflake batches work, a
// text key is refused, and the nodes' names reach Stats.
func TestGRPC(t *testing.T) {
	s := &store{}
	a, b := newNode(t, "na", s), newNode(t, "nb", s)
	var mu sync.Mutex
	var ranges []client.Range
	c := newClient(t, []string{a.url(), b.url()}, client.Options{Hooks: client.Hooks{Refill: func(ev client.RefillEvent) {
		mu.Lock()
		ranges = append(ranges, ev.Ranges...)
		mu.Unlock()
	}}})
	ctx := testCtx(t)
	draws := make([][]int64, 4)
	var wg sync.WaitGroup
	for g := range draws {
		wg.Go(func() {
			for range 3000 {
				id, err := c.Next(ctx, "order")
				if err != nil {
					t.Error(err)
					return
				}
				draws[g] = append(draws[g], id)
			}
		})
	}
	wg.Wait()
	mu.Lock()
	checkDraws(t, draws, slices.Clone(ranges))
	mu.Unlock()
	if _, err := c.Next(ctx, "flake"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Next(ctx, "uuid"); !errors.Is(err, client.ErrTextKey) {
		t.Errorf("Next(uuid) = %v; want ErrTextKey", err)
	}
	nodes := map[string]string{}
	for _, e := range c.Stats().Endpoints {
		nodes[e.URL] = e.Node
	}
	if nodes[a.url()] != "na" || nodes[b.url()] != "nb" {
		t.Errorf("endpoints' node names %v; want the idmint-node header metadata of each", nodes)
	}
}

// checkDraws fails on a duplicate, an ID outside every fetched range (but
// one: the probe's single ID) and a goroutine's IDs from one range that do
// not increase.
func checkDraws(t *testing.T, draws [][]int64, ranges []client.Range) {
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
	slices.SortFunc(ranges, func(x, y client.Range) int { return int(x.First - y.First) })
	find := func(id int64) int {
		i, _ := slices.BinarySearchFunc(ranges, id, func(r client.Range, id int64) int {
			switch {
			case r.First+r.Count <= id:
				return -1
			case r.First > id:
				return 1
			}
			return 0
		})
		if i == len(ranges) || id < ranges[i].First || id >= ranges[i].First+ranges[i].Count {
			return -1
		}
		return i
	}
	outside := 0
	for g, d := range draws {
		last := map[int]int64{}
		for _, id := range d {
			r := find(id)
			if r < 0 {
				outside++
				continue
			}
			if prev, ok := last[r]; ok && id <= prev {
				t.Fatalf("goroutine %d drew %d after %d from one range %v", g, id, prev, ranges[r])
			}
			last[r] = id
		}
	}
	if outside > 1 {
		t.Errorf("%d IDs outside every range the client fetched; want at most the probe's one", outside)
	}
}

// Unknown key (NotFound), missing token (Unauthenticated) and a bad count
// (InvalidArgument) are permanent: back at once, no failover; with the
// token the key works.
func TestPermanentErrors(t *testing.T) {
	s := &store{}
	eps := []string{newNode(t, "na", s).url(), newNode(t, "nb", s).url()}
	c := newClient(t, eps, client.Options{})
	// A deadline far away: permanent errors must come back at once, not
	// when it passes.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		key, code string
		status    int
	}{{"nosuch", "unknown_key", 404}, {"secret", "unauthorized", 401}} {
		_, err := c.Next(ctx, tc.key)
		var e *client.Error
		if !errors.As(err, &e) || e.Retryable || e.Status != tc.status || e.Code != tc.code {
			t.Errorf("Next(%s) = %v; want a permanent %d %s", tc.key, err, tc.status, tc.code)
		}
		if ctx.Err() != nil {
			t.Fatalf("Next(%s) waited for the deadline", tc.key)
		}
	}
	if st := c.Stats(); st.Failovers != 0 {
		t.Errorf("%d failovers for permanent errors; want 0", st.Failovers)
	}
	c2 := newClient(t, eps, client.Options{Tokens: map[string]string{"secret": token}})
	if _, err := c2.Next(ctx, "secret"); err != nil {
		t.Errorf("Next(secret) with the token: %v", err)
	}
}

// Settings.DialOptions reach every connection.
func TestDialOptions(t *testing.T) {
	var calls atomic.Int64
	count := grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		calls.Add(1)
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	c, err := client.New([]string{newNode(t, "na", &store{}).url()}, client.Options{Dialers: grpctransport.Dialers(grpctransport.Settings{DialOptions: []grpc.DialOption{count}})})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Next(testCtx(t), "flake"); err != nil {
		t.Fatal(err)
	}
	if calls.Load() == 0 {
		t.Error("the interceptor of Settings.DialOptions saw no call")
	}
}

func TestEndpointWithPath(t *testing.T) {
	_, err := client.New([]string{"grpc://127.0.0.1:1/v1"}, client.Options{Dialers: grpctransport.Dialers(grpctransport.Settings{})})
	if err == nil || !strings.Contains(err.Error(), `endpoint "grpc://127.0.0.1:1/v1": a gRPC endpoint has no path`) {
		t.Errorf("New(grpc://127.0.0.1:1/v1) = %v; want the endpoint named and its path refused", err)
	}
}
