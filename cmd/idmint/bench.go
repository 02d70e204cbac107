package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	v1 "github.com/idmint/idmint/api/idmintv1"
	"github.com/idmint/idmint/client"
	"github.com/idmint/idmint/client/grpctransport"
	"github.com/idmint/idmint/internal/hdr"
	"github.com/idmint/idmint/internal/numfmt"
	"github.com/idmint/idmint/snowflake"
)

func init() {
	register(command{name: "bench", summary: "load a server over HTTP, gRPC or the Go client: rate, latency percentiles, --check, stamp lag", run: runBench})
}

const benchSynopsis = `[--target URL[,URL...]] [--route R[,R...]] [--key K] [--count N] [-c N] [--rate R] [-d D | -n N] [--client] [--floor] [--rounds N] [--metrics URL[,URL...]] [--check] [--stamp LAYOUT] [--json]

Targets: http://HOST:PORT, grpc://HOST:PORT, or floor (a bare net/http
counter server this command starts as a child process: the floor any HTTP
route is held to). With --floor, the floor runs before every route and
after the last, and each route's ratio is to the mean of the two floor runs
beside it.
Several targets: each worker keeps to one (worker i to target i mod count),
or with --client one Go client spreads over all of them. When the targets
say that one of them leads the key (a monotonic key: Idmint-Leader), every
worker sends to that one, as the client does.

Closed loop (default): -c workers, each sends its next request when the last
one answered. Open loop (--rate): requests are due at a fixed rate and timed
from when they were due, so a stall is not hidden (coordinated omission).

It sends traffic only to the targets it is given.`

// benchRun is one line of the final table (and one element of --json).
type benchRun struct {
	Target      string       `json:"target"`
	Route       string       `json:"route"`
	Workers     int          `json:"workers"`
	Rate        float64      `json:"rate,omitempty"` // requests/s; absent: closed loop
	Count       int          `json:"count"`          // IDs per request (client: Next calls per timed op)
	Seconds     float64      `json:"seconds"`
	Requests    int64        `json:"requests"`
	IDs         int64        `json:"ids"`
	Errors      int64        `json:"errors"`
	FirstError  string       `json:"first_error,omitempty"`
	ReqPerSec   float64      `json:"requests_per_second"`
	IDsPerSec   float64      `json:"ids_per_second"`
	LatencyUs   latency      `json:"latency_us"`
	FloorRatio  float64      `json:"floor_ratio,omitempty"` // req/s ÷ the floor's, with --floor
	Check       *checkReport `json:"check,omitempty"`
	StampLagUs  *latency     `json:"stamp_lag_us,omitempty"`
	StampsAhead int64        `json:"stamps_ahead,omitempty"`
	// With --metrics: the CPU the servers (or the floor) used during the run.
	ServerCPU *serverCPU `json:"server_cpu,omitempty"`
	// Leader is the target that leads the key when several were given
	// and one said so: every request went to it.
	Leader string `json:"leader,omitempty"`
}

type serverCPU struct {
	Seconds         float64 `json:"seconds"`
	Cores           float64 `json:"cores"`              // seconds ÷ the run's duration
	MsPerMillionIDs float64 `json:"ms_per_million_ids"` // CPU milliseconds per million IDs
	UsPerRequest    float64 `json:"us_per_request"`     // CPU microseconds per request
}

// benchSummary is one route's figures over --rounds runs.
type benchSummary struct {
	Route         string  `json:"route"`
	Runs          int     `json:"runs"`
	MedianReqPerS float64 `json:"median_requests_per_second"`
	MedianIDsPerS float64 `json:"median_ids_per_second"`
	MedianRatio   float64 `json:"median_floor_ratio,omitempty"`
	MinRatio      float64 `json:"min_floor_ratio,omitempty"`
	MaxRatio      float64 `json:"max_floor_ratio,omitempty"`
	MedianCPUPerM float64 `json:"median_server_cpu_ms_per_million_ids,omitempty"`
}

type latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
}

