// Package grpcapi serves the gRPC service idmint.v1.IDs
// (api/idmintv1/idmint.proto) over a server's keys, a surface beside the
// server's core, with the same tokens, rate limits, count limit, answer
// budget and metrics as HTTP. Errors carry gRPC codes: InvalidArgument
// (bad count, key, layout, ID), NotFound (unknown key),
// Unauthenticated/PermissionDenied, ResourceExhausted (rate limit),
// Unavailable (clock, lease or store refused; a "retry-after" trailer
// gives seconds). cmd/idmint adds it to every server it runs
// (server.Options.Surfaces: grpcapi.New); Serve's gRPC listener serves it.
package grpcapi

import (
	"context"
	"encoding/binary"
	"net/http"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"google.golang.org/protobuf/proto"

	v1 "github.com/idmint/idmint/api/idmintv1"
	"github.com/idmint/idmint/internal/idtext"
	"github.com/idmint/idmint/server"
)

// Limits of the ID streams (the connection limits are the core's: see
// server.GRPCServer).
const (
	// MaxIDStreams is how many StreamIDs streams the whole server serves
	// at once; more are refused with ResourceExhausted.
	MaxIDStreams = 64
	// MaxStreamBatch is the most IDs a streamed message holds.
	MaxStreamBatch = 1000
)

// service is idmint.v1.IDs over one server.
type service struct {
	v1.UnimplementedIDsServer
	s       *server.Server
	env     *server.Env
	node    []string
	streams chan struct{} // StreamIDs streams being served

	ids, rng, decode, stream *server.Route
}

// New builds the gRPC service's surface over s (a server.NewSurface).
func New(s *server.Server) server.Surface {
	env := s.Env()
	return &service{s: s, env: env, node: []string{env.NodeName}, streams: make(chan struct{}, MaxIDStreams),
		ids: s.Route("grpc_ids"), rng: s.Route("grpc_range"), decode: s.Route("grpc_decode"), stream: s.Route("grpc_stream")}
}

// RegisterGRPC adds idmint.v1.IDs to g.
func (g *service) RegisterGRPC(gs *grpc.Server) { v1.RegisterIDsServer(gs, g) }

// Routes adds nothing: the service has no HTTP route.
func (g *service) Routes(*http.ServeMux) {}

// Hot serves nothing over HTTP.
func (g *service) Hot(http.ResponseWriter, *http.Request, string) bool { return false }

// statusOf turns the core's error answer into a gRPC status.
func statusOf(ctx context.Context, e server.ErrorAnswer) error {
	c := codes.Internal
	switch e.Status {
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
	case server.StatusClientClosed:
		c = codes.Canceled
	}
	if e.RetryAfter <= 0 && (c == codes.Unavailable || c == codes.ResourceExhausted) {
		e.RetryAfter = time.Second
	}
	if e.RetryAfter > 0 {
		secs := int64((e.RetryAfter + time.Second - 1) / time.Second)
		grpc.SetTrailer(ctx, metadata.Pairs("retry-after", strconv.FormatInt(secs, 10)))
	}
	msg := idtext.UserText(e.Message)
	if e.Status >= 500 {
		msg = idtext.Scrub(msg) // where the stores live is the log's to say
	}
	if e.Field != "" {
		msg = e.Field + ": " + msg
	}
	return status.Error(c, msg)
}

// refuse is statusOf for an answer the service itself refuses.
func refuse(ctx context.Context, st int, field, msg string) error {
	return statusOf(ctx, server.ErrorAnswer{Status: st, Field: field, Message: msg})
}

// key resolves a request's key: its name, its token, its rate limit. It
// returns the key held (release with k.Release).
func (g *service) key(ctx context.Context, name string) (*server.Key, error) {
	k := g.s.Lookup(name)
	if k == nil {
		if err := server.CheckName(name); err != nil {
			return nil, statusOf(ctx, server.ErrorAnswer{Status: 400, Code: server.CodeBadKey, Field: "key", Message: err.Error()})
		}
		return nil, statusOf(ctx, server.ErrorAnswer{Status: 404, Code: server.CodeUnknownKey, Field: "key", Message: "no key called " + strconv.Quote(name)})
	}
	if k.Protected() {
		h := ""
		if md, ok := metadata.FromIncomingContext(ctx); ok {
			if v := md.Get("authorization"); len(v) > 0 {
				h = v[0]
			}
		}
		if st := k.AuthorizeValue(h); st != 0 {
			return nil, refuse(ctx, st, "authorization", "a valid bearer token for this key is required")
		}
	}
	g.sendHeaders(ctx, k)
	if ok, wait := k.Allow(); !ok {
		return nil, statusOf(ctx, server.ErrorAnswer{Status: 429, Field: "key", Message: "key " + strconv.Quote(name) + " is rate limited", RetryAfter: wait})
	}
	if !k.Hold() {
		return nil, statusOf(ctx, g.s.GoneAnswer(name))
	}
	return k, nil
}

