package server

import (
	"runtime"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
)

// GRPCServer returns a *grpc.Server serving the gRPC services of
// Options.Surfaces (idmint.v1.IDs: server/grpcapi), the standard health
// service grpc.health.v1.Health (what /readyz says), server reflection when
// grpc_reflection is on, and the server's connection limits.
//
// Limits against clients that open streams and never read them (1,000
// unread streams used to pin 1.58 GB): at most GRPCMaxStreamsPerConn
// concurrent streams per connection, idle connections closed after
// GRPCMaxConnIdle, keepalive pings answered no more often than every 10 s
// (a client pinging faster is disconnected), a handshake finished within
// read_header_timeout. A stream that is never read holds at most gRPC's
// per-stream write quota and flow-control window.
//
// A call's header metadata (before any token is checked) is at most
// GRPCMaxHeaderListSize: grpc-go's own limit is 16 MiB per header block,
// and 20 connections each sending 7 MiB of an unfinished block took an
// idmint serve from 30 to 198 MB RSS (31 MB with the limit). A block past
// the limit closes the connection.
func (s *Server) GRPCServer(opts ...grpc.ServerOption) *grpc.Server {
	base := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(int(s.cfg.MaxBodyBytes)),
		grpc.MaxHeaderListSize(GRPCMaxHeaderListSize),
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
		// Streams end when Serve stops accepting (drain.go).
		grpc.ChainStreamInterceptor(s.endAtStop),
	}
	g := grpc.NewServer(append(base, opts...)...)
	for _, sf := range s.surfaces {
		if svc, ok := sf.(GRPCService); ok {
			svc.RegisterGRPC(g)
		}
	}
	s.registerHealth(g)
	if s.cfg.GRPCReflection {
		reflection.Register(g)
	}
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
	// GRPCMaxHeaderListSize bounds a call's header metadata, as the HTTP
	// listener's 16 KiB bounds a request's headers: room for a bearer
	// token of several kilobytes and gRPC's own headers.
	GRPCMaxHeaderListSize = 16 << 10
	GRPCMaxConnIdle       = 5 * time.Minute
	GRPCMaxConns          = 1024 // connections Serve accepts at once
	AdminMaxConns         = 256  // connections the admin listener holds at once
)