type checkReport struct {
	IDs          int64 `json:"ids"`
	Duplicates   int64 `json:"duplicates"`
	OrderChecked bool  `json:"order_checked"`
	OutOfOrder   int64 `json:"out_of_order"`
}

func latencyOf(h *hdr.Histogram) latency {
	us := func(v int64) float64 { return math.Round(float64(v)/100) / 10 }
	return latency{P50: us(h.ValueAt(0.5)), P90: us(h.ValueAt(0.9)), P99: us(h.ValueAt(0.99)), P999: us(h.ValueAt(0.999)), Max: us(h.Max())}
}

type benchFlags struct {
	targets  []string
	routes   []string
	key      string
	token    string
	count    int
	workers  int
	rate     float64
	duration time.Duration
	requests int64
	client   bool
	maxCount int
	floor    bool
	check    bool
	stamp    string
	json     bool
	progress bool
	rounds   int
	metrics  []string // --metrics: the servers' /metrics URLs
	adminTok string   // $IDMINT_ADMIN_TOKEN, sent to --metrics

	// What validate parsed, for the runs to use as it is.
	hosts  map[string]string    // HOST:PORT of each target but floor
	byName map[string]httpRoute // each of routes, without --client
	layout snowflake.Layout     // --stamp's layout
}

func runBench(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "bench", benchSynopsis)
	target := fs.String("target", "http://127.0.0.1:8080", "comma-separated http://HOST:PORT, grpc://HOST:PORT, or floor")
	route := fs.String("route", "ids", "comma-separated routes, each run in turn: "+strings.Join(routeNames(), ", ")+" (gRPC: ids, range; --client: ignored)")
	key := fs.String("key", "order", "the key to draw IDs of")
	token := fs.String("token", "", "bearer token (or $IDMINT_TOKEN)")
	count := fs.Int("count", 1, "IDs per request (count=); with --client, Next calls per timed operation")
	workers := fs.Int("c", 16, "workers: connections (HTTP), concurrent calls (gRPC), goroutines (--client)")
	rate := fs.Float64("rate", 0, "requests per second in total, open loop; 0: closed loop")
	dur := fs.Duration("d", 10*time.Second, "how long each run lasts")
	n := fs.Int64("n", 0, "requests per run instead of a duration")
	maxCount := fs.Int("max-count", 0, "with --client: client.Options.MaxCount, the most IDs one request asks for (the servers' max_count; default the client's 10000)")
	useClient := fs.Bool("client", false, "draw IDs through the Go client (client.Next with its adaptive prefetch) from all targets")
	floor := fs.Bool("floor", false, "run the same load against a bare net/http counter server (a child process) before every route and after the last, and report each route's req/s as a fraction of the mean of the two floor runs beside it")
	check := fs.Bool("check", false, "keep every ID: fail on a duplicate, or an ID not above the previous one on the same worker (8 bytes of memory per ID)")
	stamp := fs.String("stamp", "", "decode every ID with this snowflake layout (idmint serve issues leaf) and report how far its stamp lies outside [sent, received]")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	rounds := fs.Int("rounds", 1, "run the routes this many times (with --floor, each between two floor runs) and print each route's median")
	metrics := fs.String("metrics", "", "comma-separated /metrics URLs of the servers under load: report the CPU they used (process_cpu_seconds_total) per million IDs and per request; with --floor, the floor's too")
	cpuProfile := fs.String("cpuprofile", "", "write the load generator's CPU profile to this file (go tool pprof)")
	floorServer := fs.Bool("floor-server", false, "internal: be the floor (print the address, serve until stdin closes)")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *floorServer {
		return serveFloor(e)
	}
	f := benchFlags{key: *key, token: *token, count: *count, workers: *workers, rate: *rate, duration: *dur, requests: *n,
		maxCount: *maxCount, client: *useClient, floor: *floor, check: *check, stamp: *stamp, json: *asJSON, rounds: *rounds}
	if f.token == "" && e.getenv != nil {
		f.token = e.getenv("IDMINT_TOKEN")
	}
	if e.getenv != nil {
		f.adminTok = e.getenv("IDMINT_ADMIN_TOKEN")
	}
	var err error
	if f.metrics, err = parseMetricsURLs(*metrics); err != nil {
		return err
	}
	for _, t := range strings.Split(*target, ",") {
		if t = strings.TrimSpace(t); t != "" {
			f.targets = append(f.targets, t)
		}
	}
	for _, r := range strings.Split(*route, ",") {
		if r = strings.TrimSpace(r); r != "" {
			f.routes = append(f.routes, r)
		}
	}
	if err := f.validate(); err != nil {
		return err
	}
	f.progress = !f.json && isTerminal(e.stderr)
	if *cpuProfile != "" {
		pf, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}

	// With --floor the floor runs before every route and after the last,
	// and each route is held to the mean of the two floor runs beside it:
	// the machine drifts (other load, CPU frequency, the page cache) over a
	// sequence of runs, so one floor run at the start flattered the first
	// route and penalised the last.
	var runs []benchRun
	routes := f.routes
	if f.client || f.onlyFloor() {
		routes = routes[:1]
	}
	floorRun := func() (float64, error) {
		r, err := f.runOne(ctx, e, []string{"floor"}, "floor")
		if err != nil {
			return 0, err
		}
		runs = append(runs, r)
		return r.ReqPerSec, nil
	}
	var before float64
	if f.floor {
		if before, err = floorRun(); err != nil {
			return err
		}
	}
	for round := 0; round < f.rounds && ctx.Err() == nil; round++ {
		for _, rt := range routes {
			if ctx.Err() != nil {
				break
			}
			r, err := f.runOne(ctx, e, f.targets, rt)
			if err != nil {
				return err
			}
			runs = append(runs, r)
			if f.floor && ctx.Err() == nil {
				i := len(runs) - 1
				after, err := floorRun()
				if err != nil {
					return err
				}
				if mean := (before + after) / 2; mean > 0 {
					runs[i].FloorRatio = math.Round(runs[i].ReqPerSec/mean*1000) / 1000
				}
				before = after
			}
		}
	}
	summary := summarize(runs, f.rounds)
	if f.json {
		if err := writeIndentedJSON(e.stdout, struct {
			Runs    []benchRun     `json:"runs"`
			Summary []benchSummary `json:"summary,omitempty"`
		}{runs, summary}); err != nil {
			return err
		}
	} else {
		printBenchTable(e.stdout, runs)
		printSummary(e.stdout, summary)
	}
	for _, r := range runs {
		if c := r.Check; c != nil && (c.Duplicates > 0 || c.OutOfOrder > 0) {
			return fmt.Errorf("check failed on %s %s: %d duplicates, %d IDs out of order in %d", r.Target, r.Route, c.Duplicates, c.OutOfOrder, c.IDs)
		}
		if r.Requests == 0 && r.Errors > 0 {
			return fmt.Errorf("%s %s: every request failed: %s", r.Target, r.Route, r.FirstError)
		}
	}
	return nil
}

