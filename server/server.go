package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/server/internal/wire"
)

// Options configures New. Config and Registry are required.
type Options struct {
	// Config must have had SetDefaults applied; New validates it.
	Config *Config
	// Registry holds the strategies keys may use.
	Registry *Registry
	// Clock defaults to clock.NewReal().
	Clock clock.Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// KeyStore persists keys created through the admin API. Nil: such
	// keys last until the process exits.
	KeyStore KeyStore
	// NodeName names this node on the answers for a key, once its token
	// is checked (HeaderNode). Default: NodeName().
	NodeName string
	// Surfaces are built once the keys are, in order, and serve their
	// routes beside the native API's on Handler and AdminHandler (cmd/idmint
	// adds Leaf's, server/leaf).
	Surfaces []NewSurface
	// Findings are the results of the start-up checks (package doctor),
	// exported as idmint_doctor_findings{check,severity}.
	Findings []StartFinding
}

// StartFinding is what a node exports of the start-up checks: how many
// findings one check made at one severity.
type StartFinding struct {
	Check, Severity string
	Count           int
}

// Server serves the keys of one Config. Create it with New, expose
// Handler and AdminHandler (or call Serve), and Close it once.
type Server struct {
	cfg      *Config
	reg      *Registry
	clk      clock.Clock
	log      *slog.Logger
	env      *Env
	keystore KeyStore
	metrics  *metrics
	node     []string // HeaderNode's value

	budget    *answerBudget // answer bytes held for clients (budget.go)
	grpcConns *connIndex    // Serve's gRPC connections; nil before Serve

	keys      atomic.Pointer[map[string]*Key]
	adminMu   sync.Mutex      // guards table swaps and creating; never held across I/O
	persistMu sync.Mutex      // orders KeyStore saves
	creating  map[string]bool // names being built by createKey

	surfaces []Surface // Options.Surfaces, built

	adminToken []tokenHash
	// metricsToken is metrics_token's hash: it grants /metrics and
	// nothing else. scrapeTokens is it and the admin token's, the tokens
	// /metrics takes when a metrics token is configured.
	metricsToken, scrapeTokens []tokenHash
	retired                    atomic.Pointer[map[string][]tokenHash] // deleted keys' tokens (retired.go)
	closed                     atomic.Bool
	recent                     refusalList  // the recent refusals (Refusals)
	readyLogNext               atomic.Int64 // Mono (ns) before which /readyz does not log its cause again

	// Shutdown's phases (drain.go): draining from the start of the
	// drain; skipCtx ends with SkipDrain; stopCtx when the listeners
	// close (it ends the gRPC streams).
	draining    atomic.Bool
	skipCtx     context.Context
	skipDrain   context.CancelFunc
	stopCtx     context.Context
	stopStreams context.CancelFunc
}

// Key is one served key: its config and issuer with the capabilities
// resolved once. Surfaces reach it through the methods in surface.go.
type Key struct {
	name       string
	cfg        KeyConfig
	fromConfig bool
	issuer     Issuer
	ints       Int64s
	strs       Strings
	ranger     Ranger
	dec        Decoder
	tokens     []tokenHash
	limiter    *limiter
	issued     prometheus.Counter
	hides      bool         // the issuer hides its volume: no metrics count its requests
	step       atomic.Int64 // cfg.Step, as changed by setStep
	refusals   refusalLog
	hdr        keyHeaders   // what answers say about the key
	idBytes    atomic.Int64 // most answer bytes per ID seen (budget.go)

	// mu is held shared by every request using the issuer and exclusively
	// by deletion, so an issuer is closed only after its last request.
	mu   sync.RWMutex
	gone bool
}

// ErrClosed is returned by calls on a closed Server.
var ErrClosed = errors.New("server: closed")

