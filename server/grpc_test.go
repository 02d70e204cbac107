package server

import (
	"context"
	"io"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	v1 "github.com/idmint/idmint/api/idmintv1"
)

func grpcFixture(t *testing.T) (v1.IDsClient, *fixture) {
	t.Helper()
	f := newFixture(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := f.s.GRPCServer()
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
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
	if _, err := c.NextIDs(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+keyTok), &v1.NextIDsRequest{Key: "secret"}); err != nil {
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

	f.cs.get("order").fail.Store(true)
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
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	gs := f.s.GRPCServer()
	go gs.Serve(ln)
	defer gs.Stop()
	cc, _ := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
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
