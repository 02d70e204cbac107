package server

import (
	"context"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Shutdown runs in phases (Serve, after its context ends):
//
//  1. draining, for Config.DrainPeriod: /readyz answers 503 with a body
//     saying "draining", every HTTP answer carries Connection: close (an
//     HTTP/2 connection gets a GOAWAY), and requests are served as before,
//     so a load balancer or Kubernetes that polls /readyz moves new clients
//     to other nodes before this one stops accepting. SkipDrain ends it
//     early (cmd/idmint calls it on a second SIGTERM or SIGINT).
//  2. stop accepting: the listeners close and the gRPC ID streams end
//     with Unavailable (a stream without a total runs until its client
//     leaves, and would hold the stop until shutdown_timeout).
//  3. in-flight: requests already running finish, up to ShutdownTimeout.
//  4. close: issuers and shared resources close (leases are released).
//
// Each phase is logged with the time since the shutdown began.

// Draining reports whether the server has begun shutting down: from the
// start of the drain (phase 1) until it exits. A health service answers
// NOT_SERVING while it does.
func (s *Server) Draining() bool { return s.draining.Load() }

// SkipDrain ends the drain period at once (or skips it if it has not
// begun); the shutdown goes on to stop accepting. Safe to call more than
// once and from any goroutine.
func (s *Server) SkipDrain() { s.skipDrain() }

// drain marks the server draining and serves on for the drain period, or
// until SkipDrain. begun is the Mono time the shutdown began.
func (s *Server) drain(begun time.Duration) {
	s.draining.Store(true)
	d := s.cfg.Drain()
	if d <= 0 {
		s.log.Info("shutdown: no drain period (drain_period is 0): stopping at once")
		return
	}
	s.log.Info("shutdown: draining: /readyz answers 503, requests are still served", "drain_period", d)
	if s.clk.Sleep(s.skipCtx, d) != nil {
		s.log.Info("shutdown: drain cut short by a second signal", "after", s.clk.Mono()-begun)
	}
}

// drainAware adds Connection: close to every answer while the server
// drains, so keep-alive clients open their next connection elsewhere
// (net/http closes an HTTP/1.1 connection after such an answer, and sends
// an HTTP/2 client a GOAWAY: golang.org/x/net/http2 server.go,
// writeChunk).
func (s *Server) drainAware(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			w.Header()["Connection"] = connClose
		}
		h.ServeHTTP(w, r)
	})
}

var connClose = []string{"close"}

// writeDraining answers /readyz while the server drains.
func (s *Server) writeDraining(w http.ResponseWriter) {
	h := w.Header()
	h["Content-Type"] = jsonType
	h.Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	w.Write([]byte(`{"status":"draining","error":{"code":"unavailable","message":"draining: this node is shutting down; it serves the requests it gets until it stops accepting, but new clients belong on another node"}}` + "\n"))
}

// endAtStop is a stream interceptor that ends a stream when Serve stops
// accepting (phase 2): its context ends and its sends fail, and the client
// gets Unavailable, so it reconnects, to another node.
func (s *Server) endAtStop(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	stop := context.AfterFunc(s.stopCtx, cancel)
	defer stop()
	err := h(srv, stoppable{ServerStream: ss, ctx: ctx})
	if err != nil && s.stopCtx.Err() != nil && ss.Context().Err() == nil {
		return status.Error(codes.Unavailable, "the server is shutting down: reconnect (to another node)")
	}
	return err
}

// stoppable is a stream whose context also ends at stop.
type stoppable struct {
	grpc.ServerStream
	ctx context.Context
}

func (s stoppable) Context() context.Context { return s.ctx }

func (s stoppable) SendMsg(m any) error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	return s.ServerStream.SendMsg(m)
}