// New validates the config and builds an issuer for every key (config keys,
// then keys from the KeyStore). On any failure it closes what it built and
// returns an error naming the key.
func New(ctx context.Context, o Options) (*Server, error) {
	if o.Config == nil || o.Registry == nil {
		return nil, errors.New("server: Options.Config and Options.Registry are required")
	}
	if err := o.Config.Validate(o.Registry); err != nil {
		return nil, err
	}
	if o.Clock == nil {
		o.Clock = clock.NewReal()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.NodeName == "" {
		o.NodeName = NodeName()
	}
	s := &Server{
		node:   []string{o.NodeName},
		budget: newAnswerBudget(cmp.Or(o.Config.AnswerBudget, DefaultAnswerBudget)),
		cfg:    o.Config, reg: o.Registry, clk: o.Clock, log: o.Logger, keystore: o.KeyStore,
		env: &Env{Clock: o.Clock, Logger: o.Logger, Config: o.Config, Registry: o.Registry, NodeName: o.NodeName},
	}
	s.skipCtx, s.skipDrain = context.WithCancel(context.Background())
	s.stopCtx, s.stopStreams = context.WithCancel(context.Background())
	if o.Config.AdminToken != "" {
		s.adminToken = hashTokens([]string{o.Config.AdminToken})
	}
	if o.Config.MetricsToken != "" {
		s.metricsToken = hashTokens([]string{o.Config.MetricsToken})
		s.scrapeTokens = append(append([]tokenHash(nil), s.metricsToken...), s.adminToken...)
	}
	empty := map[string]*Key{}
	s.keys.Store(&empty)
	if err := s.loadRetired(); err != nil {
		return nil, err
	}
	s.metrics = newMetrics(s)
	s.metrics.startFindings(o.Findings)
	if r := o.Config.RegionSpec(); r.Name != "" {
		s.log.Info("region: this node serves its region's share of every key's ID space", "region", r.Name, "index", r.Index, "count", r.Count)
	}

	all := map[string]*Key{}
	fail := func(err error) (*Server, error) {
		for _, k := range all {
			k.issuer.Close(ctx)
		}
		s.env.closeAll(ctx)
		return nil, err
	}
	// Every key this start builds: the config's, then the key store's
	// that the config does not shadow.
	start := map[string]KeyConfig{}
	fromConfig := map[string]bool{}
	for name, kc := range o.Config.Keys {
		start[name], fromConfig[name] = kc, true
	}
	if s.keystore != nil {
		stored, err := s.keystore.Load(ctx)
		if err != nil {
			return fail(err)
		}
		for _, name := range sortedKeys(stored) {
			if fromConfig[name] {
				s.log.Warn("key from the key store shadowed by the config file", "key", name)
				continue
			}
			kc := stored[name]
			kc.api = true
			if ps := s.cfg.checkKey(s.reg, "keys."+name, name, kc); len(ps) > 0 {
				return fail(&ValidationError{ps})
			}
			start[name] = kc
		}
	}
	for _, check := range s.reg.startChecks() {
		if err := check(ctx, s.env); err != nil {
			return fail(err)
		}
	}
	if err := s.prepare(ctx, start); err != nil {
		return fail(err)
	}
	for _, name := range sortedKeys(start) {
		k, err := s.build(ctx, name, start[name], fromConfig[name])
		if err != nil {
			return fail(err)
		}
		all[name] = k
	}
	s.keys.Store(&all)
	for _, ns := range o.Surfaces {
		s.surfaces = append(s.surfaces, ns(s))
	}
	if !isLoopbackAddr(o.Config.Listen) || (o.Config.GRPCListen != "" && !isLoopbackAddr(o.Config.GRPCListen)) {
		// The rule (README, security): a key without tokens serves every
		// client that reaches the listener; admin_token guards
		// administration only. Say which keys are open.
		var open []string
		for _, n := range sortedKeys(all) {
			if len(all[n].tokens) == 0 {
				open = append(open, n)
			}
		}
		if len(open) > 0 {
			s.log.Warn("keys without tokens serve every client that reaches a non-loopback listener; give them tokens to restrict them", "keys", open)
		}
	}
	return s, nil
}

// prepare calls each strategy's Prepare with its keys among keys.
func (s *Server) prepare(ctx context.Context, keys map[string]KeyConfig) error {
	byStrategy := map[string]map[string]KeyConfig{}
	for name, kc := range keys {
		if kc.Store == "" {
			kc.Store = DefaultStore
		}
		if byStrategy[kc.Strategy] == nil {
			byStrategy[kc.Strategy] = map[string]KeyConfig{}
		}
		byStrategy[kc.Strategy][name] = kc
	}
	for _, name := range sortedKeys(byStrategy) {
		st, ok := s.reg.Strategy(name)
		if !ok || st.Prepare == nil {
			continue // build reports an unknown strategy
		}
		if err := st.Prepare(ctx, s.env, byStrategy[name]); err != nil {
			return fmt.Errorf("server: prepare %d %s key(s): %w", len(byStrategy[name]), name, err)
		}
	}
	return nil
}

func (s *Server) build(ctx context.Context, name string, kc KeyConfig, fromConfig bool) (*Key, error) {
	st, ok := s.reg.Strategy(kc.Strategy)
	if !ok {
		return nil, fmt.Errorf("server: key %q: unknown strategy %q", name, kc.Strategy)
	}
	if kc.Store == "" {
		kc.Store = DefaultStore
	}
	iss, err := st.New(ctx, s.env, name, kc)
	if err != nil {
		return nil, fmt.Errorf("server: key %q (%s): %w", name, kc.Strategy, err)
	}
	return s.wrap(ctx, name, kc, iss, fromConfig)
}

// wrap makes iss the issuer of a Key called name, resolving its
// capabilities once; it closes iss when it has neither Int64s nor Strings.
func (s *Server) wrap(ctx context.Context, name string, kc KeyConfig, iss Issuer, fromConfig bool) (*Key, error) {
	k := &Key{
		name: name, cfg: kc, fromConfig: fromConfig, issuer: iss,
		tokens:  hashTokens(kc.Tokens),
		limiter: newLimiter(s.clk, kc.RateLimit),
	}
	k.step.Store(kc.Step)
	k.hdr.init(s.node, kc.Strategy, iss)
	if h, ok := iss.(VolumeHider); ok && h.HidesVolume() {
		k.hides = true
		k.issued = prometheus.NewCounter(prometheus.CounterOpts{Name: "idmint_ids_issued_total"}) // counted, never registered
	} else {
		k.issued = s.metrics.issued.WithLabelValues(name, kc.Strategy)
	}
	k.ints, _ = iss.(Int64s)
	k.strs, _ = iss.(Strings)
	k.ranger, _ = iss.(Ranger)
	k.dec, _ = iss.(Decoder)
	if k.ints == nil && k.strs == nil {
		iss.Close(ctx)
		return nil, fmt.Errorf("server: key %q: strategy %q built an issuer with neither Int64s nor Strings", name, kc.Strategy)
	}
	return k, nil
}

// Table is the key table as it is now, by name. It is never changed (a
// new key or a deletion swaps in another table): read it, never write it.
func (s *Server) Table() map[string]*Key { return *s.keys.Load() }

// Lookup returns the served key called name, or nil.
func (s *Server) Lookup(name string) *Key { return (*s.keys.Load())[name] }

// Keys returns the names of the keys served.
func (s *Server) Keys() []string { return sortedKeys(s.Table()) }

// errDraining is readyErr's answer from the start of the drain on.
var errDraining = errors.New("draining: this node is shutting down")

// readyErr returns nil when every issuer and shared resource that can tell
// says it is ready, and the node is not draining: the one answer /readyz,
// gRPC health and the idmint_ready metric all give.
func (s *Server) readyErr(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.draining.Load() {
		return errDraining
	}
	if ctx == nil {
		ctx = context.Background()
	}
	for _, name := range sortedKeys(s.Table()) {
		if r, ok := s.Lookup(name).issuerReadier(); ok {
			if err := r.Ready(ctx); err != nil {
				return fmt.Errorf("key %q: %w", name, err)
			}
		}
	}
	for _, r := range s.env.Resources() {
		if rd, ok := r.Resource.(Readier); ok {
			if err := rd.Ready(ctx); err != nil {
				return fmt.Errorf("%s: %w", r.Name, err)
			}
		}
	}
	return nil
}

func (k *Key) issuerReadier() (Readier, bool) {
	if k == nil {
		return nil, false
	}
	r, ok := k.issuer.(Readier)
	return r, ok
}

// Handler returns the public HTTP API: /v1, /healthz, /readyz, /metrics
// and the routes of Options.Surfaces (Leaf's). pprof is never on it.
//
// /metrics is left out (404) unless Config.MetricsPublic: by default it
// moves to the admin listener when one is configured.
//
// With a metrics_token, the public /metrics answers only requests carrying
// it or the admin token: a configured scrape credential guards /metrics
// wherever it is served.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	s.routes(mux)
	h := s.canonical(mux)
	if s.cfg.MetricsPublic() && len(s.metricsToken) == 0 {
		return h
	}
	public := s.cfg.MetricsPublic()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			if !public {
				s.notFound(w, r)
				return
			}
			st := authorize(r, s.scrapeTokens)
			if st == 0 && !scrapeMethod(r.Method) && (len(s.adminToken) == 0 || authorize(r, s.adminToken) != 0) {
				st = http.StatusForbidden // the metrics token reads, nothing more
			}
			if st != 0 {
				s.WriteError(w, *authAnswer(st))
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// canonical refuses paths that are not in clean form ("//", "/./", "/../")
// with a 400 instead of ServeMux's redirect: a client sending them is
// broken, and a redirect would only hide that.
//
// Every answer defaults to Cache-Control: no-store (an ID, an error or a
// view cached by a proxy would be served again).
func (s *Server) canonical(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd["Cache-Control"] = wire.NoStore
		if len(r.TransferEncoding) > 0 {
			s.refuseTransferEncoding(w)
			return
		}
		p := r.URL.Path
		if !canonicalPath(p) {
			s.WriteError(w, ErrorAnswer{Status: http.StatusBadRequest, Code: CodeBadPath, Field: "path", Message: "path " + strconv.Quote(wire.Trunc(p)) + " is not in canonical form"})
			return
		}
		if s.hot(w, r, p) {
			return
		}
		h.ServeHTTP(w, r)
	})
}

