package server

import (
	"context"
	"encoding/binary"
	"net/http"
	"runtime"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"google.golang.org/protobuf/proto"

	v1 "github.com/idmint/idmint/api/idmintv1"
)

// GRPCServer returns a *grpc.Server serving the idmint.v1.IDs service over
// this server's keys, with the same tokens, rate limits, count limit and
// metrics as HTTP. Errors carry gRPC codes: InvalidArgument (bad count, key,
// layout, ID), NotFound (unknown key), Unauthenticated/PermissionDenied,
// ResourceExhausted (rate limit), Unavailable (clock, lease or store
// refused; a "retry-after" trailer gives seconds).
//
// Limits against clients that open streams and never read them (1,000
// unread StreamIDs streams used to pin 1.58 GB): at most
// GRPCMaxStreamsPerConn concurrent streams per connection, at most
// GRPCMaxIDStreams StreamIDs streams in the whole server (more are
// refused with ResourceExhausted), at most GRPCMaxStreamBatch IDs per
// streamed message, idle connections closed after GRPCMaxConnIdle,
// keepalive pings answered no more often than every 10 s (a client
// pinging faster is disconnected). A stream that is never read holds at
// most gRPC's per-stream write quota and flow-control window.
func (s *Server) GRPCServer(opts ...grpc.ServerOption) *grpc.Server {
	base := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(int(s.cfg.MaxBodyBytes)),
		grpc.MaxConcurrentStreams(GRPCMaxStreamsPerConn),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: GRPCMaxConnIdle, Time: time.Minute, Timeout: 20 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		// A connection that does not finish the HTTP/2 handshake within
		// read_header_timeout is dropped (grpc-go waits 120 s): 1,030
		// half-open connections held every slot for two minutes.
		grpc.ConnectionTimeout(s.handshakeTimeout()),
		// Calls run on a pool of long-lived goroutines instead of one new
		// goroutine each, whose stack grew anew on every call (stack
		// copying was a tenth of the server's CPU at 1,000-ID batches).
		// A call finding no idle worker still gets a goroutine of its
		// own, so the pool is sized for typical concurrency, not cores.
		grpc.NumStreamWorkers(uint32(16 * runtime.GOMAXPROCS(0))),
	}
	g := grpc.NewServer(append(base, opts...)...)
	v1.RegisterIDsServer(g, &grpcIDs{s: s})
	return g
}

// handshakeTimeout is how long a new gRPC connection may take to finish
// its handshake: the config's read_header_timeout (5 s by default).
func (s *Server) handshakeTimeout() time.Duration {
	if d := time.Duration(s.cfg.ReadHeaderTimeout); d > 0 {
		return d
	}
	return 5 * time.Second
}

// gRPC limits (see GRPCServer).
const (
	GRPCMaxStreamsPerConn = 32
	GRPCMaxIDStreams      = 64
	GRPCMaxStreamBatch    = 1000
	GRPCMaxConnIdle       = 5 * time.Minute
	GRPCMaxConns          = 1024 // connections Serve accepts at once
	AdminMaxConns         = 256  // connections the admin listener holds at once
)

type grpcIDs struct {
	v1.UnimplementedIDsServer
	s *Server
}

// statusOf turns an HTTP-style error answer into a gRPC status.
func statusOf(ctx context.Context, e apiError) error {
	c := codes.Internal
	switch e.status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		c = codes.InvalidArgument
	case http.StatusNotFound:
		c = codes.NotFound
	case http.StatusUnauthorized:
		c = codes.Unauthenticated
	case http.StatusForbidden:
		c = codes.PermissionDenied
	case http.StatusTooManyRequests:
		c = codes.ResourceExhausted
	case http.StatusServiceUnavailable:
		c = codes.Unavailable
	}
	if e.retryAfter <= 0 && (c == codes.Unavailable || c == codes.ResourceExhausted) {
		e.retryAfter = time.Second
	}
	if e.retryAfter > 0 {
		secs := int64((e.retryAfter + time.Second - 1) / time.Second)
		grpc.SetTrailer(ctx, metadata.Pairs("retry-after", strconv.FormatInt(secs, 10)))
	}
	msg := e.msg
	if e.field != "" {
		msg = e.field + ": " + msg
	}
	return status.Error(c, msg)
}

