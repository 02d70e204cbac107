package server

import (
	"context"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
)

// The core's API for the surfaces beside it: packages that serve the keys
// this package holds in a format or a view of their own (server/leaf,
// server/grpcapi, server/admin, server/dashboard). A surface owns its
// routes and their fast path; the core owns the key table, the issuers'
// lifetimes, authorization, rate limits, metrics, the answer budget and
// the error answers of the native API.

// Surfaces.

// Surface is a set of HTTP routes served beside the core's, on the public
// and the admin handler alike.
type Surface interface {
	// Routes registers the surface's handlers on mux.
	Routes(mux *http.ServeMux)
	// Hot serves r without the mux's general matching when path (canonical,
	// nothing escaped) is one of the surface's ID routes, exactly as its
	// mux handler would, and reports whether it did. Everything else is
	// left to the mux.
	Hot(w http.ResponseWriter, r *http.Request, path string) bool
}

// NewSurface builds a surface over a server; Options.Surfaces lists them.
type NewSurface func(*Server) Surface

// A Runner is a Surface with work of its own while the server serves: Serve
// runs it in a goroutine of its own until Serve's context ends.
type Runner interface {
	Run(ctx context.Context)
}

// A Publisher is a Surface whose static files hold no data: with an admin
// token configured, the admin listener serves the paths for which Public
// is true to any client (a browser loading a page cannot send the token).
type Publisher interface {
	Public(path string) bool
}

// A GRPCService is a Surface that serves gRPC: GRPCServer (and so Serve's
// gRPC listener) registers it.
type GRPCService interface {
	RegisterGRPC(*grpc.Server)
}

// What a surface reads of the server; besides these, Lookup and Table
// (server.go) and RangeMax (http.go).

// Env is what the server gives its strategies and surfaces: the clock, the
// logger, the config, the registry and the shared resources (closed with
// the server).
func (s *Server) Env() *Env { return s.env }

// Closed reports whether Close has begun.
func (s *Server) Closed() bool { return s.closed.Load() }

// Adopt serves an issuer a surface built and owns (one row of a table the
// surface serves by name) through a Key that is not in the key table: its
// IDs count in idmint_ids_issued_total under name, and Retire closes it.
func (s *Server) Adopt(ctx context.Context, name string, kc KeyConfig, iss Issuer) (*Key, error) {
	return s.wrap(ctx, name, kc, iss, false)
}

// Metrics.

// Route returns the request metrics of the route called name (its
// label in idmint_http_requests_total and the latency histogram). Call it
// once, when the surface is built.
func (s *Server) Route(name string) *Route { return s.metrics.route(name) }

// Timed is a handler serving with serve, which returns the status it
// answered, and counting each answer on route with how long it took.
func (s *Server) Timed(route *Route, serve func(http.ResponseWriter, *http.Request) int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := s.clk.Mono()
		st := serve(w, r)
		route.Observe(st, s.clk.Mono()-start)
	}
}

// ObserveKey counts an answer on route for the key called name, unless the
// key hides its volume (then no metric counts its requests). k is the key
// the request found, when it got that far.
func (s *Server) ObserveKey(route *Route, name string, k *Key, status int, d time.Duration) {
	if k == nil {
		k = s.Lookup(name)
	}
	if k != nil && k.hides {
		return
	}
	route.Observe(status, d)
}

// Answers in the native API's format; besides these, MethodOK and
// WriteJSON (http.go), WriteError and WriteAuthError (errors.go) and
// LogRefusal (refusals.go).

// CheckAdmin answers r's refusal, in the native API's error body, unless r
// may administer (it carries the admin token, or no admin token is
// configured and it comes from loopback, not from a web page). It returns
// the refusal's status, or 0 when r may go on.
func (s *Server) CheckAdmin(w http.ResponseWriter, r *http.Request) int {
	if e := s.adminCheck(r); e != nil {
		s.WriteError(w, *e)
		return e.Status
	}
	return 0
}

// WriteIssuerError answers an issuer's failure on the key (or resource)
// called name in the native API's error body: 400 for the request's
// fault, otherwise 503 with Retry-After. It returns the status.
func (s *Server) WriteIssuerError(w http.ResponseWriter, err error, name string) int {
	e := issuerError(err, name)
	s.WriteError(w, e)
	return e.Status
}

