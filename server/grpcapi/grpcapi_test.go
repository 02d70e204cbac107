package grpcapi

import (
	"context"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	v1 "github.com/idmint/idmint/api/idmintv1"
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/server/internal/reqtest"
	"github.com/idmint/idmint/server/internal/servertest"
)

// newFixture is a server with the gRPC service over servertest's keys.
func newFixture(t testing.TB, mutate func(*server.Config)) *servertest.Fixture {
	t.Helper()
	return servertest.New(t, mutate, New)
}

// heapInUse returns the heap in use after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// serve serves f's gRPC server on a loopback port until the test ends and
// returns its address.
func serve(t testing.TB, f *servertest.Fixture) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := f.S.GRPCServer()
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	return ln.Addr().String()
}

func grpcFixture(t *testing.T) (v1.IDsClient, *servertest.Fixture) {
	t.Helper()
	f := newFixture(t, nil)
	cc, err := grpc.NewClient(serve(t, f), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return v1.NewIDsClient(cc), f
}

func wantCode(t *testing.T, err error, c codes.Code) {
	t.Helper()
	if status.Code(err) != c {
		t.Fatalf("err = %v, want code %s", err, c)
	}
}

func TestGRPC(t *testing.T) {
	c, f := grpcFixture(t)
	ctx := context.Background()
	r, err := c.NextIDs(ctx, &v1.NextIDsRequest{Key: "order", Count: 3})
	if err != nil || len(r.Ids) != 3 || r.Ids[0] != 1 || r.Ids[2] != 3 || r.Strategy != "counter" {
		t.Fatalf("%v %v", r, err)
	}
	r, err = c.NextIDs(ctx, &v1.NextIDsRequest{Key: "note"})
	if err != nil || len(r.TextIds) != 1 || r.TextIds[0] != "T-1" {
		t.Fatalf("text: %v %v", r, err)
	}
	_, err = c.NextIDs(ctx, &v1.NextIDsRequest{Key: "order", Count: 10001})
	wantCode(t, err, codes.InvalidArgument)
	_, err = c.NextIDs(ctx, &v1.NextIDsRequest{Key: "nosuch"})
	wantCode(t, err, codes.NotFound)
	_, err = c.NextIDs(ctx, &v1.NextIDsRequest{Key: "a b"})
	wantCode(t, err, codes.InvalidArgument)
	_, err = c.NextIDs(ctx, &v1.NextIDsRequest{Key: "secret"})
	wantCode(t, err, codes.Unauthenticated)
	_, err = c.NextIDs(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer wrong-wrong-wrong-wrong"), &v1.NextIDsRequest{Key: "secret"})
	wantCode(t, err, codes.PermissionDenied)
	if _, err := c.NextIDs(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+servertest.KeyToken), &v1.NextIDsRequest{Key: "secret"}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		c.NextIDs(ctx, &v1.NextIDsRequest{Key: "slow"})
	}
	_, err = c.NextIDs(ctx, &v1.NextIDsRequest{Key: "slow"})
	wantCode(t, err, codes.ResourceExhausted)

	rr, err := c.NextRange(ctx, &v1.NextRangeRequest{Key: "order", Count: 10})
	if err != nil || rr.First != 4 || rr.Count != 10 {
		t.Fatalf("range: %v %v", rr, err)
	}
	_, err = c.NextRange(ctx, &v1.NextRangeRequest{Key: "note", Count: 10})
	wantCode(t, err, codes.InvalidArgument)

	d, err := c.Decode(ctx, &v1.DecodeRequest{Id: "10", Key: "order"})
	if err != nil || d.Node != 3 || d.UnixMs != 1_700_000_000_010 {
		t.Fatalf("decode: %v %v", d, err)
	}
	if d, err := c.Decode(ctx, &v1.DecodeRequest{Id: "42", Layout: "plain"}); err != nil || d.Sequence != 42 {
		t.Fatalf("decode layout: %v %v", d, err)
	}
	_, err = c.Decode(ctx, &v1.DecodeRequest{Id: "x", Layout: "plain"})
	wantCode(t, err, codes.InvalidArgument)
	_, err = c.Decode(ctx, &v1.DecodeRequest{Id: "1", Layout: "nope"})
	wantCode(t, err, codes.InvalidArgument)
	_, err = c.Decode(ctx, &v1.DecodeRequest{Id: "1", Layout: "plain", Key: "order"})
	wantCode(t, err, codes.InvalidArgument)

	// Streams: 250 IDs in batches of 100, all distinct.
	st, err := c.StreamIDs(ctx, &v1.StreamIDsRequest{Key: "order", Batch: 100, Total: 250})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	msgs := 0
	for {
		m, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		msgs++
		for _, id := range m.Ids {
			if seen[id] {
				t.Fatalf("duplicate %d", id)
			}
			seen[id] = true
		}
	}
	if msgs != 3 || len(seen) != 250 {
		t.Fatalf("%d messages, %d IDs", msgs, len(seen))
	}

	f.Cs.Get("order").Fail.Store(true)
	var trailer metadata.MD
	_, err = c.NextIDs(ctx, &v1.NextIDsRequest{Key: "order"}, grpc.Trailer(&trailer))
	wantCode(t, err, codes.Unavailable)
	if v := trailer.Get("retry-after"); len(v) != 1 || v[0] != "3" {
		t.Fatalf("retry-after trailer %v", trailer)
	}
	st, _ = c.StreamIDs(ctx, &v1.StreamIDsRequest{Key: "order", Batch: 1, Total: 5})
	_, err = st.Recv()
	wantCode(t, err, codes.Unavailable)
}

func BenchmarkGRPCBatch1000(b *testing.B) {
	f := newFixture(b, nil)
	cc, _ := grpc.NewClient(serve(b, f), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer cc.Close()
	c := v1.NewIDsClient(cc)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.NextIDs(context.Background(), &v1.NextIDsRequest{Key: "order", Count: 1000}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(b.N)*1000/b.Elapsed().Seconds(), "IDs/s")
}

// TestGRPCFixedIDs: a NextIDs request with Fixed gets its numeric IDs as
// 8-byte little-endian integers in IdsLe (and nothing in Ids), the same
// IDs in the same order as a plain request would; text IDs are unchanged.
func TestGRPCFixedIDs(t *testing.T) {
	c, _ := grpcFixture(t)
	ctx := context.Background()
	r, err := c.NextIDs(ctx, &v1.NextIDsRequest{Key: "order", Count: 3, Fixed: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GetIds()) != 0 || len(r.GetIdsLe()) != 24 {
		t.Fatalf("fixed answer: %d in ids, %d bytes in ids_le; want 0 and 24", len(r.GetIds()), len(r.GetIdsLe()))
	}
	ids, err := r.NumericIDs(nil)
	if err != nil || len(ids) != 3 || ids[0] != 1 || ids[2] != 3 {
		t.Fatalf("NumericIDs = %v, %v; want [1 2 3]", ids, err)
	}
	plain, err := c.NextIDs(ctx, &v1.NextIDsRequest{Key: "order", Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	if ids, _ := plain.NumericIDs(nil); len(ids) != 2 || ids[0] != 4 {
		t.Fatalf("plain answer after the fixed one: %v", ids)
	}
	if r, err := c.NextIDs(ctx, &v1.NextIDsRequest{Key: "note", Count: 2, Fixed: true}); err != nil || len(r.GetTextIds()) != 2 || len(r.GetIdsLe()) != 0 {
		t.Fatalf("text key with fixed: %v %v", r, err)
	}
	bad := &v1.NextIDsResponse{IdsLe: make([]byte, 7)}
	if _, err := bad.NumericIDs(nil); err == nil {
		t.Fatal("NumericIDs of 7 bytes succeeded")
	}
}

// gRPC answers carry the same headers as response metadata.
func TestAnswerHeadersGRPC(t *testing.T) {
	c, f := grpcFixture(t)
	ctx := context.Background()
	var md metadata.MD
	if _, err := c.NextRange(ctx, &v1.NextRangeRequest{Key: "order", Count: 5}, grpc.Header(&md)); err != nil {
		t.Fatal(err)
	}
	if got := md.Get("idmint-node"); len(got) != 1 || got[0] != f.S.Env().NodeName {
		t.Errorf("idmint-node = %q, want %q", got, f.S.Env().NodeName)
	}
	if got := md.Get("idmint-strategy"); len(got) != 1 || got[0] != "counter" {
		t.Errorf("idmint-strategy = %q, want counter", got)
	}
	gen := md.Get("idmint-key-generation")
	md = nil
	if _, err := c.NextIDs(ctx, &v1.NextIDsRequest{Key: "order", Count: 2}, grpc.Header(&md)); err != nil {
		t.Fatal(err)
	}
	if got := md.Get("idmint-key-generation"); len(gen) != 1 || len(got) != 1 || got[0] != gen[0] {
		t.Errorf("idmint-key-generation = %q then %q, want one unchanged token", gen, got)
	}
	// A call refused before it may use the key learns nothing.
	for _, key := range []string{"secret", "nosuch"} {
		md = nil
		if _, err := c.NextIDs(ctx, &v1.NextIDsRequest{Key: key, Count: 1}, grpc.Header(&md)); err == nil {
			t.Fatalf("%s without a token: no error", key)
		}
		if len(md.Get("idmint-node")) > 0 || len(md.Get("idmint-key-generation")) > 0 {
			t.Errorf("%s refused, yet the answer says %v", key, md)
		}
	}
}

// 1,000 StreamIDs streams that never read, with no token, pinned 1.58 GB
// of RSS. The server now bounds streams per connection and in all, and
// how much one stream may buffer: the same attack grows the heap by less
// than 100 MB and other clients are still served.
func TestAttackGRPCUnreadStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 1,000 streams")
	}
	f := newFixture(t, nil)
	addr := serve(t, f)
	before := heapInUse()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// 32 connections of 32 streams (the per-connection limit: a 33rd
	// would wait for a free slot in the client).
	const conns, perConn = 32, server.GRPCMaxStreamsPerConn
	var opened atomic.Int64
	var wg sync.WaitGroup
	for c := 0; c < conns; c++ {
		// A small, fixed client window: the client's own buffers stay
		// small, so the growth measured is the server's.
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		cl := v1.NewIDsClient(cc)
		for s := 0; s < perConn; s++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := cl.StreamIDs(ctx, &v1.StreamIDsRequest{Key: "order", Batch: MaxStreamBatch}); err == nil {
					opened.Add(1)
				}
			}()
		}
	}
	reqtest.Within(t, 20*time.Second, "opening the streams", wg.Wait)
	// Let the server fill whatever it will buffer.
	deadline := time.Now().Add(20 * time.Second)
	var grew int64
	for last := int64(-1); time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
		grew = heapInUse() - before
		if grew-last < 1<<20 {
			break
		}
		last = grew
	}
	t.Logf("%d streams opened (%d served at once at most); heap grew %d MiB", opened.Load(), MaxIDStreams, grew>>20)
	if grew > 100<<20 {
		t.Errorf("heap grew by %d MiB with %d unread streams, want < 100 MiB", grew>>20, opened.Load())
	}
	// Others are still served.
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer ccancel()
	if r, err := v1.NewIDsClient(cc).NextIDs(cctx, &v1.NextIDsRequest{Key: "order", Count: 3}); err != nil || len(r.GetIds()) != 3 {
		t.Errorf("another client during the attack: %v %v", r, err)
	}
	// A batch above the stream limit is refused, not buffered.
	st, err := v1.NewIDsClient(cc).StreamIDs(cctx, &v1.StreamIDsRequest{Key: "order", Batch: MaxStreamBatch + 1})
	if err == nil {
		_, err = st.Recv()
	}
	if status.Code(err) != codes.InvalidArgument && status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a stream batch of %d: %v", MaxStreamBatch+1, err)
	}
}