func (f *benchFlags) onlyFloor() bool { return len(f.targets) == 1 && f.targets[0] == "floor" }

// validate checks the flags and keeps what it parsed (hosts, byName,
// layout) for the runs.
func (f *benchFlags) validate() error {
	switch {
	case len(f.targets) == 0:
		return usagef("--target: none given; want http://HOST:PORT, grpc://HOST:PORT or floor")
	case f.count < 1:
		return usagef("--count: %d must be at least 1", f.count)
	case f.workers < 1:
		return usagef("-c: %d must be at least 1", f.workers)
	case f.rate < 0 || math.IsNaN(f.rate) || math.IsInf(f.rate, 0):
		return usagef("--rate: %v must be 0 (closed loop) or a positive number of requests per second", f.rate)
	case f.requests < 0:
		return usagef("-n: %d must not be negative", f.requests)
	case f.requests == 0 && f.duration <= 0:
		return usagef("-d: %v must be positive (or give -n)", f.duration)
	case f.maxCount < 0 || f.maxCount > 1_000_000:
		return usagef("--max-count: %d must be between 1 and 1000000 (0: the client's default)", f.maxCount)
	case f.maxCount != 0 && !f.client:
		return usagef("--max-count: %d is a client option; add --client", f.maxCount)
	case len(f.routes) == 0:
		return usagef("--route: none given; want one of %s", strings.Join(routeNames(), ", "))
	case f.rounds < 1 || f.rounds > 100:
		return usagef("--rounds: %d must be between 1 and 100", f.rounds)
	}
	grpcTargets := 0
	f.hosts = map[string]string{}
	for _, t := range f.targets {
		if t == "floor" {
			if len(f.targets) > 1 || f.client {
				return usagef("--target: floor is a target of its own, not with others or --client")
			}
			continue
		}
		u, err := url.Parse(t)
		if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return usagef("--target: %q is not http://HOST:PORT, grpc://HOST:PORT or floor", t)
		}
		switch u.Scheme {
		case "http":
		case "grpc":
			grpcTargets++
		case "https", "grpcs":
			if !f.client {
				return usagef("--target: %q: TLS targets are measured through the Go client (--client)", t)
			}
		default:
			return usagef("--target: %q: scheme %q is not http or grpc", t, u.Scheme)
		}
		f.hosts[t] = u.Host
	}
	if grpcTargets > 0 && grpcTargets < len(f.targets) && !f.client {
		return usagef("--target: mixes HTTP and gRPC targets; give one kind (or use --client)")
	}
	if !f.client {
		f.byName = map[string]httpRoute{}
		for _, r := range f.routes {
			hr, ok := lookupRoute(r)
			if !ok {
				return usagef("--route: %q is not one of %s", r, strings.Join(routeNames(), ", "))
			}
			f.byName[r] = hr
			if grpcTargets > 0 && r != "ids" && r != "range" {
				return usagef("--route: %q is HTTP-only; gRPC serves ids and range", r)
			}
			if !hr.batch && f.count != 1 && grpcTargets == 0 && !f.onlyFloor() {
				return usagef("--count: %d, but route %s issues one ID per request", f.count, r)
			}
		}
	}
	if f.onlyFloor() && (f.check || f.stamp != "") {
		return usagef("--check and --stamp need an idmint target, not floor")
	}
	if f.floor && f.onlyFloor() {
		return usagef("--floor: the target is already floor")
	}
	if f.stamp != "" {
		l, ok := snowflake.Lookup(f.stamp)
		if !ok {
			return usagef("--stamp: no layout called %q (see `idmint layouts`)", f.stamp)
		}
		f.layout = l
	}
	return nil
}