// sendHeaders adds the node's and the key's headers to a call's response
// header metadata. Best effort: a stream whose header went out already
// keeps what it said.
func (g *service) sendHeaders(ctx context.Context, k *server.Key) {
	md := metadata.MD{"idmint-node": g.node}
	strategy, generation, leader := k.Headers()
	md["idmint-strategy"] = strategy
	md["idmint-key-generation"] = generation
	if leader != nil {
		md["idmint-leader"] = leader
	}
	_ = grpc.SetHeader(ctx, md)
}

func count(ctx context.Context, n uint32, field string, max int) (int, error) {
	if n == 0 {
		return 1, nil
	}
	if int64(n) > int64(max) {
		return 0, refuse(ctx, 400, field, strconv.FormatUint(uint64(n), 10)+" is out of range: must be between 1 and "+strconv.Itoa(max))
	}
	return int(n), nil
}

var int64Pool = sync.Pool{New: func() any { b := make([]int64, 0, 64); return &b }}

// fill issues n IDs of k into a response; fixed puts numeric IDs in
// IdsLe (8 little-endian bytes each) instead of Ids.
func (g *service) fill(ctx context.Context, k *server.Key, n int, fixed bool) (*v1.NextIDsResponse, error) {
	resp := &v1.NextIDsResponse{Key: k.Name(), Strategy: k.Strategy()}
	if ints := k.Int64s(); ints != nil {
		if !fixed {
			resp.Ids = make([]int64, n)
			if err := ints.NextInt64s(ctx, resp.Ids); err != nil {
				return nil, statusOf(ctx, g.s.IssuerRefused(ctx, k, err))
			}
		} else {
			ip := int64Pool.Get().(*[]int64) // the IDs only pass through: reuse the slice
			if cap(*ip) < n {
				*ip = make([]int64, n)
			}
			*ip = (*ip)[:n]
			err := ints.NextInt64s(ctx, *ip)
			if err == nil {
				b := make([]byte, 8*n)
				for i, id := range *ip {
					binary.LittleEndian.PutUint64(b[8*i:], uint64(id))
				}
				resp.IdsLe = b
			}
			int64Pool.Put(ip)
			if err != nil {
				return nil, statusOf(ctx, g.s.IssuerRefused(ctx, k, err))
			}
		}
	} else {
		resp.TextIds = make([]string, n)
		if err := k.Strings().NextStrings(ctx, resp.TextIds); err != nil {
			return nil, statusOf(ctx, g.s.IssuerRefused(ctx, k, err))
		}
	}
	k.Issued(n)
	return resp, nil
}

