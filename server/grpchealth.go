package server

import (
	"context"
	"sort"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// grpcHealth is the standard health service, grpc.health.v1.Health, as
// grpc-health-probe, Kubernetes' gRPC probes and load balancers ask it. It
// answers what /readyz answers, at the moment it is asked: SERVING when
// every key and shared resource is ready, NOT_SERVING otherwise (a store
// out of reach, a lost lease, a node that is shutting down). The service
// name "" is the whole server; each gRPC service the server registers
// answers the same, since they share the keys. It needs no token: it says
// only ready or not, never why (the log says why).
type grpcHealth struct {
	healthpb.UnimplementedHealthServer
	s        *Server
	services map[string]bool
}

// healthCheckTimeout bounds one readiness check, as /readyz's.
const healthCheckTimeout = 2 * time.Second

// healthWatchEvery is how often Watch looks at readiness again.
const healthWatchEvery = time.Second

func (h *grpcHealth) status(ctx context.Context) healthpb.HealthCheckResponse_ServingStatus {
	ctx, cancel := context.WithTimeout(ctx, healthCheckTimeout)
	defer cancel()
	if h.s.readyErr(ctx) != nil {
		return healthpb.HealthCheckResponse_NOT_SERVING
	}
	return healthpb.HealthCheckResponse_SERVING
}

func (h *grpcHealth) known(service string) error {
	if !h.services[service] {
		return status.Errorf(codes.NotFound, "service %q: not served here (ask for \"\", the whole server, or one of %v)", service, h.names())
	}
	return nil
}

func (h *grpcHealth) names() []string {
	out := make([]string, 0, len(h.services))
	for n := range h.services {
		if n != "" {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func (h *grpcHealth) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if err := h.known(req.GetService()); err != nil {
		return nil, err
	}
	return &healthpb.HealthCheckResponse{Status: h.status(ctx)}, nil
}

func (h *grpcHealth) List(ctx context.Context, _ *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	st := h.status(ctx)
	out := &healthpb.HealthListResponse{Statuses: map[string]*healthpb.HealthCheckResponse{}}
	for n := range h.services {
		out.Statuses[n] = &healthpb.HealthCheckResponse{Status: st}
	}
	return out, nil
}

// Watch sends the status now and again each time it changes, until the
// client goes away or the server stops (grpc.Server.Stop ends the stream).
func (h *grpcHealth) Watch(req *healthpb.HealthCheckRequest, stream grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	if err := h.known(req.GetService()); err != nil {
		return err
	}
	ctx := stream.Context()
	last := healthpb.HealthCheckResponse_UNKNOWN
	for {
		if st := h.status(ctx); st != last {
			if err := stream.Send(&healthpb.HealthCheckResponse{Status: st}); err != nil {
				return err
			}
			last = st
		}
		if err := h.s.clk.Sleep(ctx, healthWatchEvery); err != nil {
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// registerHealth adds grpc.health.v1.Health to g, answering for "" and
// every service registered on g so far.
func (s *Server) registerHealth(g *grpc.Server) {
	h := &grpcHealth{s: s, services: map[string]bool{"": true}}
	for name := range g.GetServiceInfo() {
		h.services[name] = true
	}
	healthpb.RegisterHealthServer(g, h)
}