// runOne runs the load once against targets on route.
func (f *benchFlags) runOne(ctx context.Context, e *env, targets []string, route string) (benchRun, error) {
	leader := ""
	if !f.client && targets[0] != "floor" {
		if leader = leaderOf(ctx, targets, f.key, f.token); leader != "" {
			targets = []string{leader}
		}
	}
	ops, label, cleanup, floorCPU, err := f.ops(ctx, targets, route)
	if err != nil {
		return benchRun{}, err
	}
	defer cleanup()
	var cpus []cpuReader
	if len(f.metrics) > 0 {
		if floorCPU != nil {
			cpus = []cpuReader{floorCPU}
		} else {
			for _, u := range f.metrics {
				cpus = append(cpus, metricsCPU(u, f.adminTok))
			}
		}
	}
	var cpu0 float64
	if cpus != nil {
		if cpu0, err = sumCPU(ctx, cpus); err != nil {
			return benchRun{}, err
		}
	}
	count := f.count
	if label == "floor" {
		count = 1 // the floor answers one number
	}
	spec := loadSpec{workers: f.workers, rate: f.rate, duration: f.duration, requests: f.requests, count: count, check: f.check}
	spec.order = f.check && (!f.client || len(targets) == 1)
	if f.stamp != "" {
		l := f.layout
		spec.stamp = func(id int64) (int64, bool) {
			p, err := snowflake.Decode(l, id)
			if err != nil {
				return 0, false
			}
			return p.Time.UnixNano(), true
		}
	}
	var onTick func(progress)
	if f.progress {
		onTick = func(p progress) {
			s := p.at.Seconds()
			fmt.Fprintf(e.stderr, "\r%s %s  %5.1fs  %12s req/s  %14s IDs/s  errors %d  p99 %s   ",
				label, route, s, group(float64(p.reqs)/s), group(float64(p.ids)/s), p.errs, fmtDur(p.p99))
		}
	}
	res := runLoad(ctx, spec, realClock{start: time.Now()}, ops, time.Second, onTick)
	var cpuUsed float64
	if cpus != nil {
		cpu1, err := sumCPU(ctx, cpus)
		if err != nil {
			return benchRun{}, err
		}
		cpuUsed = cpu1 - cpu0
	}
	if f.progress {
		fmt.Fprint(e.stderr, "\r\033[K")
	}
	secs := res.elapsed.Seconds()
	r := benchRun{Target: label, Route: route, Workers: f.workers, Rate: f.rate, Count: count, Seconds: math.Round(secs*1000) / 1000,
		Requests: res.reqs, IDs: res.ids, Errors: res.errs, ReqPerSec: math.Round(float64(res.reqs) / secs), IDsPerSec: math.Round(float64(res.ids) / secs),
		LatencyUs: latencyOf(res.lat), Leader: leader}
	if f.client {
		r.Route = "client.Next"
	}
	if res.firstErr != nil {
		r.FirstError = res.firstErr.Error()
	}
	if cpus != nil {
		r.ServerCPU = cpuFigures(cpuUsed, secs, res.reqs, res.ids)
	}
	if f.check {
		r.Check = &checkReport{IDs: res.checked, Duplicates: res.duplicates, OrderChecked: spec.order, OutOfOrder: res.disorder}
	}
	if res.lag != nil {
		l := latencyOf(res.lag)
		r.StampLagUs, r.StampsAhead = &l, res.ahead
	}
	return r, nil
}