// httpStatus is the HTTP status a gRPC answer counts as in the metrics.
func httpStatus(err error) int {
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

// NextIDs answers a batch of IDs.
func (g *service) NextIDs(ctx context.Context, r *v1.NextIDsRequest) (resp *v1.NextIDsResponse, err error) {
	start := g.env.Clock.Mono()
	var k *server.Key
	defer func() { g.s.ObserveKey(g.ids, r.GetKey(), k, httpStatus(err), g.env.Clock.Mono()-start) }()
	n, err := count(ctx, r.GetCount(), "count", g.env.Config.MaxCount)
	if err != nil {
		return nil, err
	}
	held, ok := g.s.HoldAnswer(ctx, r.GetKey(), n)
	if !ok {
		return nil, statusOf(ctx, g.s.BudgetRefusal())
	}
	k, err = g.key(ctx, r.GetKey())
	if err != nil {
		g.s.ReleaseAnswer(held)
		return nil, err
	}
	resp, err = g.fill(ctx, k, n, r.GetFixed())
	k.Release()
	g.queued(ctx, k, n, held, resp)
	return resp, err
}

// queued settles the reservation of an answer (nil: none was made) at its
// encoded size and hands it to the connection that will write it.
func (g *service) queued(ctx context.Context, k *server.Key, n int, held int64, resp *v1.NextIDsResponse) {
	if held == 0 {
		return
	}
	if resp == nil {
		g.s.ReleaseAnswer(held)
		return
	}
	size := int64(proto.Size(resp)) + 5 // the gRPC message header
	g.s.OweAnswer(ctx, k, n, held, size, resp.TextIds != nil)
}

// NextRange answers a contiguous range of IDs.
func (g *service) NextRange(ctx context.Context, r *v1.NextRangeRequest) (resp *v1.NextRangeResponse, err error) {
	start := g.env.Clock.Mono()
	var k *server.Key
	defer func() { g.s.ObserveKey(g.rng, r.GetKey(), k, httpStatus(err), g.env.Clock.Mono()-start) }()
	n, err := count(ctx, r.GetCount(), "count", g.s.RangeMax())
	if err != nil {
		return nil, err
	}
	k, err = g.key(ctx, r.GetKey())
	if err != nil {
		return nil, err
	}
	defer k.Release()
	if k.Ranger() == nil {
		return nil, refuse(ctx, 400, "key", "key "+strconv.Quote(k.Name())+" does not hand out contiguous ranges")
	}
	first, got, err := k.Ranger().NextRange(ctx, int64(n))
	if err != nil {
		return nil, statusOf(ctx, g.s.IssuerRefused(ctx, k, err))
	}
	k.Issued(int(got))
	return &v1.NextRangeResponse{Key: k.Name(), First: first, Count: got}, nil
}

// Decode reads an ID by a layout or by a key's decoder.
func (g *service) Decode(ctx context.Context, r *v1.DecodeRequest) (resp *v1.DecodeResponse, err error) {
	start := g.env.Clock.Mono()
	defer func() { g.decode.Observe(httpStatus(err), g.env.Clock.Mono()-start) }()
	var dec func(string) (server.Decoded, error)
	switch {
	case r.GetLayout() != "" && r.GetKey() != "":
		return nil, refuse(ctx, 400, "layout", "give layout or key, not both")
	case r.GetLayout() != "":
		l, err := g.env.LookupLayout(r.GetLayout())
		if err != nil {
			return nil, refuse(ctx, 400, "layout", err.Error())
		}
		dec = l.Decode
	default:
		name := r.GetKey()
		if name == "" {
			name = g.env.Config.LeafSnowflakeKey
		}
		k, err := g.key(ctx, name)
		if err != nil {
			return nil, err
		}
		d := k.Decoder()
		k.Release()
		if d == nil {
			return nil, refuse(ctx, 400, "key", "key "+strconv.Quote(name)+" has no decoder; give a layout")
		}
		dec = d.Decode
	}
	p, err := dec(r.GetId())
	if err != nil {
		return nil, refuse(ctx, 400, "id", err.Error())
	}
	out := &v1.DecodeResponse{Layout: p.Layout, Node: p.Node, Sequence: p.Sequence, Extra: p.Extra}
	if !p.Time.IsZero() {
		out.UnixMs = p.Time.UnixMilli()
	}
	return out, nil
}

// StreamIDs streams batches of IDs until Total (0: until the client goes).
func (g *service) StreamIDs(r *v1.StreamIDsRequest, stream grpc.ServerStreamingServer[v1.NextIDsResponse]) (err error) {
	ctx := stream.Context()
	start := g.env.Clock.Mono()
	defer func() { g.s.ObserveKey(g.stream, r.GetKey(), nil, httpStatus(err), g.env.Clock.Mono()-start) }()
	batch, err := count(ctx, r.GetBatch(), "batch", g.env.Config.MaxCount)
	if err != nil {
		return err
	}
	if batch > MaxStreamBatch {
		return refuse(ctx, 400, "batch", strconv.Itoa(batch)+" is out of range: a streamed message holds at most "+strconv.Itoa(MaxStreamBatch)+" IDs")
	}
	select {
	case g.streams <- struct{}{}:
	default:
		return refuse(ctx, 429, "stream", "the server serves at most "+strconv.Itoa(MaxIDStreams)+" ID streams at once; use NextIDs or retry later")
	}
	defer func() { <-g.streams }()
	sent := uint64(0)
	for r.GetTotal() == 0 || sent < r.GetTotal() {
		n := batch
		if t := r.GetTotal(); t != 0 && t-sent < uint64(n) {
			n = int(t - sent)
		}
		// The key is looked up per batch, so a stream on a deleted key
		// ends, and the rate limit applies per batch.
		held, ok := g.s.HoldAnswer(ctx, r.GetKey(), n)
		if !ok {
			return statusOf(ctx, g.s.BudgetRefusal())
		}
		k, err := g.key(ctx, r.GetKey())
		if err != nil {
			g.s.ReleaseAnswer(held)
			return err
		}
		resp, err := g.fill(ctx, k, n, false)
		k.Release()
		g.queued(ctx, k, n, held, resp)
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
