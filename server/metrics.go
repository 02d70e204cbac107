package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/idmint/idmint/internal/buildinfo"
)

// Route names label request metrics (never the raw path: key names would
// blow up the series count).
// A surface outside the core names its routes with Server.Route.
const (
	routeIDs = iota
	routeRange
	routeSnowflake
	routeDecode
	routeHealth
	routeReady
	routeOther
	numRoutes
)

var routeNames = [numRoutes]string{
	"ids", "range", "snowflake", "decode", "healthz", "readyz", "other",
}

type metrics struct {
	reg      *prometheus.Registry
	issued   *prometheus.CounterVec
	hist     *prometheus.HistogramVec
	requests *prometheus.CounterVec
	routes   [numRoutes]*Route

	budgetRefused prometheus.Counter // answers refused for a spent answer budget
	stalledClosed prometheus.Counter // connections closed for not reading an answer
	abandoned     prometheus.Counter // requests whose client gave up (499)
}

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.issued = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "idmint_ids_issued_total",
		Help: "IDs handed out, by key and strategy.",
	}, []string{"key", "strategy"})
	m.hist = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "idmint_http_request_duration_seconds",
		Help:    "Time from routing a request to writing its response, by route.",
		Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .1, .5, 1},
	}, []string{"route"})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "idmint_http_requests_total",
		Help: "HTTP requests answered, by route and status class (2xx, 4xx, 5xx).",
	}, []string{"route", "code"})
	for i, n := range routeNames {
		m.routes[i] = m.route(n)
	}
	m.budgetRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "idmint_answer_budget_refused_total",
		Help: "Requests refused (503) because answer_budget bytes of answers were waiting for clients to read them.",
	})
	m.stalledClosed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "idmint_answer_stalled_connections_total",
		Help: "Connections closed because their client read none of an answer for answer_timeout.",
	})
	m.abandoned = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "idmint_requests_abandoned_total",
		Help: "Requests whose client gave up (closed the connection, cancelled the call) while the issuer worked on them: answered 499 (gRPC CANCELLED) and not counted as refusals.",
	})
	budgetInUse := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "idmint_answer_budget_bytes",
		Help: "Bytes of answers held for clients that have not read them yet (at most answer_budget, plus answers of at most 1 KiB).",
	}, func() float64 { return float64(s.budget.inUse()) })
	if r := s.cfg.RegionSpec(); r.Name != "" {
		info := prometheus.NewGauge(prometheus.GaugeOpts{
			Name:        "idmint_region_info",
			Help:        "1: the region this node belongs to, its index and the number of regions the ID space is split among.",
			ConstLabels: prometheus.Labels{"region": r.Name, "index": strconv.Itoa(r.Index), "count": strconv.Itoa(r.Count)},
		})
		info.Set(1)
		m.reg.MustRegister(info)
	}
	m.reg.MustRegister(m.issued, m.hist, m.requests, &statsCollector{s}, m.budgetRefused, m.stalledClosed, m.abandoned, budgetInUse, buildInfoGauge(),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// startFindings exports the start-up checks' findings: one series per
// check and severity, its value the number of findings (no series: none).
func (m *metrics) startFindings(fs []StartFinding) {
	if len(fs) == 0 {
		return
	}
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "idmint_doctor_findings",
		Help: "Findings of the checks the node ran at start (idmint doctor's cheap checks), by check and severity; logged once at start.",
	}, []string{"check", "severity"})
	for _, f := range fs {
		g.WithLabelValues(f.Check, f.Severity).Add(float64(f.Count))
	}
	m.reg.MustRegister(g)
}

// buildInfoGauge is idmint_build_info, 1 with the build's identity in its
// labels, so that during a rolling upgrade a query tells which node runs
// which build.
func buildInfoGauge() prometheus.Collector {
	in := buildinfo.Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "idmint_build_info",
		Help:        "1; the labels say which build this node runs (version, full commit hash or unknown, Go version).",
		ConstLabels: prometheus.Labels{"version": in.Version, "commit": in.Commit, "goversion": in.GoVersion},
	})
	g.Set(1)
	return g
}

