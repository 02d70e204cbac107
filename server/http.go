package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idmint/idmint/api"
	"github.com/idmint/idmint/idparts"
	"github.com/idmint/idmint/server/internal/wire"
)

func (s *Server) routes(mux *http.ServeMux) {
	// The surfaces beside the core (Leaf's, administration, the dashboard).
	for _, sf := range s.surfaces {
		sf.Routes(mux)
	}
	// Native.
	mux.HandleFunc("/v1/keys/{key}/ids", s.ids)
	mux.HandleFunc("/v1/keys/{key}/range", s.rangeIDs)
	mux.HandleFunc("/v1/snowflake/{key}", s.snowflakeIDs)
	mux.HandleFunc("/v1/decode/{id}", s.decode)
	// Operations.
	mux.HandleFunc("/healthz", s.healthz)
	mux.HandleFunc("/readyz", s.readyz)
	mux.Handle("/metrics", s.metrics.handler())
	mux.HandleFunc("/openapi.yaml", s.openAPI)
	mux.HandleFunc("/", s.notFound)
}

// adminRoutes registers what only the admin listener serves: Go's
// profiler.
func adminRoutes(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}

// RouteMuxes returns new muxes holding the routes of the public and the
// admin listener, surfaces' included, registered as Handler and
// AdminHandler register them, for a program listing the routes (the test
// holding api/openapi.yaml to the routes served). Requests are served
// through Handler and AdminHandler, never through these.
func (s *Server) RouteMuxes() (public, admin *http.ServeMux) {
	public, admin = http.NewServeMux(), http.NewServeMux()
	s.routes(public)
	s.routes(admin)
	adminRoutes(admin)
	return public, admin
}

// openAPI serves GET /openapi.yaml: the OpenAPI 3.1 document of this API.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	if !s.MethodOK(w, r, http.MethodGet) {
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/yaml")
	h.Set("Content-Length", strconv.Itoa(len(api.OpenAPI)))
	if r.Method != http.MethodHead {
		w.Write(api.OpenAPI)
	}
}

// Prefixes of the /v1 routes v1Hot serves.
const (
	keysPrefix      = "/v1/keys/"
	snowflakePrefix = "/v1/snowflake/"
)

// v1Hot is hot's part for the /v1 ID routes: ids and range of a key, and
// snowflake IDs, for a key segment without '/'. It reports whether it
// served r.
func (s *Server) v1Hot(w http.ResponseWriter, r *http.Request, p string) bool {
	switch {
	case strings.HasPrefix(p, snowflakePrefix):
		if key := p[len(snowflakePrefix):]; key != "" && !strings.Contains(key, "/") {
			s.snowflakeIDsOf(w, r, key)
			return true
		}
	case strings.HasPrefix(p, keysPrefix):
		rest := p[len(keysPrefix):]
		if key, ok := strings.CutSuffix(rest, "/ids"); ok && key != "" && !strings.Contains(key, "/") {
			s.idsOf(w, r, key)
			return true
		}
		if key, ok := strings.CutSuffix(rest, "/range"); ok && key != "" && !strings.Contains(key, "/") {
			s.rangeOf(w, r, key)
			return true
		}
	}
	return false
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	s.WriteError(w, ErrorAnswer{Status: http.StatusNotFound, Code: CodeNotFound, Field: "path", Message: "no such endpoint: " + strconv.Quote(wire.Trunc(r.URL.Path))})
	s.metrics.observe(routeOther, http.StatusNotFound, 0)
}

// MethodOK answers 405 with an Allow header unless r.Method is one of
// allowed (HEAD is allowed wherever GET is).
func (s *Server) MethodOK(w http.ResponseWriter, r *http.Request, allowed ...string) bool {
	for _, m := range allowed {
		if r.Method == m || (m == http.MethodGet && r.Method == http.MethodHead) {
			return true
		}
	}
	allow := ""
	for i, m := range allowed {
		if i > 0 {
			allow += ", "
		}
		allow += m
	}
	w.Header().Set("Allow", allow)
	s.WriteError(w, ErrorAnswer{Status: http.StatusMethodNotAllowed, Code: CodeMethodNotAllowed, Field: "method", Message: "method " + strconv.Quote(wire.Trunc(r.Method)) + " is not allowed here; allowed: " + allow})
	return false
}

