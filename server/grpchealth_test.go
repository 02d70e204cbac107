package server

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
)

// grpcConn serves f's gRPC server on a loopback listener and dials it.
func grpcConn(t *testing.T, f *fixture) *grpc.ClientConn {
	t.Helper()
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
	return cc
}

// The standard health service answers what /readyz answers: SERVING while
// every key is ready, NOT_SERVING when one is not (and after Close), so
// grpc-health-probe and Kubernetes' gRPC probes take a node out as an HTTP
// probe of /readyz would. It needs no token, and an unknown service name
// is NotFound, as the health protocol says.
func TestGRPCHealth(t *testing.T) {
	f := newFixture(t, nil)
	hc := healthpb.NewHealthClient(grpcConn(t, f))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	check := func(service string) healthpb.HealthCheckResponse_ServingStatus {
		t.Helper()
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			t.Fatalf("Check(%q): %v", service, err)
		}
		return r.GetStatus()
	}
	if st := check(""); st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("ready server: %v", st)
	}
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "no.such.Service"}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown service: %v", err)
	}

	// Watch sends the status now, then each change.
	ws, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := ws.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first watch answer: %v %v", r, err)
	}

	f.cs.get("order").unrdy.Store(true)
	if st := check(""); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("a key not ready: %v", st)
	}
	if w := do(f.h, req{target: "/readyz"}); w.Code != 503 {
		t.Fatalf("/readyz disagrees: %d", w.Code)
	}
	l, err := hc.List(ctx, &healthpb.HealthListRequest{})
	if err != nil || l.GetStatuses()[""].GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("List: %v %v", l, err)
	}
	// The watcher sleeps on the server's clock between looks.
	if err := f.clk.WaitForSleepers(ctx, 1); err != nil {
		t.Fatalf("the watcher never slept: %v", err)
	}
	f.clk.Advance(healthWatchEvery)
	if r, err := ws.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("watch after the key became unready: %v %v", r, err)
	}

	f.cs.get("order").unrdy.Store(false)
	if st := check(""); st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("ready again: %v", st)
	}
	// A node that is draining (SIGTERM received) is NOT_SERVING at once,
	// as /readyz is 503 "draining", so probes take it out before it stops.
	f.s.draining.Store(true)
	if st := check(""); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("draining: %v", st)
	}
	if w := do(f.h, req{target: "/readyz"}); w.Code != 503 || !strings.Contains(w.Body.String(), "draining") {
		t.Fatalf("/readyz while draining: %d %s", w.Code, w.Body)
	}
	if w := do(f.h, req{target: "/metrics"}); !strings.Contains(w.Body.String(), "idmint_ready 0") {
		t.Fatal("idmint_ready is not 0 while draining")
	}
	f.s.draining.Store(false)
	if err := f.s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := check(""); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("closed server: %v", st)
	}
}

// Reflection lists the services only when grpc_reflection is on.
func TestGRPCReflection(t *testing.T) {
	list := func(f *fixture) ([]string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		st, err := reflectpb.NewServerReflectionClient(grpcConn(t, f)).ServerReflectionInfo(ctx)
		if err != nil {
			return nil, err
		}
		// Send's io.EOF means the server ended the stream; Recv gives its status.
		if err := st.Send(&reflectpb.ServerReflectionRequest{MessageRequest: &reflectpb.ServerReflectionRequest_ListServices{}}); err != nil && err != io.EOF {
			return nil, err
		}
		r, err := st.Recv()
		if err != nil {
			return nil, err
		}
		var names []string
		for _, s := range r.GetListServicesResponse().GetService() {
			names = append(names, s.GetName())
		}
		return names, nil
	}
	if names, err := list(newFixture(t, nil)); status.Code(err) != codes.Unimplemented {
		t.Fatalf("reflection off by default: %v %v", names, err)
	}
	names, err := list(newFixture(t, func(c *Config) { c.GRPCReflection = true }))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, n := range names {
		found = found || n == "grpc.health.v1.Health"
	}
	if !found {
		t.Fatalf("reflection lists %v, not the health service", names)
	}
}