// grpcKey is acquire for gRPC: it returns the key read-locked.
func (s *Server) grpcKey(ctx context.Context, name string) (*Key, error) {
	k := s.lookup(name)
	if k == nil {
		if err := CheckName(name); err != nil {
			return nil, statusOf(ctx, apiError{status: 400, code: CodeBadKey, field: "key", msg: err.Error()})
		}
		return nil, statusOf(ctx, apiError{status: 404, code: CodeUnknownKey, field: "key", msg: "no key called " + strconv.Quote(name)})
	}
	if len(k.tokens) > 0 {
		h := ""
		if md, ok := metadata.FromIncomingContext(ctx); ok {
			if v := md.Get("authorization"); len(v) > 0 {
				h = v[0]
			}
		}
		if st := authorizeValue(h, k.tokens); st != 0 {
			return nil, statusOf(ctx, apiError{status: st, field: "authorization", msg: "a valid bearer token for this key is required"})
		}
	}
	s.sendGRPC(ctx, k)
	if k.limiter != nil {
		if ok, wait := k.limiter.allow(); !ok {
			return nil, statusOf(ctx, apiError{status: 429, field: "key", msg: "key " + strconv.Quote(name) + " is rate limited", retryAfter: wait})
		}
	}
	k.mu.RLock()
	if k.gone {
		k.mu.RUnlock()
		return nil, statusOf(ctx, s.goneError(name))
	}
	return k, nil
}

func (s *Server) grpcCount(ctx context.Context, n uint32, field string, max int) (int, error) {
	if n == 0 {
		return 1, nil
	}
	if int64(n) > int64(max) {
		return 0, statusOf(ctx, apiError{status: 400, field: field, msg: strconv.FormatUint(uint64(n), 10) + " is out of range: must be between 1 and " + strconv.Itoa(max)})
	}
	return int(n), nil
}

// fill issues n IDs of k into a response; fixed puts numeric IDs in
// IdsLe (8 little-endian bytes each) instead of Ids.
func (s *Server) fill(ctx context.Context, k *Key, n int, fixed bool) (*v1.NextIDsResponse, error) {
	resp := &v1.NextIDsResponse{Key: k.name, Strategy: k.cfg.Strategy}
	if k.ints != nil {
		if !fixed {
			resp.Ids = make([]int64, n)
			if err := k.ints.NextInt64s(ctx, resp.Ids); err != nil {
				return nil, statusOf(ctx, s.issuerRefused(k, err))
			}
		} else {
			ip := getInts(n) // the IDs only pass through: reuse the slice
			err := k.ints.NextInt64s(ctx, *ip)
			if err == nil {
				b := make([]byte, 8*n)
				for i, id := range *ip {
					binary.LittleEndian.PutUint64(b[8*i:], uint64(id))
				}
				resp.IdsLe = b
			}
			int64Pool.Put(ip)
			if err != nil {
				return nil, statusOf(ctx, s.issuerRefused(k, err))
			}
		}
	} else {
		resp.TextIds = make([]string, n)
		if err := k.strs.NextStrings(ctx, resp.TextIds); err != nil {
			return nil, statusOf(ctx, s.issuerRefused(k, err))
		}
	}
	k.issued.Add(float64(n))
	return resp, nil
}

func grpcStatus(err error) int {
	switch status.Code(err) {
	case codes.OK:
		return 200
	case codes.InvalidArgument:
		return 400
	case codes.NotFound:
		return 404
	case codes.Unauthenticated:
		return 401
	case codes.PermissionDenied:
		return 403
	case codes.ResourceExhausted:
		return 429
	case codes.Canceled:
		return 499
	}
	return 503
}

// grpcCountAndKey checks a request's count and key; on success the key is
// read-locked and the caller unlocks it.
func (s *Server) grpcCountAndKey(ctx context.Context, count uint32, name string, max int) (int, *Key, error) {
	n, err := s.grpcCount(ctx, count, "count", max)
	if err != nil {
		return 0, nil, err
	}
	k, err := s.grpcKey(ctx, name)
	return n, k, err
}

func (g *grpcIDs) NextIDs(ctx context.Context, r *v1.NextIDsRequest) (resp *v1.NextIDsResponse, err error) {
	s := g.s
	start := s.clk.Mono()
	var k *Key
	defer func() { s.observeKey(routeGRPCIDs, r.GetKey(), k, grpcStatus(err), s.clk.Mono()-start) }()
	n, err := s.grpcCount(ctx, r.GetCount(), "count", s.cfg.MaxCount)
	if err != nil {
		return nil, err
	}
	held, ok := s.holdAnswer(ctx, r.GetKey(), n)
	if !ok {
		return nil, statusOf(ctx, s.budgetRefusal())
	}
	k, err = s.grpcKey(ctx, r.GetKey())
	if err != nil {
		s.budget.release(held)
		return nil, err
	}
	resp, err = s.fill(ctx, k, n, r.GetFixed())
	k.mu.RUnlock()
	s.queued(ctx, k, n, held, resp)
	return resp, err
}

// queued settles the reservation of a gRPC answer (nil: none was made)
// at its encoded size and hands it to the connection that will write it.
func (s *Server) queued(ctx context.Context, k *Key, n int, held int64, resp *v1.NextIDsResponse) {
	if held == 0 {
		return
	}
	if resp == nil {
		s.budget.release(held)
		return
	}
	size := int64(proto.Size(resp)) + 5 // the gRPC message header
	if resp.TextIds != nil {
		k.noteAnswer(n, 2*size) // the strings, besides their encoding
	}
	s.owe(ctx, s.settle(held, size))
}