// ops builds one op per worker and says what to call the target; for the
// floor it also returns how to read the floor process's CPU time.
func (f *benchFlags) ops(ctx context.Context, targets []string, route string) ([]op, string, func(), cpuReader, error) {
	ops := make([]op, f.workers)
	if targets[0] == "floor" {
		fl, err := startFloor(ctx)
		if err != nil {
			return nil, "", nil, nil, err
		}
		conns := make([]*httpConn, f.workers)
		for i := range ops {
			conns[i] = newHTTPConn(fl.addr, "/", "")
			ops[i] = httpOp(conns[i], httpRoute{name: "floor", parse: parseBareID}, 1)
		}
		return ops, "floor", func() {
			for _, c := range conns {
				c.close()
			}
			fl.close()
		}, fl.cpu, nil
	}
	label := strings.Join(targets, ",")
	if f.client {
		c, err := client.New(targets, client.Options{Token: f.token, MaxCount: f.maxCount, Dialers: grpctransport.Dialers(grpctransport.Settings{})})
		if err != nil {
			return nil, "", nil, nil, fmt.Errorf("--target: %w", err)
		}
		for i := range ops {
			ops[i] = clientOp(c, f.key, f.count)
		}
		return ops, "client " + label, func() { c.Close() }, nil, nil
	}
	if strings.HasPrefix(targets[0], "grpc://") {
		var ccs []*grpc.ClientConn
		// One connection per 8 workers and target: one HTTP/2 connection
		// serializes its frames on one reader and one writer goroutine.
		perTarget := (f.workers + 7) / 8
		for _, t := range targets {
			for range perTarget {
				cc, err := grpc.NewClient(strings.TrimPrefix(t, "grpc://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					for _, c := range ccs {
						c.Close()
					}
					return nil, "", nil, nil, fmt.Errorf("--target %q: %w", t, err)
				}
				ccs = append(ccs, cc)
			}
		}
		for i := range ops {
			// Worker i keeps to target i mod len(targets), so its IDs come
			// from one server and must increase.
			t := i % len(targets)
			cc := ccs[t*perTarget+(i/len(targets))%perTarget]
			ops[i] = grpcOp(v1.NewIDsClient(cc), f.key, f.token, route, f.count)
		}
		return ops, label, func() {
			for _, c := range ccs {
				c.Close()
			}
		}, nil, nil
	}
	hr, ok := f.byName[route]
	if !ok {
		return nil, "", nil, nil, fmt.Errorf("--route: %q is not among the routes validated", route)
	}
	for _, t := range targets {
		if _, ok := f.hosts[t]; !ok {
			return nil, "", nil, nil, fmt.Errorf("--target: %q is not among the targets validated", t)
		}
	}
	conns := make([]*httpConn, f.workers)
	for i := range ops {
		conns[i] = newHTTPConn(f.hosts[targets[i%len(targets)]], hr.path(url.PathEscape(f.key), f.count), f.token)
		ops[i] = httpOp(conns[i], hr, f.count)
	}
	return ops, label, func() {
		for _, c := range conns {
			c.close()
		}
	}, nil, nil
}