// refuseTransferEncoding answers a request whose body came with a
// transfer coding (chunked) 400 and closes its connection.
//
// A request with both Content-Length and Transfer-Encoding is how a
// request is smuggled past a proxy that frames by Content-Length: the
// bytes it counts as body are, framed as chunked, a second request. RFC
// 9112 section 6.1 requires the server to close the connection after
// answering such a request; Go's net/http frames it as chunked, drops the
// Content-Length before any handler sees it and keeps the connection open,
// so the two framings cannot be told apart here. No request of this API
// needs a chunked body (at most max_body_bytes of JSON or a count), so
// every one is refused, and the Connection: close makes net/http close the
// connection after the answer, unread bytes and all.
func (s *Server) refuseTransferEncoding(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	s.WriteError(w, ErrorAnswer{Status: http.StatusBadRequest, Code: CodeBadBody, Field: "Transfer-Encoding",
		Message: "a request body must come with Content-Length, not Transfer-Encoding (a request framed both ways is refused and its connection closed: RFC 9112 section 6.1)"})
}

// canonicalPath reports whether p is path.Clean(p), or that plus a
// trailing slash: it starts with '/' and has no empty, "." or ".." segment
// (the last may be empty). One pass, no allocation.
func canonicalPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	for i := 1; ; {
		j := strings.IndexByte(p[i:], '/')
		last := j < 0
		if last {
			j = len(p) - i
		}
		seg := p[i : i+j]
		if seg == "." || seg == ".." || (seg == "" && !last) {
			return false
		}
		if last {
			return true
		}
		i += j + 1
	}
}