// A refusing key's gRPC answers are Unavailable with a retry-after
// trailer, and they reach the server's list of recent refusals as the
// HTTP routes' do.
func TestRefusalsRecorded(t *testing.T) {
	c, f := grpcFixture(t)
	f.Cs.Get("order").Fail.Store(true)
	var tr metadata.MD
	for range 3 {
		_, err := c.NextIDs(context.Background(), &v1.NextIDsRequest{Key: "order", Count: 2}, grpc.Trailer(&tr))
		wantCode(t, err, codes.Unavailable)
	}
	if got := tr.Get("retry-after"); len(got) != 1 || got[0] != "3" {
		t.Fatalf("retry-after = %q, want the issuer's 3 s", got)
	}
	if rs := f.S.Refusals(); len(rs) != 1 || rs[0].Key != "order" || rs[0].Code != server.CodeUnavailable || rs[0].Count != 1 {
		t.Fatalf("recent refusals = %+v, want one entry for order", rs)
	}
}

// hidden is a counter whose IDs exist to hide how many were issued, as
// order numbers do.
type hidden struct{ *servertest.Counter }

func (hidden) HidesVolume() bool { return true }

// Requests on a key that hides its volume move no metric over gRPC, as
// over HTTP: the per-route counters would otherwise rise by exactly the
// number of order numbers issued.
func TestMetricsHideVolume(t *testing.T) {
	reg, cs := servertest.Registry()
	servertest.Must(reg.Register(server.Strategy{Name: "hidden", New: func(_ context.Context, _ *server.Env, name string, _ server.KeyConfig) (server.Issuer, error) {
		return hidden{&servertest.Counter{Name: name}}, nil
	}}))
	f := servertest.NewReg(t, reg, cs, func(c *server.Config) { c.Keys["orderno"] = server.KeyConfig{Strategy: "hidden"} }, New)
	cc, err := grpc.NewClient(serve(t, f), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := v1.NewIDsClient(cc)
	scrape := func() string {
		t.Helper()
		var keep []string
		for _, l := range strings.Split(reqtest.Do(f.H, reqtest.Req{Target: "/metrics"}).Body.String(), "\n") {
			if strings.HasPrefix(l, "idmint_") { // process and runtime figures move on their own
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	ctx := context.Background()
	before := scrape()
	for range 7 {
		if _, err := c.NextIDs(ctx, &v1.NextIDsRequest{Key: "orderno", Count: 3}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.NextRange(ctx, &v1.NextRangeRequest{Key: "orderno", Count: 5}); err != nil {
			t.Fatal(err)
		}
		st, err := c.StreamIDs(ctx, &v1.StreamIDsRequest{Key: "orderno", Batch: 2, Total: 4})
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := st.Recv(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatal(err)
			}
		}
	}
	if after := scrape(); after != before {
		t.Fatalf("/metrics changed while only a volume-hiding key was used over gRPC:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// The same requests on an ordinary key do count: the scrape can see them.
	if _, err := c.NextIDs(ctx, &v1.NextIDsRequest{Key: "order"}); err != nil {
		t.Fatal(err)
	}
	if scrape() == before {
		t.Fatal("/metrics did not move for an ordinary key either: the test sees nothing")
	}
}

// The health service answers for idmint.v1.IDs by name, as a client that
// checks the service it calls (grpc-health-probe -service) asks.
func TestHealthNamesIDs(t *testing.T) {
	f := newFixture(t, nil)
	cc, err := grpc.NewClient(serve(t, f), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: "idmint.v1.IDs"})
	if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health of idmint.v1.IDs: %v %v", r, err)
	}
}