func grpcOp(c v1.IDsClient, key, token, route string, count int) op {
	var buf []int64 // one op per worker: reused across its requests
	return func(ctx context.Context, dst []int64) (int, error) {
		if token != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		}
		if route == "range" {
			r, err := c.NextRange(ctx, &v1.NextRangeRequest{Key: key, Count: uint32(count)})
			if err != nil {
				return 0, err
			}
			if dst == nil {
				return int(r.GetCount()), nil
			}
			if r.GetCount() < 1 || r.GetCount() > int64(len(dst)) {
				return 0, fmt.Errorf("range of %d IDs does not fit the %d asked for", r.GetCount(), len(dst))
			}
			for i := range r.GetCount() {
				dst[i] = r.GetFirst() + i
			}
			return int(r.GetCount()), nil
		}
		r, err := c.NextIDs(ctx, &v1.NextIDsRequest{Key: key, Count: uint32(count), Fixed: true})
		if err != nil {
			return 0, err
		}
		ids, err := r.NumericIDs(buf[:0])
		if err != nil {
			return 0, err
		}
		buf = ids
		if len(ids) != count {
			if len(r.GetTextIds()) > 0 && dst != nil {
				return 0, fmt.Errorf("key %q issues text IDs; --check and --stamp need numeric ones", key)
			}
			if len(r.GetTextIds()) != count {
				return 0, fmt.Errorf("%w: %d of %d", errShort, len(ids)+len(r.GetTextIds()), count)
			}
			return count, nil
		}
		if dst != nil {
			copy(dst, ids)
		}
		return count, nil
	}
}

// clientOp is count calls of client.Next, timed together: a Next from the
// buffer takes a few nanoseconds, less than reading the clock twice.
func clientOp(c *client.Client, key string, count int) op {
	return func(ctx context.Context, dst []int64) (int, error) {
		for i := range count {
			id, err := c.Next(ctx, key)
			if err != nil {
				return i, err
			}
			if dst != nil {
				dst[i] = id
			}
		}
		return count, nil
	}
}

