package server

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/idmint/idmint/server/internal/wire"
)

// The dashboard (/ui) is a static page, embedded in the binary (no CDN: it
// works offline), that polls /ui/api/state. The page and its assets hold
// no data and are served to anyone who reaches the listener; the state,
// like /v1/keys, only to admin clients (the admin token, or loopback when
// none is configured). Admin actions from the page go to /v1/keys with
// the token the user types in.

//go:embed ui
var uiEmbedded embed.FS

// uiAssets are the files under ui/, served at /ui/<name>.
var uiAssets = func() fs.FS {
	sub, err := fs.Sub(uiEmbedded, "ui")
	if err != nil {
		return uiEmbedded // unreachable: "ui" is embedded above
	}
	return sub
}()

const (
	// UIErrorsKept is how many recent refusals the dashboard lists.
	UIErrorsKept = 50
	// UISampleEvery is the least time between two samples of a key's
	// issued count (the rate chart's resolution).
	UISampleEvery = 5 * time.Second
	// UISamplesKept is how many samples of each key are kept: 6 minutes
	// at UISampleEvery.
	UISamplesKept = 72
	// uiRefusalEvery is how often, at most, one key's refusals enter the
	// recent-errors list; refusals in between are counted on the next
	// entry.
	uiRefusalEvery = time.Second
	// uiErrorLen bounds an error message kept for the dashboard.
	uiErrorLen = 300
)

// uiState is what the dashboard needs that the server does not otherwise
// keep: recent refusals and the history of each key's issued count. Its
// lock is never held across I/O.
type uiState struct {
	mu      sync.Mutex
	errs    [UIErrorsKept]UIError // ring; next is the slot written next
	next    int
	nerrs   int
	samples map[string]*uiRing
	sampled time.Duration // Mono of the last sample
	any     bool          // a sample was taken
}

// uiRing is one key's issued-count samples, oldest first once unrolled.
// s grows with the samples up to UISamplesKept: a fixed array was 1.2 KB
// per key from the first sample, a third of a starting server's heap
// with 10,000 keys.
type uiRing struct {
	s    [][2]int64 // [unix ms, issued]
	next int
	n    int
}

func (r *uiRing) add(t, v int64) {
	if len(r.s) < UISamplesKept {
		r.s = append(r.s, [2]int64{t, v})
		r.next = len(r.s) % UISamplesKept
		r.n = len(r.s)
		return
	}
	r.s[r.next] = [2]int64{t, v}
	r.next = (r.next + 1) % len(r.s)
}

func (r *uiRing) list() [][2]int64 {
	out := make([][2]int64, 0, r.n)
	for i := range r.n {
		out = append(out, r.s[(r.next-r.n+i+len(r.s))%len(r.s)])
	}
	return out
}

// UIError is one refusal in the dashboard's recent-errors list.
type UIError struct {
	Time     time.Time `json:"time"`
	Key      string    `json:"key"`
	Strategy string    `json:"strategy"`
	Code     string    `json:"code"`
	Error    string    `json:"error"`
	// Count is how many refusals of the key this entry stands for: this
	// one and those since the key's previous entry.
	Count int64 `json:"count"`
}

// noteRefusal records k's refusal for the dashboard, at most once per
// uiRefusalEvery per key (lock-free until then: refusals come at request
// rate while a store is down).
func (s *Server) noteRefusal(k *Key, err error) {
	now := int64(s.clk.Mono())
	next := k.refusals.uiNext.Load()
	if now < next || !k.refusals.uiNext.CompareAndSwap(next, now+int64(uiRefusalEvery)) {
		k.refusals.uiSuppressed.Add(1)
		return
	}
	e := UIError{Time: s.clk.Now().UTC(), Key: k.name, Strategy: k.cfg.Strategy,
		Code: issuerError(err, k.name).code, Error: err.Error(), Count: 1 + k.refusals.uiSuppressed.Swap(0)}
	if len(e.Error) > uiErrorLen {
		e.Error = strings.ToValidUTF8(e.Error[:uiErrorLen], "") + "…"
	}
	u := &s.ui
	u.mu.Lock()
	u.errs[u.next] = e
	u.next = (u.next + 1) % len(u.errs)
	u.nerrs = min(u.nerrs+1, len(u.errs))
	u.mu.Unlock()
}