func (g *grpcIDs) NextRange(ctx context.Context, r *v1.NextRangeRequest) (resp *v1.NextRangeResponse, err error) {
	s := g.s
	start := s.clk.Mono()
	var k *Key
	defer func() { s.observeKey(routeGRPCRange, r.GetKey(), k, grpcStatus(err), s.clk.Mono()-start) }()
	n, k, err := s.grpcCountAndKey(ctx, r.GetCount(), r.GetKey(), s.rangeMax())
	if err != nil {
		return nil, err
	}
	defer k.mu.RUnlock()
	if k.ranger == nil {
		return nil, statusOf(ctx, apiError{status: 400, field: "key", msg: "key " + strconv.Quote(k.name) + " does not hand out contiguous ranges"})
	}
	first, got, err := k.ranger.NextRange(ctx, int64(n))
	if err != nil {
		return nil, statusOf(ctx, s.issuerRefused(k, err))
	}
	k.issued.Add(float64(got))
	return &v1.NextRangeResponse{Key: k.name, First: first, Count: got}, nil
}

func (g *grpcIDs) Decode(ctx context.Context, r *v1.DecodeRequest) (resp *v1.DecodeResponse, err error) {
	s := g.s
	start := s.clk.Mono()
	defer func() { s.metrics.observe(routeGRPCDecode, grpcStatus(err), s.clk.Mono()-start) }()
	var dec func(string) (Decoded, error)
	switch {
	case r.GetLayout() != "" && r.GetKey() != "":
		return nil, statusOf(ctx, apiError{status: 400, field: "layout", msg: "give layout or key, not both"})
	case r.GetLayout() != "":
		l, err := lookupLayout(s.reg, s.cfg, r.GetLayout())
		if err != nil {
			return nil, statusOf(ctx, apiError{status: 400, field: "layout", msg: err.Error()})
		}
		dec = l.Decode
	default:
		name := r.GetKey()
		if name == "" {
			name = s.cfg.LeafSnowflakeKey
		}
		k, err := s.grpcKey(ctx, name)
		if err != nil {
			return nil, err
		}
		d := k.dec
		k.mu.RUnlock()
		if d == nil {
			return nil, statusOf(ctx, apiError{status: 400, field: "key", msg: "key " + strconv.Quote(name) + " has no decoder; give a layout"})
		}
		dec = d.Decode
	}
	p, err := dec(r.GetId())
	if err != nil {
		return nil, statusOf(ctx, apiError{status: 400, field: "id", msg: err.Error()})
	}
	out := &v1.DecodeResponse{Layout: p.Layout, Node: p.Node, Sequence: p.Sequence, Extra: p.Extra}
	if !p.Time.IsZero() {
		out.UnixMs = p.Time.UnixMilli()
	}
	return out, nil
}

func (g *grpcIDs) StreamIDs(r *v1.StreamIDsRequest, stream grpc.ServerStreamingServer[v1.NextIDsResponse]) (err error) {
	s := g.s
	ctx := stream.Context()
	start := s.clk.Mono()
	defer func() { s.observeKey(routeGRPCStream, r.GetKey(), nil, grpcStatus(err), s.clk.Mono()-start) }()
	batch, err := s.grpcCount(ctx, r.GetBatch(), "batch", s.cfg.MaxCount)
	if err != nil {
		return err
	}
	if batch > GRPCMaxStreamBatch {
		return statusOf(ctx, apiError{status: 400, field: "batch", msg: strconv.Itoa(batch) + " is out of range: a streamed message holds at most " + strconv.Itoa(GRPCMaxStreamBatch) + " IDs"})
	}
	if !s.idStreams.TryAcquire() {
		return statusOf(ctx, apiError{status: 429, field: "stream", msg: "the server serves at most " + strconv.Itoa(GRPCMaxIDStreams) + " ID streams at once; use NextIDs or retry later"})
	}
	defer s.idStreams.Release()
	sent := uint64(0)
	for r.GetTotal() == 0 || sent < r.GetTotal() {
		n := batch
		if t := r.GetTotal(); t != 0 && t-sent < uint64(n) {
			n = int(t - sent)
		}
		// The key is looked up per batch, so a stream on a deleted key
		// ends, and the rate limit applies per batch.
		held, ok := s.holdAnswer(ctx, r.GetKey(), n)
		if !ok {
			return statusOf(ctx, s.budgetRefusal())
		}
		k, err := s.grpcKey(ctx, r.GetKey())
		if err != nil {
			s.budget.release(held)
			return err
		}
		resp, err := s.fill(ctx, k, n, false)
		k.mu.RUnlock()
		s.queued(ctx, k, n, held, resp)
		if err != nil {
			return err
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
		sent += uint64(n)
	}
	return nil
}