// GoneAnswer answers a request for a key retired meanwhile (Key.Hold
// returned false): 404 when the key was deleted, 503 with Retry-After
// when the whole server is shutting down (the key exists; another node,
// or this one restarted, serves it), so a client retries elsewhere
// instead of taking it for a bad key.
func (s *Server) GoneAnswer(name string) ErrorAnswer {
	if s.closed.Load() {
		return ErrorAnswer{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Field: "key", Message: "the server is shutting down; key " + strconv.Quote(name) + " is served again after its restart or by another node", RetryAfter: time.Second}
	}
	return ErrorAnswer{Status: http.StatusNotFound, Code: CodeUnknownKey, Field: "key", Message: "no key called " + strconv.Quote(name)}
}

// acquire resolves the {key} of a request: name validity, existence, the
// key's token, its rate limit. On success the key is returned read-locked
// (release with k.mu.RUnlock) and status is 0; otherwise the error answer
// has been written and its status is returned.
func (s *Server) acquire(w http.ResponseWriter, r *http.Request, name string) (*Key, int) {
	k := s.Lookup(name)
	if k == nil {
		if err := CheckName(name); err != nil {
			s.WriteError(w, ErrorAnswer{Status: http.StatusBadRequest, Code: CodeBadKey, Field: "key", Message: err.Error()})
			return nil, http.StatusBadRequest
		}
		s.WriteError(w, ErrorAnswer{Status: http.StatusNotFound, Code: CodeUnknownKey, Field: "key", Message: "no key called " + strconv.Quote(name)})
		return nil, http.StatusNotFound
	}
	if st := authorize(r, k.tokens); st != 0 {
		s.WriteAuthError(w, st)
		return nil, st
	}
	k.hdr.set(w.Header())
	if k.limiter != nil {
		if ok, wait := k.limiter.allow(); !ok {
			s.WriteError(w, ErrorAnswer{Status: http.StatusTooManyRequests, Code: CodeRateLimited, Field: "key", Message: "key " + strconv.Quote(name) + " is limited to " + strconv.FormatFloat(k.cfg.RateLimit, 'g', -1, 64) + " requests per second", RetryAfter: wait})
			return nil, http.StatusTooManyRequests
		}
	}
	k.mu.RLock()
	if k.gone {
		k.mu.RUnlock()
		e := s.GoneAnswer(name)
		s.WriteError(w, e)
		return nil, e.Status
	}
	return k, 0
}

var int64Pool = sync.Pool{New: func() any { b := make([]int64, 0, 64); return &b }}

// maxPooledAnswer is the largest answer buffer bytePool keeps.
const maxPooledAnswer = 64 << 10

var bytePool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func getInts(n int) *[]int64 {
	p := int64Pool.Get().(*[]int64)
	if cap(*p) < n {
		*p = make([]int64, n)
	}
	*p = (*p)[:n]
	return p
}

// ids serves GET /v1/keys/{key}/ids?count=N.
func (s *Server) ids(w http.ResponseWriter, r *http.Request) { s.idsOf(w, r, r.PathValue("key")) }

func (s *Server) idsOf(w http.ResponseWriter, r *http.Request, name string) {
	start := s.clk.Mono()
	st, k := s.serveIDs(w, r, name, "")
	s.observeKey(routeIDs, name, k, st, s.clk.Mono()-start)
}

// snowflakeIDs serves GET /v1/snowflake/{key}?count=N: ids, for snowflake
// keys only.
func (s *Server) snowflakeIDs(w http.ResponseWriter, r *http.Request) {
	s.snowflakeIDsOf(w, r, r.PathValue("key"))
}

func (s *Server) snowflakeIDsOf(w http.ResponseWriter, r *http.Request, name string) {
	start := s.clk.Mono()
	st, _ := s.serveIDs(w, r, name, "snowflake")
	s.metrics.observe(routeSnowflake, st, s.clk.Mono()-start)
}

