// Package dashboard serves idmint's dashboard, a surface beside the
// server's core: the page at /ui and the state it polls at /ui/api/state.
// cmd/idmint adds it to every server it runs
// (server.Options.Surfaces: dashboard.New).
package dashboard

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idmint/idmint/server"
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
	// UISampleEvery is the least time between two samples of a key's
	// issued count (the rate chart's resolution).
	UISampleEvery = 5 * time.Second
	// UISamplesKept is how many samples of each key are kept: 6 minutes
	// at UISampleEvery.
	UISamplesKept = 72
)

// uiState is what the dashboard needs that the server does not otherwise
// keep: the history of each key's issued count. Its lock is never held
// across I/O.
type uiState struct {
	mu      sync.Mutex
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

// history records the issued counts when every has passed since
// the last sample, drops the rings of keys no longer served (served
// reports whether a key still is), and returns the samples of the keys in
// issued. Serve samples every key in the background from start-up
// (sampleUI), so the first view of the dashboard already has minutes of
// rates; a poll samples too, for servers driven through Handler alone.
func (u *uiState) history(every, mono time.Duration, nowMs int64, issued map[string]int64, served func(string) bool) map[string][][2]int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.samples == nil {
		u.samples = map[string]*uiRing{}
	}
	take := !u.any || mono-u.sampled >= every
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
	Now       time.Time        `json:"now"`
	Keys      []UIKey          `json:"keys"`
	Resources []UIResource     `json:"resources"`
	Errors    []server.Refusal `json:"errors"`
	// SampleEvery is the time between samples in milliseconds
	// (UISampleEvery unless Options.SampleEvery says otherwise).
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
	server.KeyView
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

func statMap(st []server.Stat) map[string]float64 {
	if len(st) == 0 {
		return nil
	}
	m := make(map[string]float64, len(st))
	for _, s := range st {
		m[s.Name] = s.Value
	}
	return m
}

// surface is the dashboard over one server.
type surface struct {
	s     *server.Server
	env   *server.Env
	route *server.Route
	ui    uiState
	every time.Duration // the least time between two samples
}

// New builds the dashboard's surface over s (a server.NewSurface), with
// the default Options.
func New(s *server.Server) server.Surface {
	return &surface{s: s, env: s.Env(), route: s.Route("ui"), every: UISampleEvery}
}

// Options configure the dashboard built by NewWith. The zero value is
// New's dashboard.
type Options struct {
	// SampleEvery is the least time between two samples of a key's issued
	// count; 0 means UISampleEvery (5 s). A shorter one fills the charts
	// sooner (the browser test's screenshot takes 13 samples in a few
	// seconds instead of 65 s), at the same UISamplesKept samples.
	SampleEvery time.Duration
}

// NewWith returns a server.NewSurface that builds the dashboard with o.
// A negative SampleEvery is refused.
func NewWith(o Options) (server.NewSurface, error) {
	if o.SampleEvery < 0 {
		return nil, fmt.Errorf("dashboard: SampleEvery %v is negative", o.SampleEvery)
	}
	if o.SampleEvery == 0 {
		o.SampleEvery = UISampleEvery
	}
	return func(s *server.Server) server.Surface {
		return &surface{s: s, env: s.Env(), route: s.Route("ui"), every: o.SampleEvery}
	}, nil
}

// Hot serves nothing: the dashboard has no ID route.
func (s *surface) Hot(http.ResponseWriter, *http.Request, string) bool { return false }

// Routes adds the dashboard's routes.
func (s *surface) Routes(mux *http.ServeMux) {
	page := s.s.Timed(s.route, s.serveUIPage)
	mux.HandleFunc("/ui", page)
	mux.HandleFunc("/ui/", page)
	mux.HandleFunc("/ui/api/state", s.s.Timed(s.route, s.serveUIState))
}

// Public reports whether path is one of the dashboard's static files,
// which the admin listener serves without the admin token: a browser
// cannot send it when it loads a page, and the files hold no data.
func (s *surface) Public(path string) bool {
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

// serveUIPage serves the embedded page and its assets.
func (s *surface) serveUIPage(w http.ResponseWriter, r *http.Request) int {
	if !s.s.MethodOK(w, r, http.MethodGet) {
		return http.StatusMethodNotAllowed
	}
	name := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/ui"), "/")
	if name == "" {
		name = "index.html"
	}
	b, err := fs.ReadFile(uiAssets, name)
	if err != nil || strings.HasPrefix(name, "api/") {
		s.s.WriteError(w, server.ErrorAnswer{Status: http.StatusNotFound, Code: server.CodeNotFound, Field: "path", Message: "no such endpoint: " + strconv.Quote(wire.Trunc(r.URL.Path))})
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

// serveUIState serves GET /ui/api/state to admin clients.
func (s *surface) serveUIState(w http.ResponseWriter, r *http.Request) int {
	if !s.s.MethodOK(w, r, http.MethodGet) {
		return http.StatusMethodNotAllowed
	}
	if st := s.s.CheckAdmin(w, r); st != 0 {
		return st
	}
	for n, v := range uiHeaders {
		w.Header()[n] = v
	}
	filter, _, err := wire.QueryValue(r.URL.RawQuery, "filter")
	if err == nil && len(filter) > uiMaxFilter {
		err = fmt.Errorf("filter: %d bytes, at most %d", len(filter), uiMaxFilter)
	}
	if err != nil {
		s.s.WriteError(w, server.ErrorAnswer{Status: http.StatusBadRequest, Code: server.CodeBadPage, Field: "filter", Message: err.Error()})
		return http.StatusBadRequest
	}
	limit := UIMaxKeys
	if v, ok, err := wire.QueryValue(r.URL.RawQuery, "limit"); err != nil || ok {
		n, perr := strconv.Atoi(v)
		if err != nil || perr != nil || n < 1 || n > UIMaxKeysLimit {
			s.s.WriteError(w, server.ErrorAnswer{Status: http.StatusBadRequest, Code: server.CodeBadPage, Field: "limit", Message: fmt.Sprintf("limit: %q is not a whole number between 1 and %d", wire.Trunc(v), UIMaxKeysLimit)})
			return http.StatusBadRequest
		}
		limit = n
	}
	s.s.WriteJSON(w, http.StatusOK, s.uiSnapshot(r, filter, limit))
	return http.StatusOK
}

// uiSnapshot gathers the dashboard's state. The views' readiness checks
// (store round trips) run concurrently, each bounded by viewReadyTimeout,
// and no lock is held across them.
func (s *surface) uiSnapshot(r *http.Request, filter string, limit int) UIState {
	t := s.s.Table()
	all := slices.Sorted(maps.Keys(t))
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
	out := UIState{Now: s.env.Clock.Now().UTC(), Keys: make([]UIKey, len(names)), Errors: s.s.Refusals(),
		SampleEvery: s.every.Milliseconds(), SamplesKept: UISamplesKept, Resources: []UIResource{}, Strategies: s.env.Registry.Strategies(),
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
	hist := s.ui.history(s.every, s.env.Clock.Mono(), out.Now.UnixMilli(), issued, func(n string) bool { _, ok := t[n]; return ok })
	for i := range out.Keys {
		out.Keys[i].History = hist[out.Keys[i].Name]
	}
	rs := s.env.Resources()
	sort.Slice(rs, func(i, j int) bool { return rs[i].Name < rs[j].Name })
	for _, res := range rs {
		u := UIResource{Name: res.Name}
		if sr, ok := res.Resource.(server.StatsReporter); ok {
			u.Stats = statMap(sr.Stats())
		}
		out.Resources = append(out.Resources, u)
	}
	return out
}

func (s *surface) uiKey(r *http.Request, k *server.Key) UIKey {
	u := UIKey{KeyView: s.s.View(r, k), Issued: k.IssuedTotal(), VolumeHidden: k.HidesVolume()}
	u.Options = nil // shown on /v1/keys; the dashboard has no use for them
	if sr, ok := k.Issuer().(server.StatsReporter); ok {
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

// Run records every key's issued count each sample interval until ctx
// ends, so the dashboard's rate charts cover the time since start-up and
// not only the minutes a dashboard was open (Serve runs it).
func (s *surface) Run(ctx context.Context) {
	for {
		t := s.s.Table()
		issued := make(map[string]int64, len(t))
		for n, k := range t {
			if !k.HidesVolume() {
				issued[n] = k.IssuedTotal()
			}
		}
		s.ui.history(s.every, s.env.Clock.Mono(), s.env.Clock.Now().UnixMilli(), issued, func(n string) bool { _, ok := t[n]; return ok })
		if s.env.Clock.Sleep(ctx, s.every) != nil {
			return
		}
	}
}
