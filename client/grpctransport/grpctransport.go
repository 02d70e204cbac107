// Package grpctransport lets package client reach idmint servers over
// gRPC: endpoints grpc://host:port (plaintext unless client.Options.TLS
// is set) and grpcs://host:port (TLS). The client core speaks HTTP alone,
// so a program that does not import this package does not link gRPC.
//
//	c, err := client.New([]string{"grpc://id1:9090", "grpc://id2:9090"}, client.Options{
//		Dialers: grpctransport.Dialers(grpctransport.Settings{}),
//	})
//
// The client fails over, hedges, breaks circuits and prefetches over gRPC
// exactly as over HTTP; errors come back as *client.Error with the gRPC
// code mapped to its HTTP equivalent (InvalidArgument 400, NotFound 404
// unknown_key, Unauthenticated 401, PermissionDenied 403 are permanent;
// ResourceExhausted 429 and the rest are retryable), and a "retry-after"
// trailer sets Retry-After.
package grpctransport

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	v1 "github.com/idmint/idmint/api/idmintv1"
	"github.com/idmint/idmint/client"
	"github.com/idmint/idmint/client/internal/answer"
)

// Settings configures the gRPC transport. The zero value is the default.
type Settings struct {
	// DialOptions are added to every connection's options, after the
	// transport credentials (which they may replace).
	DialOptions []grpc.DialOption
}

// Dialers returns the client.Options.Dialers of grpc:// and grpcs://
// endpoints with s.
func Dialers(s Settings) map[string]client.Dialer {
	return map[string]client.Dialer{"grpc": s.dial, "grpcs": s.dial}
}

// dial builds the transport of one grpc:// or grpcs:// endpoint. It does
// not connect: grpc.NewClient connects on the first call.
func (s Settings) dial(t client.Target) (client.Transport, error) {
	u := t.URL
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("client: endpoint %q: a gRPC endpoint has no path", t.Endpoint)
	}
	creds := insecure.NewCredentials()
	if u.Scheme == "grpcs" || t.TLS != nil {
		tc := t.TLS
		if tc == nil {
			tc = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		creds = credentials.NewTLS(tc)
	}
	dial := append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, s.DialOptions...)
	cc, err := grpc.NewClient(u.Host, dial...)
	if err != nil {
		return nil, fmt.Errorf("client: endpoint %q: %w", t.Endpoint, err)
	}
	return &transport{cc: cc, c: v1.NewIDsClient(cc)}, nil
}

type transport struct {
	cc *grpc.ClientConn
	c  v1.IDsClient
}

func (g *transport) Close() { g.cc.Close() }

func metaOf(md metadata.MD) client.Meta {
	first := func(k string) string {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	return client.Meta{Node: first("idmint-node"), Strategy: first("idmint-strategy"), Generation: first("idmint-key-generation"), Leader: first("idmint-leader")}
}

func (g *transport) ctx(ctx context.Context, token string) context.Context {
	if token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// err classifies a gRPC failure as the HTTP transport classifies an HTTP
// error answer.
func (g *transport) err(err error, trailer metadata.MD) *client.Error {
	st, _ := status.FromError(err) // not a status: codes.Unknown with err's text
	e := &client.Error{Endpoint: g.cc.Target(), Message: st.Message(), Code: st.Code().String(), Err: err}
	if v := trailer.Get("retry-after"); len(v) > 0 {
		e.RetryAfter = answer.RetryAfter(v[0], time.Now)
	}
	switch st.Code() {
	case codes.InvalidArgument:
		e.Status, e.Code = http.StatusBadRequest, "invalid_argument"
		if f, _, ok := strings.Cut(e.Message, ": "); ok && !strings.Contains(f, " ") {
			e.Field = f
		}
	case codes.NotFound:
		e.Status, e.Code = http.StatusNotFound, "unknown_key"
	case codes.Unauthenticated:
		e.Status, e.Code = http.StatusUnauthorized, "unauthorized"
	case codes.PermissionDenied:
		e.Status, e.Code = http.StatusForbidden, "forbidden"
	case codes.ResourceExhausted:
		e.Status, e.Retryable = http.StatusTooManyRequests, true
	default:
		// Unavailable, DeadlineExceeded, Internal, Unknown, Canceled...
		e.Status, e.Retryable = http.StatusServiceUnavailable, true
	}
	return e
}

func (g *transport) Range(ctx context.Context, key, token string, n int) (int64, int64, client.Meta, error) {
	var hd, tr metadata.MD
	r, err := g.c.NextRange(g.ctx(ctx, token), &v1.NextRangeRequest{Key: key, Count: uint32(n)}, grpc.Header(&hd), grpc.Trailer(&tr))
	m := metaOf(hd)
	if err != nil {
		return 0, 0, m, g.err(err, tr)
	}
	if r.GetKey() != key || r.GetCount() < 1 || r.GetCount() > int64(n) || r.GetFirst() > r.GetFirst()+r.GetCount()-1 {
		return 0, 0, m, &client.Error{Endpoint: g.cc.Target(), Message: fmt.Sprintf("range answer: key %q, first %d, count %d for %d asked of key %q", r.GetKey(), r.GetFirst(), r.GetCount(), n, key), Retryable: true, Err: answer.ErrMalformed}
	}
	return r.GetFirst(), r.GetCount(), m, nil
}

func (g *transport) IDs(ctx context.Context, key, token string, n int) ([]int64, bool, client.Meta, error) {
	var hd, tr metadata.MD
	// Fixed: the IDs come as 8-byte integers, copied out instead of one
	// varint decode each; a server that predates it answers Ids.
	r, err := g.c.NextIDs(g.ctx(ctx, token), &v1.NextIDsRequest{Key: key, Count: uint32(n), Fixed: true}, grpc.Header(&hd), grpc.Trailer(&tr))
	m := metaOf(hd)
	if err != nil {
		return nil, false, m, g.err(err, tr)
	}
	if r.GetStrategy() != "" {
		m.Strategy = r.GetStrategy()
	}
	ids, derr := r.NumericIDs(nil)
	if len(r.GetTextIds()) == n && len(ids) == 0 && r.GetStrategy() != "" {
		return nil, true, m, nil
	}
	if derr != nil || r.GetKey() != key || r.GetStrategy() == "" || len(ids) != n {
		return nil, false, m, &client.Error{Endpoint: g.cc.Target(), Message: fmt.Sprintf("ids answer: key %q, strategy %q, %d IDs for %d asked of key %q", r.GetKey(), r.GetStrategy(), len(ids), n, key), Retryable: true, Err: answer.ErrMalformed}
	}
	return ids, false, m, nil
}