// countAndKey is the start of every ID-issuing request: method, count (at
// most max) and the key called name. On success the key is read-locked (the caller unlocks it) and st is
// 0; otherwise the error is written and st is its status.
//
// With held non-nil, the answer's estimated size is reserved in the answer
// budget before the key is locked (a wait for the budget never holds the
// key): *held is what was reserved, and the caller releases it.
func (s *Server) countAndKey(w http.ResponseWriter, r *http.Request, name string, max int, held *int64) (n int, k *Key, st int) {
	if !s.MethodOK(w, r, http.MethodGet, http.MethodPost) {
		return 0, nil, http.StatusMethodNotAllowed
	}
	limit := "max_count"
	if max != s.cfg.MaxCount {
		limit = "the most one range may hold"
	}
	n, err := parseCount(r.URL.RawQuery, max, limit)
	if err != nil {
		s.WriteError(w, ErrorAnswer{Status: http.StatusBadRequest, Code: CodeBadCount, Field: "count", Message: err.Error()})
		return 0, nil, http.StatusBadRequest
	}
	if v, ok, e := bodyCount(r, s.cfg.MaxBodyBytes); e != nil {
		s.WriteError(w, *e)
		return 0, nil, e.Status
	} else if ok {
		if strings.Contains(r.URL.RawQuery, "count=") {
			s.WriteError(w, ErrorAnswer{Status: http.StatusBadRequest, Code: CodeBadCount, Field: "count",
				Message: "count is given both in the query and in the body; give it once"})
			return 0, nil, http.StatusBadRequest
		}
		if n, err = countValue(v, max, limit); err != nil {
			s.WriteError(w, ErrorAnswer{Status: http.StatusBadRequest, Code: CodeBadCount, Field: "count", Message: err.Error()})
			return 0, nil, http.StatusBadRequest
		}
	}
	if held != nil && r.Method != http.MethodHead {
		h, ok := s.HoldAnswer(r.Context(), name, n)
		if !ok {
			e := s.BudgetRefusal()
			s.WriteError(w, e)
			return 0, nil, e.Status
		}
		*held = h
	}
	k, st = s.acquire(w, r, name)
	if st == 0 {
		// After the key's token check, so a token put in the query
		// string is refused as a missing token, not as a stray parameter.
		if p := unknownParam(r.URL.RawQuery); p != "" {
			k.mu.RUnlock()
			s.WriteError(w, ErrorAnswer{Status: http.StatusBadRequest, Code: CodeBadParam, Field: wire.Trunc(p),
				Message: fmt.Sprintf("unknown query parameter %q: this route reads only count", wire.Trunc(p))})
			return 0, nil, http.StatusBadRequest
		}
	}
	if st == 0 && r.Method == http.MethodHead {
		// HEAD answers what GET would, headers only, and never
		// consumes an ID.
		k.mu.RUnlock()
		h := w.Header()
		h["Content-Type"] = jsonType
		h["Cache-Control"] = wire.NoStore
		w.WriteHeader(http.StatusOK)
		return 0, nil, http.StatusOK
	}
	return n, k, st
}

// serveIDs answers a batch of IDs and returns the status and the key
// the request found (nil if none).
func (s *Server) serveIDs(w http.ResponseWriter, r *http.Request, name, strategy string) (int, *Key) {
	var held int64
	defer func() { s.budget.release(held) }()
	n, k, st := s.countAndKey(w, r, name, s.cfg.MaxCount, &held)
	if st != 0 {
		return st, k
	}
	// k.mu is held while the issuer runs, never while the answer is
	// written: a client that does not read would otherwise hold it, and
	// with it a DELETE of the key and all key administration behind it.
	if strategy != "" && k.cfg.Strategy != strategy {
		k.mu.RUnlock()
		s.WriteError(w, ErrorAnswer{Status: http.StatusBadRequest, Code: CodeUnsupported, Field: "key", Message: "key " + strconv.Quote(k.name) + " uses strategy " + strconv.Quote(k.cfg.Strategy) + ", not " + strconv.Quote(strategy)})
		return http.StatusBadRequest, k
	}
	bp := bytePool.Get().(*[]byte)
	b := (*bp)[:0]
	if held > maxPooledAnswer {
		// Sized once from the reservation: growing by doubling made
		// twice the answer in garbage.
		c := held
		if k.strs != nil {
			c /= 2 // half of it is the strings
		}
		b = make([]byte, 0, c)
	}
	b = append(b, `{"key":`...)
	b = wire.AppendJSONString(b, k.name)
	b = append(b, `,"strategy":`...)
	b = wire.AppendJSONString(b, k.cfg.Strategy)
	b = append(b, `,"ids":[`...)
	if k.ints != nil {
		ip := getInts(n)
		err := k.ints.NextInt64s(r.Context(), *ip)
		k.mu.RUnlock()
		if err != nil {
			int64Pool.Put(ip)
			bytePool.Put(bp)
			return s.fail(w, r, k, err), k
		}
		for i, id := range *ip {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = strconv.AppendInt(b, id, 10)
			b = append(b, '"')
		}
		int64Pool.Put(ip)
	} else {
		ss := make([]string, n)
		err := k.strs.NextStrings(r.Context(), ss)
		k.mu.RUnlock()
		if err != nil {
			bytePool.Put(bp)
			return s.fail(w, r, k, err), k
		}
		for i, id := range ss {
			if i > 0 {
				b = append(b, ',')
			}
			b = wire.AppendJSONString(b, id)
		}
	}
	b = append(b, "]}\n"...)
	k.issued.Add(float64(n))
	w.Header()["Content-Type"] = jsonType // Cache-Control: canonical set it
	if held != 0 {
		size := int64(len(b))
		if k.strs != nil {
			size += size + 16*int64(n) // the strings, besides their JSON
		}
		k.noteAnswer(n, size)
		held = s.settle(held, size)
		// A client that does not read this answer loses its connection
		// after answer_timeout, and the budget gets the bytes back.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.answerTimeout()))
	}
	w.Write(b)
	// A large buffer goes back to the heap, not the pool: the pool would
	// keep answers the budget has already given back (2,000 answers of
	// 10,000 UUIDs each, 390 KB apiece, are what the budget is for).
	if cap(b) <= maxPooledAnswer {
		*bp = b
		bytePool.Put(bp)
	}
	return http.StatusOK, k
}