// recentErrors returns the recorded refusals, newest first.
func (u *uiState) recentErrors() []UIError {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]UIError, 0, u.nerrs)
	for i := 1; i <= u.nerrs; i++ {
		out = append(out, u.errs[(u.next-i+len(u.errs))%len(u.errs)])
	}
	return out
}

// history records the issued counts when UISampleEvery has passed since
// the last sample, drops the rings of keys no longer served (served
// reports whether a key still is), and returns the samples of the keys in
// issued. Serve samples every key in the background from start-up
// (sampleUI), so the first view of the dashboard already has minutes of
// rates; a poll samples too, for servers driven through Handler alone.
func (u *uiState) history(mono time.Duration, nowMs int64, issued map[string]int64, served func(string) bool) map[string][][2]int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.samples == nil {
		u.samples = map[string]*uiRing{}
	}
	take := !u.any || mono-u.sampled >= UISampleEvery
	if take {
		u.sampled, u.any = mono, true
	}
	for name := range u.samples {
		if !served(name) {
			delete(u.samples, name)
		}
	}
	out := make(map[string][][2]int64, len(issued))
	for name, v := range issued {
		r := u.samples[name]
		if r == nil {
			r = &uiRing{}
			u.samples[name] = r
			r.add(nowMs, v) // a new key starts its chart now
		} else if take {
			r.add(nowMs, v)
		}
		out[name] = r.list()
	}
	return out
}

// UIState is the answer of GET /ui/api/state.
type UIState struct {
	Now       time.Time    `json:"now"`
	Keys      []UIKey      `json:"keys"`
	Resources []UIResource `json:"resources"`
	Errors    []UIError    `json:"errors"`
	// SampleEvery is UISampleEvery in milliseconds.
	SampleEvery int64 `json:"sample_every_ms"`
	// SamplesKept is UISamplesKept: the chart's window is SampleEvery
	// times SamplesKept.
	SamplesKept int `json:"samples_kept"`
	// Strategies are the strategy names a new key may use.
	Strategies []string `json:"strategies"`
	// KeysTotal counts every key; KeysMatched those whose name holds
	// Filter. Keys holds the first Limit of those, by name: with 10,000
	// keys one poll every 2 s was a 750 KB answer and a goroutine per key.
	KeysTotal   int    `json:"keys_total"`
	KeysMatched int    `json:"keys_matched"`
	Filter      string `json:"filter"`
	Limit       int    `json:"limit"`
}

// The dashboard's state shows at most UIMaxKeys keys by default, and up to
// UIMaxKeysLimit when a poll asks (?limit=N); ?filter=TEXT keeps the keys
// whose name holds TEXT (case-insensitive, at most 128 bytes).
const (
	UIMaxKeys      = 200
	UIMaxKeysLimit = 2000
	uiMaxFilter    = 128
)

// UIKey is one key on the dashboard: its admin view, how many IDs it has
// issued (with the samples behind the rate chart) and its figures, the
// same as /metrics shows.
type UIKey struct {
	keyView
	Issued  int64      `json:"issued"`
	History [][2]int64 `json:"history"` // [unix ms, issued], oldest first
	// VolumeHidden is set for keys whose IDs exist to hide how many were
	// issued (order numbers): Issued is 0 and History empty for them, as
	// /metrics leaves them out.
	VolumeHidden bool               `json:"volume_hidden,omitempty"`
	Stats        map[string]float64 `json:"stats,omitempty"`
	Segment      *UISegment         `json:"segment,omitempty"`
}

// UISegment is a segment key's double buffer.
type UISegment struct {
	Slots [2]UISlot `json:"slots"`
	// Current is the slot being served.
	Current int `json:"current"`
	// NextReady reports whether the other slot is loaded and waiting.
	NextReady bool `json:"next_ready"`
}

// UISlot is one buffer: the next value, the end (exclusive), the length
// and the fraction left.
type UISlot struct {
	Value int64   `json:"value"`
	Max   int64   `json:"max"`
	Step  int64   `json:"step"`
	Fill  float64 `json:"fill"`
}

// UIResource is a shared resource (a worker lease, a segment store) and
// its figures.
type UIResource struct {
	Name  string             `json:"name"`
	Stats map[string]float64 `json:"stats,omitempty"`
}