// hot serves the requests that issue IDs (the Leaf routes, /v1 ids,
// range and snowflake) without ServeMux's general matching, which cleans the path again,
// unescapes each segment and fills a slice of path values: a third of the
// handler's time on a single ID (BenchmarkLeafSegment in
// server/strategies). It takes only paths the mux would send to the same
// handler with the same key: nothing escaped (RawPath empty; the mux
// unescapes) and a key segment without '/', as a canonical path ensures;
// everything else goes to the mux. It reports whether it served r.
//
// Each surface's fast path sits beside its routes, in the package that
// owns them: v1Hot (http.go) here, Surface.Hot in the others.
func (s *Server) hot(w http.ResponseWriter, r *http.Request, p string) bool {
	if r.URL.RawPath != "" {
		return false
	}
	if s.v1Hot(w, r, p) {
		return true
	}
	for _, sf := range s.surfaces {
		if sf.Hot(w, r, p) {
			return true
		}
	}
	return false
}

// AdminHandler returns the admin listener's handler: everything Handler
// serves plus /debug/pprof/. Without an admin token it answers loopback
// clients only.
func (s *Server) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	s.routes(mux)
	h := s.canonical(mux)
	adminRoutes(mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The dashboard's static files hold no data, and a browser loading
		// the page cannot send the token: with an admin token they are
		// served to anyone reaching the listener (the page then asks for
		// the token); without one, to loopback only, like the rest.
		if e := s.adminCheck(r); e != nil && !(len(s.adminToken) > 0 && s.public(r.URL.Path)) && !s.scrapes(r) {
			s.WriteError(w, *e)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// scrapes reports whether r is a GET (or HEAD) of /metrics with the
// metrics token: the one thing that token grants. It is checked after the
// admin token, for this request only, so it opens no other route (pprof,
// key administration, the dashboard's data) and no other method.
func (s *Server) scrapes(r *http.Request) bool {
	return r.URL.Path == "/metrics" && scrapeMethod(r.Method) && len(s.metricsToken) > 0 && authorize(r, s.metricsToken) == 0
}

// scrapeMethod reports whether method reads: what a scrape sends.
func scrapeMethod(method string) bool { return method == http.MethodGet || method == http.MethodHead }

// servesGRPC reports whether a surface registers a gRPC service.
func (s *Server) servesGRPC() bool {
	for _, sf := range s.surfaces {
		if _, ok := sf.(GRPCService); ok {
			return true
		}
	}
	return false
}

// public reports whether a surface's static files hold path (Publisher).
func (s *Server) public(path string) bool {
	for _, sf := range s.surfaces {
		if p, ok := sf.(Publisher); ok && p.Public(path) {
			return true
		}
	}
	return false
}

// adminCheck returns nil when r may administer: it carries the admin
// token, or no admin token is configured and it comes from loopback (see
// browserGuard). Otherwise it returns the refusal to write.
func (s *Server) adminCheck(r *http.Request) *ErrorAnswer {
	st := 0
	if len(s.adminToken) > 0 {
		st = authorize(r, s.adminToken)
	} else if !isLoopbackRemote(r) {
		st = http.StatusForbidden
	} else if e := browserGuard(r); e != nil {
		return e
	}
	return authAnswer(st)
}

// authAnswer is the refusal for an authorize status: nil for 0, the
// missing token's 401 or the wrong token's 403.
func authAnswer(st int) *ErrorAnswer {
	switch st {
	case 0:
		return nil
	case http.StatusUnauthorized:
		return &ErrorAnswer{Status: st, Code: CodeUnauthorized, Field: "Authorization", Message: "a bearer token is required: send Authorization: Bearer <token>"}
	}
	return &ErrorAnswer{Status: st, Code: CodeForbidden, Field: "Authorization", Message: "this token may not do that (or this client may not: without admin_token only loopback clients may administer)"}
}

// browserGuard refuses what a web page can make the operator's browser
// send to a loopback server without admin_token, where being on loopback
// is the only proof: a request addressed to another name (DNS rebinding:
// the page's own name resolved to 127.0.0.1), a cross-site request
// (Sec-Fetch-Site, Origin), and a POST that is not JSON (a page can post
// text/plain, forms and multipart without a preflight, never JSON).
func browserGuard(r *http.Request) *ErrorAnswer {
	if !loopbackName(r.Host) {
		return &ErrorAnswer{Status: http.StatusForbidden, Code: CodeForbidden, Field: "Host",
			Message: fmt.Sprintf("Host %q is not a loopback name: without admin_token, administration answers only requests addressed to localhost or a loopback address (a DNS-rebinding page sends its own name); set admin_token to administer under another name", wire.Trunc(r.Host))}
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return &ErrorAnswer{Status: http.StatusForbidden, Code: CodeForbidden, Field: "Sec-Fetch-Site",
			Message: fmt.Sprintf("a %s request from a web page may not administer a server without admin_token", wire.Trunc(site))}
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || !strings.EqualFold(u.Host, r.Host) {
			return &ErrorAnswer{Status: http.StatusForbidden, Code: CodeForbidden, Field: "Origin",
				Message: fmt.Sprintf("Origin %q is not this server (%q): a page of another origin may not administer a server without admin_token", wire.Trunc(o), wire.Trunc(r.Host))}
		}
	}
	// POST is the one write a page can send cross-origin without a
	// preflight (PATCH and DELETE are preflighted, and the server answers
	// no CORS): it must be JSON, which a page cannot send unasked.
	if r.Method == http.MethodPost {
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			return &ErrorAnswer{Status: http.StatusUnsupportedMediaType, Code: CodeBadBody, Field: "Content-Type",
				Message: fmt.Sprintf("Content-Type %q: administration writes must send Content-Type: application/json", wire.Trunc(r.Header.Get("Content-Type")))}
		}
	}
	return nil
}

// loopbackName reports whether a Host header names this machine's
// loopback: localhost (or a name under .localhost), or a loopback address,
// with or without a port.
func loopbackName(hostport string) bool {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if strings.EqualFold(h, "localhost") || strings.HasSuffix(strings.ToLower(h), ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// HTTPServer returns an *http.Server for h with the config's timeouts
// (ReadHeaderTimeout guards against slowloris) and a 16 KiB header limit.
func (s *Server) HTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: time.Duration(s.cfg.ReadHeaderTimeout),
		ReadTimeout:       time.Duration(s.cfg.ReadTimeout),
		WriteTimeout:      time.Duration(s.cfg.WriteTimeout),
		IdleTimeout:       time.Duration(s.cfg.IdleTimeout),
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
}

// Listeners are the sockets Serve serves. HTTP is required; GRPC and Admin
// are optional.
type Listeners struct {
	HTTP, GRPC, Admin net.Listener
}

// Serve serves Handler on l.HTTP, the gRPC service on l.GRPC and
// AdminHandler on l.Admin (each with TLS when the config names a
// certificate), until ctx is done.
// Then it drains for the config's drain_period (/readyz answers 503,
// requests are still served; SkipDrain cuts it short), stops accepting,
// ends the gRPC streams, waits for in-flight requests (up to
// ShutdownTimeout) and closes the server, which releases leases with their
// horizon recorded (drain.go).
func (s *Server) Serve(ctx context.Context, l Listeners) error {
	if l.GRPC != nil && !s.servesGRPC() {
		return errors.New("server: a gRPC listener is given but no surface serves gRPC: add grpcapi.New (server/grpcapi) to Options.Surfaces")
	}
	pub := s.HTTPServer(s.drainAware(s.Handler()))
	errc := make(chan error, 3)
	// At most max_conns connections at once (U10: each holds buffers and
	// a goroutine), as the gRPC listener holds at most GRPCMaxConns.
	maxConns := s.cfg.MaxConns
	if maxConns < 1 { // a Config that skipped SetDefaults
		maxConns = DefaultMaxConns
	}
	runCtx, stopRunners := context.WithCancel(ctx)
	defer stopRunners()
	for _, sf := range s.surfaces {
		if r, ok := sf.(Runner); ok {
			go r.Run(runCtx)
		}
	}
	httpLn := newLimitListener(l.HTTP, maxConns)
	pub.ConnState = httpLn.ConnState
	go func() {
		var err error
		if s.cfg.TLS.CertFile != "" {
			err = pub.ServeTLS(httpLn, s.cfg.TLS.CertFile, s.cfg.TLS.KeyFile)
		} else {
			err = pub.Serve(httpLn)
		}
		errc <- err
	}()
	var adm *http.Server
	var admLn, grpcLn *limitListener
	if l.Admin != nil {
		// The admin listener carries the admin token: TLS whenever the
		// public listener has it, and a cap on connections like the others.
		adm = s.HTTPServer(s.drainAware(s.AdminHandler()))
		admLn = newLimitListener(l.Admin, AdminMaxConns)
		adm.ConnState = admLn.ConnState
		go func() {
			if s.cfg.TLS.CertFile != "" {
				errc <- adm.ServeTLS(admLn, s.cfg.TLS.CertFile, s.cfg.TLS.KeyFile)
				return
			}
			errc <- adm.Serve(admLn)
		}()
	}
	var gs *grpc.Server
	if l.GRPC != nil {
		var opts []grpc.ServerOption
		if s.cfg.TLS.CertFile != "" {
			creds, err := credentials.NewServerTLSFromFile(s.cfg.TLS.CertFile, s.cfg.TLS.KeyFile)
			if err != nil {
				return fmt.Errorf("server: grpc tls: %w", err)
			}
			opts = append(opts, grpc.Creds(creds))
		}
		ln, idx := owingListener(l.GRPC, GRPCMaxConns, s.budget, s.clk.Mono)
		grpcLn = ln
		s.grpcConns = idx
		gs = s.GRPCServer(append(opts, grpc.StatsHandler(grpcStreams{ln}))...)
		wctx, stopWatch := context.WithCancel(ctx)
		defer stopWatch()
		go s.watchStalled(wctx, idx)
		go func() { errc <- gs.Serve(ln) }()
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	// The phases of drain.go, each logged with the time since begun.
	begun := s.clk.Mono()
	since := func() time.Duration { return s.clk.Mono() - begun }
	if serveErr == nil {
		s.drain(begun)
	} else {
		s.draining.Store(true) // a listener failed: no drain, stop now
	}
	// Stop accepting: every listener closes now (http.Server.Shutdown and
	// GracefulStop close them again, which limitListener ignores), and the
	// gRPC streams end.
	sctx, cancel := context.WithTimeout(context.Background(), time.Duration(s.cfg.ShutdownTimeout))
	defer cancel()
	s.stopStreams()
	httpLn.Close()
	if admLn != nil {
		admLn.Close()
	}
	if grpcLn != nil {
		grpcLn.Close()
	}
	s.log.Info("shutdown: stopped accepting connections; finishing in-flight requests", "after", since(), "shutdown_timeout", time.Duration(s.cfg.ShutdownTimeout))
	stopped := since()
	errs := []error{}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		errs = append(errs, serveErr)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	shut := func(name string, f func() error) {
		wg.Go(func() {
			if err := f(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				mu.Unlock()
			}
		})
	}
	if gs != nil {
		shut("shutdown grpc", func() error {
			done := make(chan struct{})
			go func() { gs.GracefulStop(); close(done) }()
			select {
			case <-done:
			case <-sctx.Done():
				gs.Stop()
			}
			return nil
		})
	}
	shut("shutdown", func() error { return pub.Shutdown(sctx) })
	if adm != nil {
		shut("shutdown admin", func() error { return adm.Shutdown(sctx) })
	}
	wg.Wait()
	s.log.Info("shutdown: in-flight requests finished; closing keys and stores", "after", since(), "in_flight_took", since()-stopped)
	if err := s.Close(sctx); err != nil {
		errs = append(errs, err)
	}
	s.log.Info("shutdown: done", "after", since())
	return errors.Join(errs...)
}

// watchStalled closes gRPC connections whose client has read none of
// the answer bytes they owe for answer_timeout (budget.go).
func (s *Server) watchStalled(ctx context.Context, idx *connIndex) {
	d := s.answerTimeout()
	for s.clk.Sleep(ctx, min(d/4, time.Second)) == nil {
		if n := idx.closeStalled(d); n > 0 {
			s.metrics.stalledClosed.Add(float64(n))
			s.log.Debug("closed gRPC connections that read no answer bytes", "connections", n, "answer_timeout", d)
		}
	}
}

func (s *Server) answerTimeout() time.Duration {
	return cmp.Or(time.Duration(s.cfg.AnswerTimeout), 10*time.Second)
}

// Close closes every issuer, then every shared resource in reverse order of
// opening (leases record their horizon and are released). Requests still
// running are waited for until ctx ends; then the issuers are closed
// anyway, so a shutdown deadline reaches lease release. A second Close
// returns ErrClosed.
func (s *Server) Close(ctx context.Context) error {
	if !s.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	// A createKey publishing now sees closed under adminMu and closes its
	// own issuer; anything published before is in this snapshot.
	s.adminMu.Lock()
	t := s.Table()
	s.adminMu.Unlock()
	var errs []error
	for _, name := range sortedKeys(t) {
		if err := retire(ctx, t[name]); err != nil {
			errs = append(errs, fmt.Errorf("server: close key %q: %w", name, err))
		}
	}
	if err := s.env.closeAll(ctx); err != nil {
		errs = append(errs, fmt.Errorf("server: %w", err))
	}
	// Fold the key journal into its file, so that an older build, which
	// reads only the file, finds every key created through the API.
	if c, ok := s.keystore.(KeyCompactor); ok {
		s.persistMu.Lock()
		if err := c.Compact(ctx); err != nil {
			errs = append(errs, fmt.Errorf("server: fold the key journal into its file: %w", err))
		}
		s.persistMu.Unlock()
	}
	return errors.Join(errs...)
}

// retire marks k gone once its in-flight requests have finished (they
// hold k.mu only while the issuer runs, never while answering), then
// closes its issuer outside the lock. When ctx ends first the issuer is
// closed anyway: the requests still in it fail, and the deadline reaches
// the issuer's Close.
func retire(ctx context.Context, k *Key) error {
	if lockCtx(ctx, &k.mu) {
		already := k.gone
		k.gone = true
		k.mu.Unlock()
		if already {
			return nil
		}
	}
	return k.issuer.Close(ctx)
}

// lockCtx takes mu's write lock, or gives up when ctx ends first (a
// goroutine then takes and drops the lock when it comes free).
func lockCtx(ctx context.Context, mu *sync.RWMutex) bool {
	if mu.TryLock() {
		return true
	}
	got := make(chan struct{})
	go func() { mu.Lock(); close(got) }()
	select {
	case <-got:
		return true
	case <-ctx.Done():
		go func() { <-got; mu.Unlock() }()
		return false
	}
}

// Key administration never holds a lock across a store call or network
// I/O: adminMu guards only the table swap and the names being created;
// persistMu orders the KeyStore saves (local file writes), so the last
// save always holds the latest table. Lists and views take neither.

// ErrTooManyKeys: a create would pass Config.MaxKeys.
var ErrTooManyKeys = errors.New("server: too many keys")

// CreateKey builds and adds a key as the admin API does: kc is checked as
// a config's key is (a *ValidationError names each problem; a bad name
// is an *InputError on "name"), and the key is kept in the KeyStore, so it
// is served again after a restart. A key of that name already served is
// ErrKeyExists; one past Config.MaxKeys, ErrTooManyKeys.
func (s *Server) CreateKey(ctx context.Context, name string, kc KeyConfig) (*Key, error) {
	if err := CheckName(name); err != nil {
		return nil, &InputError{Field: "name", Err: err}
	}
	kc.api = true
	if kc.Store == "" {
		kc.Store = DefaultStore
	}
	if ps := s.cfg.checkKey(s.reg, "", name, kc); len(ps) > 0 {
		return nil, &ValidationError{ps}
	}
	return s.createKey(ctx, name, kc)
}

// createKey builds and adds a checked key.
func (s *Server) createKey(ctx context.Context, name string, kc KeyConfig) (*Key, error) {
	s.adminMu.Lock()
	switch {
	case s.closed.Load():
		s.adminMu.Unlock()
		return nil, ErrClosed
	case s.Lookup(name) != nil || s.creating[name]:
		s.adminMu.Unlock()
		return nil, ErrKeyExists
	case len(s.Table())+len(s.creating) >= s.cfg.MaxKeys && s.cfg.MaxKeys > 0:
		n := len(s.Table())
		s.adminMu.Unlock()
		return nil, fmt.Errorf("%w: %d keys served, max_keys is %d", ErrTooManyKeys, n, s.cfg.MaxKeys)
	}
	if s.creating == nil {
		s.creating = map[string]bool{}
	}
	s.creating[name] = true
	s.adminMu.Unlock()
	defer func() {
		s.adminMu.Lock()
		delete(s.creating, name)
		s.adminMu.Unlock()
	}()

	k, err := s.build(ctx, name, kc, false) // store calls: no lock held
	if err != nil {
		return nil, err
	}
	s.persistMu.Lock()
	defer s.persistMu.Unlock()
	s.adminMu.Lock()
	next := maps.Clone(s.Table())
	closed := s.closed.Load()
	s.adminMu.Unlock()
	if closed {
		k.issuer.Close(ctx)
		return nil, ErrClosed
	}
	next[name] = k
	if err := s.persist(ctx, next, name); err != nil {
		k.issuer.Close(ctx)
		return nil, err
	}
	s.adminMu.Lock()
	if s.closed.Load() {
		s.adminMu.Unlock()
		k.issuer.Close(ctx)
		// Recorded, but the server closed before serving it: take the
		// record back, so that a create answered ErrClosed is not there
		// after a restart (Close folds the store only after this).
		delete(next, name)
		if err := s.persist(ctx, next, name); err != nil {
			s.log.Warn("key created as the server closed stays in the key store; delete it after the restart",
				"key", name, "err", err)
		}
		return nil, ErrClosed
	}
	s.keys.Store(&next)
	s.adminMu.Unlock()
	s.log.Info("key created", "key", name, "strategy", kc.Strategy)
	return k, nil
}

// Refusals of CreateKey, DeleteKey and SetStep.
var (
	ErrKeyExists  = errors.New("server: key exists")
	ErrConfigKey  = errors.New("server: key is defined in the config file")
	ErrNoSuchKey  = errors.New("server: no such key")
	ErrNotStepped = errors.New("server: key's strategy has no step")
)

// DeleteKey removes a key created through the API (a key of the config
// file is ErrConfigKey) and closes its issuer after its last in-flight
// request (or when ctx ends). The key's store rows are kept, so a key
// created again with the same name continues after them: its IDs never
// repeat the deleted key's. Its tokens are remembered in the data
// directory (RetiredFile), so its row stays theirs on Leaf's tag route
// (AuthorizeRetired).
func (s *Server) DeleteKey(ctx context.Context, name string) error {
	s.persistMu.Lock()
	k := s.Lookup(name)
	if k == nil {
		s.persistMu.Unlock()
		return ErrNoSuchKey
	}
	if k.fromConfig {
		s.persistMu.Unlock()
		return ErrConfigKey
	}
	if err := s.retireKey(k); err != nil {
		s.persistMu.Unlock()
		return err
	}
	next := maps.Clone(s.Table())
	delete(next, name)
	if err := s.persist(ctx, next, name); err != nil {
		s.persistMu.Unlock()
		return err
	}
	s.adminMu.Lock()
	s.keys.Store(&next)
	s.adminMu.Unlock()
	s.persistMu.Unlock()
	err := retire(ctx, k)
	s.log.Info("key deleted", "key", name)
	return err
}

// SetStep changes a segment key's step (and the persisted config of an
// API-created key); a key whose strategy has no step is ErrNotStepped.
func (s *Server) SetStep(ctx context.Context, name string, step int64) (*Key, error) {
	k := s.Lookup(name)
	if k == nil {
		return nil, ErrNoSuchKey
	}
	st, ok := k.issuer.(Stepper)
	if !ok {
		return nil, ErrNotStepped
	}
	if err := st.SetStep(ctx, step); err != nil { // a store call: no lock held
		return nil, err
	}
	s.persistMu.Lock()
	defer s.persistMu.Unlock()
	if s.Lookup(name) != k {
		return nil, ErrNoSuchKey // deleted meanwhile
	}
	k.step.Store(step)
	if !k.fromConfig {
		if err := s.persist(ctx, s.Table(), name); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// persist records that key name changed (or, absent from t, is gone) in
// the key store: that key alone when the store is a KeyJournal, every API
// key of t otherwise.
func (s *Server) persist(ctx context.Context, t map[string]*Key, name string) error {
	if s.keystore == nil {
		return nil
	}
	if j, ok := s.keystore.(KeyJournal); ok {
		if k, ok := t[name]; ok {
			return j.Put(ctx, name, k.persisted())
		}
		return j.Remove(ctx, name)
	}
	out := map[string]KeyConfig{}
	for n, k := range t {
		if !k.fromConfig {
			out[n] = k.persisted()
		}
	}
	return s.keystore.Save(ctx, out)
}

// persisted is the key's config as the key store keeps it, with its
// current step.
func (k *Key) persisted() KeyConfig {
	c := k.cfg
	c.Step = k.step.Load()
	return c
}