// Refusals for a surface that answers in a format of its own (gRPC):
// ErrorAnswer (errors.go), IssuerRefused (refusals.go), GoneAnswer
// (http.go), BudgetRefusal (budget.go).

// The answer budget: bytes of answers held for clients that have not read
// them yet. HoldAnswer (budget.go) reserves.

// ReleaseAnswer gives back a reservation no answer used.
func (s *Server) ReleaseAnswer(held int64) { s.budget.release(held) }

// OweAnswer settles a reservation at the answer's encoded size and hands
// it to the gRPC connection of ctx, which gives it back as the client
// reads; text says the answer holds strings, whose bytes count twice.
func (s *Server) OweAnswer(ctx context.Context, k *Key, n int, held, size int64, text bool) {
	if held == 0 {
		return
	}
	if text {
		k.noteAnswer(n, 2*size)
	}
	s.owe(ctx, s.settle(held, size))
}

// A key as a surface uses it.

// Name is the key's name.
func (k *Key) Name() string { return k.name }

// Strategy is the key's strategy's name.
func (k *Key) Strategy() string { return k.cfg.Strategy }

// Issuer is the key's issuer.
func (k *Key) Issuer() Issuer { return k.issuer }

// Int64s is the issuer's Int64s, or nil when it issues strings.
func (k *Key) Int64s() Int64s { return k.ints }

// Strings is the issuer's Strings, or nil when it issues numbers.
func (k *Key) Strings() Strings { return k.strs }

// Ranger is the issuer's Ranger, or nil.
func (k *Key) Ranger() Ranger { return k.ranger }

// Decoder is the issuer's Decoder, or nil.
func (k *Key) Decoder() Decoder { return k.dec }

// Protected reports whether the key has tokens.
func (k *Key) Protected() bool { return len(k.tokens) > 0 }

// Authorize checks r's bearer token against the key's tokens: 0 when r may
// use the key, otherwise 401 or 403 (see Server.WriteAuthError).
func (k *Key) Authorize(r *http.Request) int { return authorize(r, k.tokens) }

// AuthorizeValue is Authorize for a credential that does not come in an
// HTTP request (gRPC's "authorization" metadata): h is the header's value.
func (k *Key) AuthorizeValue(h string) int { return authorizeValue(h, k.tokens) }

// Allow takes one request from the key's rate limit. When none is left it
// returns false and how long until one will be.
func (k *Key) Allow() (bool, time.Duration) {
	if k.limiter == nil {
		return true, 0
	}
	return k.limiter.allow()
}

// Headers are what every answer says about the key: its strategy, its
// generation (new each time a key of that name is built) and, for a key
// with a leader, the leader's node (nil for none).
func (k *Key) Headers() (strategy, generation, leader []string) {
	return k.hdr.strategy, k.hdr.generation, k.hdr.leaderValue()
}

// Hold keeps the key's issuer open until Release: every use of the issuer
// sits between the two (and nothing slow besides, such as writing the
// answer). It returns false, holding nothing, when the key was retired.
func (k *Key) Hold() bool {
	k.mu.RLock()
	if k.gone {
		k.mu.RUnlock()
		return false
	}
	return true
}

// Release ends a Hold.
func (k *Key) Release() { k.mu.RUnlock() }

// Issued counts n IDs handed out.
func (k *Key) Issued(n int) { k.issued.Add(float64(n)) }

// IssuedTotal is how many IDs the key has handed out (its
// idmint_ids_issued_total); 0 for a key that hides its volume.
func (k *Key) IssuedTotal() int64 {
	var m dto.Metric
	if k.hides || k.issued == nil || k.issued.Write(&m) != nil {
		return 0
	}
	return int64(m.GetCounter().GetValue())
}

// HidesVolume reports whether the key's IDs exist to hide how many were
// issued (order numbers): no metric, view or chart counts them.
func (k *Key) HidesVolume() bool { return k.hides }

// Retire closes the key's issuer after its last Hold ends (or when ctx
// does). For keys a surface adopted; the server retires its own.
func (k *Key) Retire(ctx context.Context) error { return retire(ctx, k) }