// Route counts the requests of one route: their latency and their answers
// by status class. Its series exist from the start, at zero.
type Route struct {
	latency prometheus.Observer
	byCode  [6]prometheus.Counter // by status class 1xx..5xx
}

func (m *metrics) route(name string) *Route {
	r := &Route{latency: m.hist.WithLabelValues(name)}
	for c := 1; c <= 5; c++ {
		r.byCode[c] = m.requests.WithLabelValues(name, string(rune('0'+c))+"xx")
	}
	return r
}

// Observe counts one answer of the route: its status and how long it took.
func (r *Route) Observe(status int, d time.Duration) {
	r.latency.Observe(d.Seconds())
	c := status / 100
	if c < 1 || c > 5 {
		c = 5
	}
	r.byCode[c].Inc()
}

func (m *metrics) observe(route, status int, d time.Duration) {
	m.routes[route].Observe(status, d)
}

// observeKey is observe for a request on the key called name, except that
// requests on a key that hides its volume (order numbers) are not
// counted at all: idmint_http_requests_total and the latency histogram's
// count would otherwise rise by exactly the number of order numbers
// issued one at a time.
//
// k is the key the request found, when it got that far; only otherwise is
// name looked up again.
func (s *Server) observeKey(route int, name string, k *Key, status int, d time.Duration) {
	if k == nil {
		k = s.Lookup(name)
	}
	if k != nil && k.hides {
		return
	}
	s.metrics.observe(route, status, d)
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// statsCollector turns the Stats of every key's issuer and every shared
// resource into const metrics at scrape time, plus the lease/ready state.
type statsCollector struct{ s *Server }

// metricsStoreTimeout bounds the store round trips of one scrape (the
// readiness checks behind idmint_ready).
const metricsStoreTimeout = 2 * time.Second

var (
	descKeys  = prometheus.NewDesc("idmint_keys", "Keys served.", nil, nil)
	descReady = prometheus.NewDesc("idmint_ready", "1 when every key and shared resource is ready (what /readyz reports).", nil, nil)
)

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	// Unchecked collector: the stat names depend on the strategies served.
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	t := c.s.Table()
	ch <- prometheus.MustNewConstMetric(descKeys, prometheus.GaugeValue, float64(len(t)))
	ready := 0.0
	// A scrape never waits on a hung store past the deadline.
	ctx, cancel := context.WithTimeout(context.Background(), metricsStoreTimeout)
	defer cancel()
	if c.s.readyErr(ctx) == nil {
		ready = 1
	}
	ch <- prometheus.MustNewConstMetric(descReady, prometheus.GaugeValue, ready)
	descs := map[string]*prometheus.Desc{}
	public := c.s.cfg.MetricsPublic() // a public client may read this scrape
	emit := func(st Stat, labels []string, values ...string) {
		if st.Volume && public {
			return
		}
		name := "idmint_" + sanitizeMetricName(st.Name)
		id := name + "|" + strings.Join(labels, ",")
		d, ok := descs[id]
		if !ok {
			d = prometheus.NewDesc(name, st.Help, labels, nil)
			descs[id] = d
		}
		vt := prometheus.GaugeValue
		if st.Counter {
			vt = prometheus.CounterValue
		}
		if m, err := prometheus.NewConstMetric(d, vt, st.Value, values...); err == nil {
			ch <- m
		}
	}
	for _, name := range sortedKeys(t) {
		k := t[name]
		if sr, ok := k.issuer.(StatsReporter); ok {
			for _, st := range sr.Stats() {
				emit(st, []string{"key", "strategy"}, k.name, k.cfg.Strategy)
			}
		}
	}
	for _, r := range c.s.env.Resources() {
		if sr, ok := r.Resource.(StatsReporter); ok {
			for _, st := range sr.Stats() {
				emit(st, []string{"resource"}, r.Name)
			}
		}
	}
}

func sanitizeMetricName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= '0' && c <= '9' && i > 0) {
			b[i] = '_'
		}
	}
	return string(b)
}