var jsonType = []string{"application/json"}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, k *Key, err error) int {
	e := s.IssuerRefused(r.Context(), k, err)
	s.WriteError(w, e)
	return e.Status
}

// MaxRangeCount is the most IDs a range request may ask for when max_count
// is lower: a range's answer is two numbers whatever its size, so max_count,
// which bounds answers, need not bound it. It stays within every ranger's
// own limit (monotonic.MaxCount); a segment range also ends with its
// segment.
const MaxRangeCount = 1_000_000

// RangeMax is the largest count a range request may ask for.
func (s *Server) RangeMax() int { return max(s.cfg.MaxCount, MaxRangeCount) }

// rangeIDs serves GET /v1/keys/{key}/range?count=N: a contiguous block of
// up to N IDs, {"first","last","count"}; count may be less than N where a
// segment ends.
func (s *Server) rangeIDs(w http.ResponseWriter, r *http.Request) {
	s.rangeOf(w, r, r.PathValue("key"))
}

func (s *Server) rangeOf(w http.ResponseWriter, r *http.Request, name string) {
	start := s.clk.Mono()
	st, k := s.serveRange(w, r, name)
	s.observeKey(routeRange, name, k, st, s.clk.Mono()-start)
}

// serveRange answers a range and returns the status and the key the
// request found (nil if none).
func (s *Server) serveRange(w http.ResponseWriter, r *http.Request, name string) (int, *Key) {
	n, k, st := s.countAndKey(w, r, name, s.RangeMax(), nil)
	if st != 0 {
		return st, k
	}
	if k.ranger == nil {
		k.mu.RUnlock()
		s.WriteError(w, ErrorAnswer{Status: http.StatusBadRequest, Code: CodeUnsupported, Field: "key", Message: "key " + strconv.Quote(k.name) + " (strategy " + strconv.Quote(k.cfg.Strategy) + ") does not hand out contiguous ranges; use /v1/keys/{key}/ids"})
		return http.StatusBadRequest, k
	}
	first, got, err := k.ranger.NextRange(r.Context(), int64(n))
	k.mu.RUnlock() // before writing: see serveIDs
	if err != nil {
		return s.fail(w, r, k, err), k
	}
	k.issued.Add(float64(got))
	b := make([]byte, 0, 160)
	b = append(b, `{"key":`...)
	b = wire.AppendJSONString(b, k.name)
	b = append(b, `,"first":"`...)
	b = strconv.AppendInt(b, first, 10)
	b = append(b, `","last":"`...)
	b = strconv.AppendInt(b, first+got-1, 10)
	b = append(b, `","count":`...)
	b = strconv.AppendInt(b, got, 10)
	b = append(b, "}\n"...)
	w.Header()["Content-Type"] = jsonType // Cache-Control: canonical set it
	w.Write(b)
	return http.StatusOK, k
}

// decodedJSON is the /v1/decode answer, the object `idmint decode --json`
// prints too.
type decodedJSON = idparts.Answer

// decode serves GET /v1/decode/{id}?layout=NAME or ?key=KEY.
func (s *Server) decode(w http.ResponseWriter, r *http.Request) {
	start := s.clk.Mono()
	st := s.serveDecode(w, r)
	s.metrics.observe(routeDecode, st, s.clk.Mono()-start)
}