func printBenchTable(w io.Writer, runs []benchRun) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\troute\tworkers\tload\tcount\trequests\treq/s\tIDs/s\terrors\tp50\tp90\tp99\tp99.9\tmax\tvs floor\t")
	for _, r := range runs {
		load := "closed"
		if r.Rate > 0 {
			load = group(r.Rate) + "/s"
		}
		ratio := ""
		if r.FloorRatio > 0 {
			ratio = fmt.Sprintf("%.3f", r.FloorRatio)
		}
		l := r.LatencyUs
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Target, r.Route, r.Workers, load, r.Count,
			group(float64(r.Requests)), group(r.ReqPerSec), group(r.IDsPerSec), r.Errors,
			fmtUs(l.P50), fmtUs(l.P90), fmtUs(l.P99), fmtUs(l.P999), fmtUs(l.Max), ratio)
	}
	tw.Flush()
	for _, r := range runs {
		if r.Leader != "" {
			fmt.Fprintf(w, "%s %s: %s leads the key: every worker sent to it\n", r.Target, r.Route, r.Leader)
		}
		if r.FirstError != "" {
			fmt.Fprintf(w, "%s %s: first error: %s\n", r.Target, r.Route, r.FirstError)
		}
		if c := r.Check; c != nil {
			order := fmt.Sprintf("%d out of order per worker", c.OutOfOrder)
			if !c.OrderChecked {
				order = "order not checked (the client draws ranges from several servers)"
			}
			fmt.Fprintf(w, "check %s: %s IDs, %d duplicates, %s\n", r.Route, group(float64(c.IDs)), c.Duplicates, order)
		}
		if c := r.ServerCPU; c != nil {
			who := "server CPU"
			if r.Target == "floor" {
				who = "floor CPU"
			}
			fmt.Fprintf(w, "%s %s: %.2f s, %.2f cores, %.1f ms per million IDs, %.2f µs per request\n",
				who, r.Route, c.Seconds, c.Cores, c.MsPerMillionIDs, c.UsPerRequest)
		}
		if s := r.StampLagUs; s != nil {
			fmt.Fprintf(w, "stamp lag %s (how far the stamp lies outside [sent, received]; ticks count from their start): p50 %s  p90 %s  p99 %s  p99.9 %s  max %s; stamps ahead of the answer: %d\n",
				r.Route, fmtUs(s.P50), fmtUs(s.P90), fmtUs(s.P99), fmtUs(s.P999), fmtUs(s.Max), r.StampsAhead)
		}
	}
}

// group writes a rounded number with thousands separators.
func group(v float64) string { return numfmt.GroupDecimal(fmt.Sprintf("%.0f", v)) }

func fmtUs(us float64) string { return fmtDur(time.Duration(us * 1000)) }

func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.1fµs", float64(d)/1e3)
	}
}

// isTerminal reports whether w is a character device (a terminal), where
// the live progress line belongs.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// summarize gives each route's medians over its runs when there were
// several rounds.
func summarize(runs []benchRun, rounds int) []benchSummary {
	if rounds < 2 {
		return nil
	}
	var out []benchSummary
	byRoute := map[string]int{}
	var groups [][]benchRun
	for _, r := range runs {
		if r.Target == "floor" {
			continue
		}
		i, ok := byRoute[r.Route]
		if !ok {
			i = len(groups)
			byRoute[r.Route] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], r)
	}
	for _, g := range groups {
		s := benchSummary{Route: g[0].Route, Runs: len(g)}
		var req, ids, ratio, cpu []float64
		for _, r := range g {
			req = append(req, r.ReqPerSec)
			ids = append(ids, r.IDsPerSec)
			if r.FloorRatio > 0 {
				ratio = append(ratio, r.FloorRatio)
			}
			if r.ServerCPU != nil {
				cpu = append(cpu, r.ServerCPU.MsPerMillionIDs)
			}
		}
		s.MedianReqPerS, s.MedianIDsPerS = median(req), median(ids)
		if len(ratio) > 0 {
			s.MedianRatio, s.MinRatio, s.MaxRatio = median(ratio), slices.Min(ratio), slices.Max(ratio)
		}
		if len(cpu) > 0 {
			s.MedianCPUPerM = median(cpu)
		}
		out = append(out, s)
	}
	return out
}

// median of vs (the mean of the middle two for an even count).
func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return math.Round((s[n/2-1]+s[n/2])/2*1000) / 1000
}

func printSummary(w io.Writer, sum []benchSummary) {
	for _, s := range sum {
		fmt.Fprintf(w, "median of %d runs, %s: %s req/s, %s IDs/s", s.Runs, s.Route, group(s.MedianReqPerS), group(s.MedianIDsPerS))
		if s.MedianRatio > 0 {
			fmt.Fprintf(w, ", %.3f of the floor (%.3f-%.3f)", s.MedianRatio, s.MinRatio, s.MaxRatio)
		}
		if s.MedianCPUPerM > 0 {
			fmt.Fprintf(w, ", server CPU %.1f ms per million IDs", s.MedianCPUPerM)
		}
		fmt.Fprintln(w)
	}
}