func statMap(st []Stat) map[string]float64 {
	if len(st) == 0 {
		return nil
	}
	m := make(map[string]float64, len(st))
	for _, s := range st {
		m[s.Name] = s.Value
	}
	return m
}

// issuedCount reads a key's idmint_ids_issued_total; 0 for a key that
// hides its volume (the one rule: key.hides, which /metrics, the request
// metrics and the dashboard all follow).
func issuedCount(k *Key) int64 {
	var m dto.Metric
	if k.hides || k.issued == nil || k.issued.Write(&m) != nil {
		return 0
	}
	return int64(m.GetCounter().GetValue())
}

// uiRoutes adds the dashboard's routes.
func (s *Server) uiRoutes(mux *http.ServeMux) {
	mux.HandleFunc("/ui", s.uiPage)
	mux.HandleFunc("/ui/", s.uiPage)
	mux.HandleFunc("/ui/api/state", s.uiStateHTTP)
}

// uiPublic reports whether path is one of the dashboard's static files,
// which the admin listener serves without the admin token: a browser
// cannot send it when it loads a page, and the files hold no data.
func uiPublic(path string) bool {
	return path == "/ui" || (strings.HasPrefix(path, "/ui/") && !strings.HasPrefix(path, "/ui/api/"))
}

// uiHeaders are set on every dashboard answer: nothing but the server's
// own files runs or loads, and no other site may frame the page (its
// buttons act with the admin token).
var uiHeaders = map[string][]string{
	"Content-Security-Policy": {"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
	"X-Content-Type-Options":  {"nosniff"},
	"X-Frame-Options":         {"DENY"},
	"Referrer-Policy":         {"no-referrer"},
}

// uiPage serves the embedded page and its assets.
func (s *Server) uiPage(w http.ResponseWriter, r *http.Request) {
	start := s.clk.Mono()
	st := s.serveUIPage(w, r)
	s.metrics.observe(routeUI, st, s.clk.Mono()-start)
}

func (s *Server) serveUIPage(w http.ResponseWriter, r *http.Request) int {
	if !s.methodOK(w, r, http.MethodGet) {
		return http.StatusMethodNotAllowed
	}
	name := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/ui"), "/")
	if name == "" {
		name = "index.html"
	}
	b, err := fs.ReadFile(uiAssets, name)
	if err != nil || strings.HasPrefix(name, "api/") {
		s.writeError(w, apiError{status: http.StatusNotFound, code: CodeNotFound, field: "path", msg: "no such endpoint: " + strconv.Quote(trunc(r.URL.Path))})
		return http.StatusNotFound
	}
	h := w.Header()
	for n, v := range uiHeaders {
		h[n] = v
	}
	h.Set("Content-Type", uiContentType(name))
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(b)
	}
	return http.StatusOK
}

func uiContentType(name string) string {
	switch {
	case strings.HasSuffix(name, ".html"):
		return "text/html; charset=utf-8"
	case strings.HasSuffix(name, ".js"):
		return "text/javascript; charset=utf-8"
	case strings.HasSuffix(name, ".css"):
		return "text/css; charset=utf-8"
	case strings.HasSuffix(name, ".svg"):
		return "image/svg+xml"
	}
	return "application/octet-stream"
}

// uiStateHTTP serves GET /ui/api/state to admin clients.
func (s *Server) uiStateHTTP(w http.ResponseWriter, r *http.Request) {
	start := s.clk.Mono()
	st := s.serveUIState(w, r)
	s.metrics.observe(routeUI, st, s.clk.Mono()-start)
}

func (s *Server) serveUIState(w http.ResponseWriter, r *http.Request) int {
	if !s.methodOK(w, r, http.MethodGet) {
		return http.StatusMethodNotAllowed
	}
	if e := s.adminCheck(r); e != nil {
		s.writeError(w, *e)
		return e.status
	}
	for n, v := range uiHeaders {
		w.Header()[n] = v
	}
	filter, _, err := wire.QueryValue(r.URL.RawQuery, "filter")
	if err == nil && len(filter) > uiMaxFilter {
		err = fmt.Errorf("filter: %d bytes, at most %d", len(filter), uiMaxFilter)
	}
	if err != nil {
		e := apiError{status: http.StatusBadRequest, code: CodeBadPage, field: "filter", msg: err.Error()}
		s.writeError(w, e)
		return e.status
	}
	limit := UIMaxKeys
	if v, ok, err := wire.QueryValue(r.URL.RawQuery, "limit"); err != nil || ok {
		n, perr := strconv.Atoi(v)
		if err != nil || perr != nil || n < 1 || n > UIMaxKeysLimit {
			e := apiError{status: http.StatusBadRequest, code: CodeBadPage, field: "limit", msg: fmt.Sprintf("limit: %q is not a whole number between 1 and %d", trunc(v), UIMaxKeysLimit)}
			s.writeError(w, e)
			return e.status
		}
		limit = n
	}
	s.writeJSON(w, http.StatusOK, s.uiSnapshot(r, filter, limit))
	return http.StatusOK
}