func (s *Server) serveDecode(w http.ResponseWriter, r *http.Request) int {
	if !s.MethodOK(w, r, http.MethodGet) {
		return http.StatusMethodNotAllowed
	}
	id := r.PathValue("id")
	layout, hasLayout, err1 := wire.QueryValue(r.URL.RawQuery, "layout")
	keyName, hasKey, err2 := wire.QueryValue(r.URL.RawQuery, "key")
	if err := errors.Join(err1, err2); err != nil {
		s.WriteError(w, ErrorAnswer{Status: http.StatusBadRequest, Code: CodeBadLayout, Field: "layout", Message: err.Error()})
		return http.StatusBadRequest
	}
	var dec func(string) (Decoded, error)
	switch {
	case hasLayout && hasKey:
		s.WriteError(w, ErrorAnswer{Status: http.StatusBadRequest, Code: CodeBadLayout, Field: "layout", Message: "give layout or key, not both"})
		return http.StatusBadRequest
	case hasLayout:
		l, err := lookupLayout(s.reg, s.cfg, layout)
		if err != nil {
			s.WriteError(w, ErrorAnswer{Status: http.StatusBadRequest, Code: CodeBadLayout, Field: "layout", Message: err.Error() + "; known: " + joinNames(s.reg.Layouts())})
			return http.StatusBadRequest
		}
		dec = l.Decode
	default:
		if !hasKey {
			keyName = s.cfg.LeafSnowflakeKey
			if keyName == "" {
				// Without a default snowflake key there is nothing to
				// decode by; say what to pass, not "bad key name".
				s.WriteError(w, ErrorAnswer{Status: http.StatusBadRequest, Code: CodeBadLayout, Field: "layout",
					Message: "missing: pass layout=NAME (" + joinNames(s.reg.Layouts()) + ") or key=KEY; this server has no snowflake key to default to (leaf_snowflake_key)"})
				return http.StatusBadRequest
			}
		}
		k, st := s.acquire(w, r, keyName)
		if st != 0 {
			return st
		}
		d := k.dec
		k.mu.RUnlock()
		if d == nil {
			s.WriteError(w, ErrorAnswer{Status: http.StatusBadRequest, Code: CodeUnsupported, Field: "key", Message: "key " + strconv.Quote(keyName) + " has no decoder; pass layout="})
			return http.StatusBadRequest
		}
		dec = d.Decode
	}
	p, err := dec(id)
	if err != nil {
		s.WriteError(w, ErrorAnswer{Status: http.StatusBadRequest, Code: CodeBadID, Field: "id", Message: err.Error()})
		return http.StatusBadRequest
	}
	// The answer is built by idparts, as `idmint decode --json` builds it.
	s.WriteJSON(w, http.StatusOK, idparts.Parts(p).Answer(id))
	return http.StatusOK
}

func joinNames(ns []string) string {
	out := ""
	for i, n := range ns {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}

// WriteJSON answers status with v as JSON, as the native API does.
func (s *Server) WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		s.WriteError(w, ErrorAnswer{Status: http.StatusInternalServerError, Code: "internal", Message: "encode answer: " + err.Error()})
		return
	}
	h := w.Header()
	h["Content-Type"] = jsonType
	h["Cache-Control"] = wire.NoStore
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if !s.MethodOK(w, r, http.MethodGet) {
		return
	}
	w.Header()["Content-Type"] = jsonType
	w.Write([]byte("{\"status\":\"ok\"}\n"))
	s.metrics.observe(routeHealth, http.StatusOK, 0)
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if !s.MethodOK(w, r, http.MethodGet) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	err := s.readyErr(ctx)
	if errors.Is(err, errDraining) {
		s.writeDraining(w)
		s.metrics.observe(routeReady, http.StatusServiceUnavailable, 0)
		return
	}
	if err != nil {
		// The answer names no path, URL or address (WriteError scrubs a
		// 503); the log has the whole cause, at most every
		// RefusalLogEvery.
		if now, next := int64(s.clk.Mono()), s.readyLogNext.Load(); now >= next && s.readyLogNext.CompareAndSwap(next, now+int64(RefusalLogEvery)) {
			s.log.Warn("not ready", "err", err)
		}
		s.WriteError(w, ErrorAnswer{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "not ready: " + err.Error(), RetryAfter: time.Second})
		s.metrics.observe(routeReady, http.StatusServiceUnavailable, 0)
		return
	}
	w.Header()["Content-Type"] = jsonType
	w.Write([]byte("{\"status\":\"ready\"}\n"))
	s.metrics.observe(routeReady, http.StatusOK, 0)
}