// uiSnapshot gathers the dashboard's state. The views' readiness checks
// (store round trips) run concurrently, each bounded by viewReadyTimeout,
// and no lock is held across them.
func (s *Server) uiSnapshot(r *http.Request, filter string, limit int) UIState {
	t := s.table()
	all := sortedKeys(t)
	names := all
	if filter != "" {
		f := strings.ToLower(filter)
		names = nil
		for _, n := range all {
			if strings.Contains(strings.ToLower(n), f) {
				names = append(names, n)
			}
		}
	}
	matched := len(names)
	names = names[:min(limit, len(names))]
	out := UIState{Now: s.clk.Now().UTC(), Keys: make([]UIKey, len(names)), Errors: s.ui.recentErrors(),
		SampleEvery: UISampleEvery.Milliseconds(), SamplesKept: UISamplesKept, Resources: []UIResource{}, Strategies: s.reg.Strategies(),
		KeysTotal: len(all), KeysMatched: matched, Filter: filter, Limit: limit}
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out.Keys[i] = s.uiKey(r, t[n])
		}()
	}
	wg.Wait()
	issued := make(map[string]int64, len(names))
	for _, k := range out.Keys {
		if !k.VolumeHidden {
			issued[k.Name] = k.Issued
		}
	}
	hist := s.ui.history(s.clk.Mono(), out.Now.UnixMilli(), issued, func(n string) bool { _, ok := t[n]; return ok })
	for i := range out.Keys {
		out.Keys[i].History = hist[out.Keys[i].Name]
	}
	rs := s.env.resources()
	sort.Slice(rs, func(i, j int) bool { return rs[i].name < rs[j].name })
	for _, res := range rs {
		u := UIResource{Name: res.name}
		if sr, ok := res.r.(StatsReporter); ok {
			u.Stats = statMap(sr.Stats())
		}
		out.Resources = append(out.Resources, u)
	}
	return out
}

func (s *Server) uiKey(r *http.Request, k *Key) UIKey {
	ctx, cancel := context.WithTimeout(r.Context(), viewReadyTimeout)
	defer cancel()
	u := UIKey{keyView: s.view(r.WithContext(ctx), k), Issued: issuedCount(k), VolumeHidden: k.hides}
	u.Options = nil // shown on /v1/keys; the dashboard has no use for them
	if sr, ok := k.issuer.(StatsReporter); ok {
		u.Stats = statMap(sr.Stats())
	}
	if c := u.Cache; c != nil {
		u.Segment = &UISegment{Current: c.Pos, NextReady: c.NextReady, Slots: [2]UISlot{
			uiSlot(c.Value0, c.Max0, c.Step0), uiSlot(c.Value1, c.Max1, c.Step1)}}
		u.Cache = nil
	}
	return u
}

func uiSlot(value, max, step int64) UISlot {
	sl := UISlot{Value: value, Max: max, Step: step}
	if step > 0 {
		sl.Fill = float64(max-value) / float64(step)
	}
	return sl
}

// sampleUI records every key's issued count each UISampleEvery until ctx
// ends, so the dashboard's rate charts cover the time since start-up and
// not only the minutes a dashboard was open.
func (s *Server) sampleUI(ctx context.Context) {
	for {
		t := s.table()
		issued := make(map[string]int64, len(t))
		for n, k := range t {
			if !k.hides {
				issued[n] = issuedCount(k)
			}
		}
		s.ui.history(s.clk.Mono(), s.clk.Now().UnixMilli(), issued, func(n string) bool { _, ok := t[n]; return ok })
		if s.clk.Sleep(ctx, UISampleEvery) != nil {
			return
		}
	}
}
