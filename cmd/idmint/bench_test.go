package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	v1 "github.com/idmint/idmint/api/idmintv1"
	"github.com/idmint/idmint/snowflake"
)

// seqServer is a fake idmint that issues the numbers of seq in turn (then
// counts on from the last) on the Leaf route and /v1/keys/{key}/ids.
type seqServer struct {
	mu   sync.Mutex
	seq  []int64
	next int
	last int64
}

func (s *seqServer) take(n int) []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int64, n)
	for i := range out {
		if s.next < len(s.seq) {
			s.last = s.seq[s.next]
			s.next++
		} else {
			s.last++
		}
		out[i] = s.last
	}
	return out
}

func (s *seqServer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/api/segment/get/{key}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, s.take(1)[0])
	})
	mux.HandleFunc("/v1/keys/{key}/ids", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("count"))
		var b strings.Builder
		b.WriteString(`{"key":"order","strategy":"segment","ids":[`)
		for i, id := range s.take(n) {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%q", strconv.FormatInt(id, 10))
		}
		b.WriteString("]}\n")
		w.Write([]byte(b.String())) // over 2 KiB: net/http answers chunked
	})
	return mux
}

type grpcSeq struct {
	v1.UnimplementedIDsServer
	s *seqServer
}

func (g grpcSeq) NextIDs(ctx context.Context, r *v1.NextIDsRequest) (*v1.NextIDsResponse, error) {
	return &v1.NextIDsResponse{Key: r.Key, Strategy: "segment", Ids: g.s.take(int(r.Count))}, nil
}

type benchJSON struct {
	Runs []benchRun `json:"runs"`
}

func decodeBench(t *testing.T, out string) benchJSON {
	t.Helper()
	var r benchJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Runs) == 0 {
		t.Fatalf("bench --json printed %q: %v", out, err)
	}
	return r
}

// --check finds the duplicate and both IDs that do not increase, over
// HTTP (bare and chunked JSON answers) and gRPC, and fails the command.
func TestBenchCheckFindsDuplicateAndDisorder(t *testing.T) {
	// 3 repeats (a duplicate, not above its predecessor), 4 comes after 5.
	seq := []int64{1, 2, 3, 3, 5, 4, 6, 7}
	start := func(t *testing.T, proto string, s *seqServer) string {
		if proto == "grpc" {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			g := grpc.NewServer()
			v1.RegisterIDsServer(g, grpcSeq{s: s})
			go g.Serve(ln)
			t.Cleanup(g.Stop)
			return "grpc://" + ln.Addr().String()
		}
		ts := httptest.NewServer(s.handler())
		t.Cleanup(ts.Close)
		return ts.URL
	}
	for _, c := range []struct {
		name, proto, route string
		count              string
	}{
		{"leaf route", "http", "leaf-segment", "1"},
		{"ids route chunked", "http", "ids", "300"},
		{"grpc", "grpc", "ids", "300"},
	} {
		t.Run(c.name, func(t *testing.T) {
			target := start(t, c.proto, &seqServer{seq: seq})
			code, out, errOut := runCLI(t, "bench", "--target", target, "--route", c.route, "--count", c.count, "-c", "1", "-n", "10", "--check", "--json")
			if code != 1 || !strings.Contains(errOut, "check failed") {
				t.Fatalf("exit %d, stderr %q; want 1 and check failed", code, errOut)
			}
			r := decodeBench(t, out).Runs[0]
			n, _ := strconv.Atoi(c.count)
			if ch := r.Check; ch == nil || ch.IDs != int64(10*n) || ch.Duplicates != 1 || ch.OutOfOrder != 2 || !ch.OrderChecked {
				t.Fatalf("check %+v, want %d IDs, 1 duplicate, 2 out of order (errors %d: %s)", ch, 10*n, r.Errors, r.FirstError)
			}

			// The same server without the fault passes.
			target = start(t, c.proto, &seqServer{})
			code, out, errOut = runCLI(t, "bench", "--target", target, "--route", c.route, "--count", c.count, "-c", "4", "-n", "40", "--check", "--json")
			if code != 0 {
				t.Fatalf("clean server: exit %d, stderr %q", code, errOut)
			}
			if ch := decodeBench(t, out).Runs[0].Check; ch.IDs != int64(40*n) || ch.Duplicates != 0 || ch.OutOfOrder != 0 {
				t.Fatalf("clean server: check %+v", ch)
			}
		})
	}
}

// fakeLoadClock is a clock that only ops move.
type fakeLoadClock struct {
	mu sync.Mutex
	t  time.Duration
}

func (c *fakeLoadClock) since() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}
func (c *fakeLoadClock) sleepUntil(_ context.Context, d time.Duration) {
	c.mu.Lock()
	c.t = max(c.t, d)
	c.mu.Unlock()
}
func (c *fakeLoadClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t += d
	c.mu.Unlock()
}
func (c *fakeLoadClock) wall() int64 { return int64(c.since()) }

// Open loop at 1,000 requests/s, each answered in 0.5 ms, but request 100
// stalls 100 ms. The ~100 requests that fell due during the stall are timed
// from when they were due, so p99 shows the stall; a load generator that
// timed from the send (coordinated omission) would report 0.5 ms.
func TestBenchOpenLoopCorrectsCoordinatedOmission(t *testing.T) {
	clk := &fakeLoadClock{}
	calls := 0
	o := func(ctx context.Context, dst []int64) (int, error) {
		calls++
		if calls == 100 {
			clk.advance(100 * time.Millisecond)
		} else {
			clk.advance(500 * time.Microsecond)
		}
		return 1, nil
	}
	res := runLoad(context.Background(), loadSpec{workers: 1, rate: 1000, requests: 1000, count: 1}, clk, []op{o}, 0, nil)
	if res.reqs != 1000 {
		t.Fatalf("%d requests, want 1000", res.reqs)
	}
	if p50 := time.Duration(res.lat.ValueAt(0.5)); p50 > time.Millisecond {
		t.Errorf("p50 %v, want the 0.5 ms of an unstalled request", p50)
	}
	if p90 := time.Duration(res.lat.ValueAt(0.9)); p90 < 20*time.Millisecond {
		t.Errorf("p90 %v, want ≥ 20 ms: a tenth of the requests were due during the 100 ms stall", p90)
	}
	if mx := time.Duration(res.lat.Max()); mx < 100*time.Millisecond {
		t.Errorf("max %v, want ≥ 100 ms", mx)
	}
	// The run keeps its schedule: 1,000 requests take about 1 s, not 1.1 s.
	if res.elapsed > 1050*time.Millisecond {
		t.Errorf("elapsed %v: the open loop fell behind its schedule for good", res.elapsed)
	}

	// Closed loop on the same clock: -n ends it, every request counts.
	clk2 := &fakeLoadClock{}
	o2 := func(ctx context.Context, dst []int64) (int, error) { clk2.advance(time.Millisecond); return 5, nil }
	res = runLoad(context.Background(), loadSpec{workers: 3, requests: 30, count: 5}, clk2, []op{o2, o2, o2}, 0, nil)
	if res.reqs != 30 || res.ids != 150 {
		t.Errorf("closed loop: %d requests, %d IDs; want 30 and 150", res.reqs, res.ids)
	}
}

// --stamp measures how far a stamp lies before the request: a server whose
// stamps are 50 ms stale shows a lag of ≥ 50 ms, a punctual one below one
// tick, and a stamp from the future counts as ahead.
func TestBenchStampLag(t *testing.T) {
	l, _ := snowflake.Lookup("leaf")
	node := map[string]int64{}
	for _, f := range l.NodeFields() {
		node[f.Name] = 1
	}
	for _, c := range []struct {
		name         string
		skew         time.Duration
		minP99       time.Duration
		maxP99       time.Duration
		ahead, exact bool
	}{
		{name: "stale", skew: -50 * time.Millisecond, minP99: 50 * time.Millisecond, maxP99: 60 * time.Millisecond},
		{name: "punctual", skew: 0, minP99: 0, maxP99: 1100 * time.Microsecond},
		{name: "ahead", skew: 20 * time.Millisecond, minP99: 15 * time.Millisecond, maxP99: 25 * time.Millisecond, ahead: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			seq := int64(0)
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				seq = (seq + 1) % 4096
				id, err := snowflake.Compose(l, snowflake.Parts{Time: time.Now().Add(c.skew), Node: node, Sequence: seq})
				mu.Unlock()
				if err != nil {
					http.Error(w, err.Error(), 500)
					return
				}
				fmt.Fprint(w, id)
			}))
			defer ts.Close()
			code, out, errOut := runCLI(t, "bench", "--target", ts.URL, "--route", "leaf-snowflake", "-c", "2", "-n", "200", "--stamp", "leaf", "--json")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			r := decodeBench(t, out).Runs[0]
			if r.StampLagUs == nil {
				t.Fatalf("no stamp lag in %s", out)
			}
			p99 := time.Duration(r.StampLagUs.P99 * 1000)
			if p99 < c.minP99 || p99 > c.maxP99 {
				t.Errorf("stamp lag p99 %v, want between %v and %v", p99, c.minP99, c.maxP99)
			}
			if (r.StampsAhead > 0) != c.ahead {
				t.Errorf("%d stamps ahead, want ahead=%v", r.StampsAhead, c.ahead)
			}
		})
	}
}

func TestBenchBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--count", "0"}, "--count: 0"},
		{[]string{"-c", "0"}, "-c: 0"},
		{[]string{"--rate", "-1"}, "--rate: -1"},
		{[]string{"--target", "ftp://x:1"}, `scheme "ftp"`},
		{[]string{"--target", "http://a:1,grpc://b:2"}, "mixes HTTP and gRPC"},
		{[]string{"--route", "nope"}, `"nope" is not one of`},
		{[]string{"--route", "leaf-segment", "--count", "5"}, "issues one ID per request"},
		{[]string{"--target", "grpc://a:1", "--route", "leaf-segment"}, "HTTP-only"},
		{[]string{"--stamp", "nolayout"}, `no layout called "nolayout"`},
		{[]string{"--target", "floor", "--check"}, "need an idmint target"},
		{[]string{"-d", "0s"}, "-d: 0s"},
	} {
		code, _, errOut := runCLI(t, append([]string{"bench"}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("bench %v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}

// The floor answers increasing numbers through the lean client, and a
// server that refuses connections is reported, not hung on.
func TestBenchFloorHandlerAndRefusedTarget(t *testing.T) {
	ts := httptest.NewServer(floorHandler())
	defer ts.Close()
	c := newHTTPConn(strings.TrimPrefix(ts.URL, "http://"), "/", "")
	defer c.close()
	o := httpOp(c, httpRoute{name: "floor", parse: parseBareID}, 1)
	dst := make([]int64, 1)
	for want := int64(1); want <= 3; want++ {
		if n, err := o(context.Background(), dst); err != nil || n != 1 || dst[0] != want {
			t.Fatalf("floor answer %d: n=%d id=%d err=%v", want, n, dst[0], err)
		}
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	code, _, errOut := runCLI(t, "bench", "--target", "http://"+addr, "-c", "1", "-n", "3")
	if code != 1 || !strings.Contains(errOut, "every request failed") {
		t.Errorf("refused target: exit %d, stderr %q", code, errOut)
	}
}

// cpuServer is a seqServer whose /metrics reports process CPU seconds that
// rise by step on every scrape.
type cpuServer struct {
	seqServer
	mu    sync.Mutex
	cpu   float64
	step  float64
	plain bool // no process_cpu_seconds_total sample
}

func (c *cpuServer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", c.seqServer.handler())
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		fmt.Fprintln(w, "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.")
		fmt.Fprintln(w, "# TYPE process_cpu_seconds_total counter")
		fmt.Fprintln(w, "process_cpu_seconds_total_other 99")
		if !c.plain {
			fmt.Fprintf(w, "process_cpu_seconds_total %g\n", c.cpu)
		}
		c.cpu += c.step
	})
	return mux
}

// --metrics reports the server CPU a run used, from the servers' /metrics
// before and after it, per million IDs and per request; a bad URL, or a
// server without the sample, is an error naming --metrics.
func TestBenchServerCPU(t *testing.T) {
	srv := &cpuServer{cpu: 1.5, step: 2}
	ts := httptest.NewServer(srv.handler())
	defer ts.Close()
	code, out, errOut := runCLI(t, "bench", "--target", ts.URL, "--route", "ids", "--count", "10", "-c", "2", "-n", "100",
		"--metrics", ts.URL+"/metrics", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	r := decodeBench(t, out).Runs[0]
	c := r.ServerCPU
	if c == nil || c.Seconds != 2 || r.IDs != 1000 || r.Requests != 100 {
		t.Fatalf("run %+v, cpu %+v; want 2 s over 100 requests of 10", r, c)
	}
	if c.MsPerMillionIDs != 2e6 || c.UsPerRequest != 2e4 {
		t.Fatalf("cpu %+v: want 2,000,000 ms per million IDs and 20,000 µs per request", c)
	}
	code, out, _ = runCLI(t, "bench", "--target", ts.URL, "--route", "ids", "--count", "10", "-c", "1", "-n", "10",
		"--metrics", ts.URL+"/metrics")
	if code != 0 || !strings.Contains(out, "server CPU ids: 2.00 s") {
		t.Fatalf("table: exit %d, %q", code, out)
	}

	srv.plain = true
	code, _, errOut = runCLI(t, "bench", "--target", ts.URL, "--route", "ids", "-n", "5", "--metrics", ts.URL+"/metrics")
	if code != 1 || !strings.Contains(errOut, "--metrics "+ts.URL+"/metrics: no process_cpu_seconds_total") {
		t.Fatalf("no sample: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runCLI(t, "bench", "--target", ts.URL, "-n", "5", "--metrics", "ftp://x/metrics")
	if code != 2 || !strings.Contains(errOut, `--metrics: "ftp://x/metrics" is not`) {
		t.Fatalf("bad URL: exit %d, stderr %q", code, errOut)
	}
}

func TestProcessCPUSample(t *testing.T) {
	for in, want := range map[string]float64{
		"# HELP x\nprocess_cpu_seconds_total 12.5\n":                       12.5,
		"process_cpu_seconds_total_x 1\nprocess_cpu_seconds_total 3\n":     3,
		`process_cpu_seconds_total{instance="a b"} 7 1700000000000` + "\n": 7,
		"process_cpu_seconds_total 1.5e+01\n":                              15,
	} {
		if got, err := processCPU(strings.NewReader(in)); err != nil || got != want {
			t.Errorf("processCPU(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := processCPU(strings.NewReader("process_cpu_seconds_total abc\n")); err == nil || !strings.Contains(err.Error(), `"abc"`) {
		t.Errorf("a bad value: %v", err)
	}
}

// The floor process's CPU comes from /proc: this process's own rises while
// it works.
func TestProcCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc:", err)
	}
	r := procCPU(os.Getpid())
	c0, err := r(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for x := 0; ; x++ {
		c1, err := r(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if c1 > c0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU seconds stayed at %v for 10 s of busy work", c0)
		}
		for i := 0; i < 1_000_000; i++ {
			x ^= i * 31
		}
	}
	if _, err := procCPU(-1)(context.Background()); err == nil {
		t.Error("a missing process gave no error")
	}
}

// With --floor the floor runs before every route run and after the last,
// each route's ratio is to the mean of the floor runs beside it, and
// --rounds prints each route's median.
func TestBenchFloorInterleavedRounds(t *testing.T) {
	floors := 0
	old := startFloor
	startFloor = func(ctx context.Context) (*floorServer, error) {
		floors++
		ts := httptest.NewServer(floorHandler())
		return &floorServer{addr: strings.TrimPrefix(ts.URL, "http://"), cpu: procCPU(os.Getpid()), close: ts.Close}, nil
	}
	defer func() { startFloor = old }()
	ts := httptest.NewServer((&seqServer{}).handler())
	defer ts.Close()
	code, out, errOut := runCLI(t, "bench", "--target", ts.URL, "--route", "leaf-segment,ids", "--floor", "--rounds", "2", "-c", "1", "-n", "20", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res struct {
		Runs    []benchRun     `json:"runs"`
		Summary []benchSummary `json:"summary"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, r := range res.Runs {
		order = append(order, r.Route)
	}
	if got, want := strings.Join(order, " "), "floor leaf-segment floor ids floor leaf-segment floor ids floor"; got != want || floors != 5 {
		t.Fatalf("runs %q (%d floors started); want %q", got, floors, want)
	}
	ratios := map[string][]float64{}
	for i := 1; i < len(res.Runs); i += 2 {
		r := res.Runs[i]
		mean := (res.Runs[i-1].ReqPerSec + res.Runs[i+1].ReqPerSec) / 2
		if want := math.Round(r.ReqPerSec/mean*1000) / 1000; r.FloorRatio != want {
			t.Errorf("run %d (%s): ratio %v, want %v (%v req/s over floors %v and %v)", i, r.Route, r.FloorRatio, want,
				r.ReqPerSec, res.Runs[i-1].ReqPerSec, res.Runs[i+1].ReqPerSec)
		}
		ratios[r.Route] = append(ratios[r.Route], r.FloorRatio)
	}
	if len(res.Summary) != 2 {
		t.Fatalf("summary %+v: want leaf-segment and ids", res.Summary)
	}
	for _, s := range res.Summary {
		rs := ratios[s.Route]
		if s.Runs != 2 || s.MedianRatio != math.Round((rs[0]+rs[1])/2*1000)/1000 || s.MinRatio != min(rs[0], rs[1]) || s.MaxRatio != max(rs[0], rs[1]) {
			t.Errorf("summary %+v; ratios %v", s, rs)
		}
	}
	if code, _, errOut := runCLI(t, "bench", "--rounds", "0"); code != 2 || !strings.Contains(errOut, "--rounds: 0") {
		t.Errorf("--rounds 0: exit %d, stderr %q", code, errOut)
	}
}

// leaderSeq is a seqServer that says, like idmint serve does for a
// monotonic key, which node it is and which node leads the key, and
// counts the IDs requests it answered.
type leaderSeq struct {
	v1.UnimplementedIDsServer
	seqServer
	node, leader string
	gets         atomic.Int64
	spread       *spreadGate // nil: answer at once
}

// spreadGate holds each answer until every one of n targets has been
// asked once (at most 5 s), so a bench that spreads its workers over the
// targets has each of them answer some requests, however the scheduler
// runs the workers: on a loaded machine one worker could otherwise take
// all of a run's requests before the others started.
type spreadGate struct {
	mu   sync.Mutex
	seen map[string]bool
	n    int
	all  chan struct{}
}

func newSpreadGate(n int) *spreadGate {
	return &spreadGate{seen: map[string]bool{}, n: n, all: make(chan struct{})}
}

func (g *spreadGate) wait(node string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	if !g.seen[node] {
		g.seen[node] = true
		if len(g.seen) == g.n {
			close(g.all)
		}
	}
	g.mu.Unlock()
	select {
	case <-g.all:
	case <-time.After(5 * time.Second): // the assertion then reports the target left out
	}
}

func (l *leaderSeq) handler() http.Handler {
	h := l.seqServer.handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Idmint-Node", l.node)
		w.Header().Set("Idmint-Strategy", "monotonic")
		if l.leader != "" {
			w.Header().Set("Idmint-Leader", l.leader)
		}
		if r.Method == http.MethodHead {
			return
		}
		l.spread.wait(l.node)
		l.gets.Add(1)
		h.ServeHTTP(w, r)
	})
}

func (l *leaderSeq) NextIDs(ctx context.Context, r *v1.NextIDsRequest) (*v1.NextIDsResponse, error) {
	md := metadata.Pairs("idmint-node", l.node, "idmint-strategy", "monotonic")
	if l.leader != "" {
		md.Set("idmint-leader", l.leader)
	}
	grpc.SetHeader(ctx, md)
	if l.gets.Add(1) > 1 { // the first is bench's probe for the headers
		l.spread.wait(l.node)
	}
	return &v1.NextIDsResponse{Key: r.Key, Strategy: "monotonic", Ids: l.take(int(r.Count))}, nil
}

// With several targets, bench sends every request to the one the
// targets name as the key's leader, over HTTP and gRPC; without a
// leader it spreads the workers over all of them.
func TestBenchSendsToLeader(t *testing.T) {
	for _, proto := range []string{"http", "grpc"} {
		t.Run(proto, func(t *testing.T) {
			for _, leader := range []string{"n1", ""} {
				nodes := []*leaderSeq{{node: "n0", leader: leader}, {node: "n1", leader: leader}, {node: "n2"}}
				if leader == "" {
					g := newSpreadGate(len(nodes))
					for _, n := range nodes {
						n.spread = g
					}
				}
				var targets []string
				for _, n := range nodes {
					if proto == "grpc" {
						ln, err := net.Listen("tcp", "127.0.0.1:0")
						if err != nil {
							t.Fatal(err)
						}
						g := grpc.NewServer()
						v1.RegisterIDsServer(g, n)
						go g.Serve(ln)
						t.Cleanup(g.Stop)
						targets = append(targets, "grpc://"+ln.Addr().String())
						continue
					}
					ts := httptest.NewServer(n.handler())
					t.Cleanup(ts.Close)
					targets = append(targets, ts.URL)
				}
				code, out, errOut := runCLI(t, "bench", "--target", strings.Join(targets, ","), "--key", "seq", "-c", "3", "-n", "30", "--json")
				if code != 0 {
					t.Fatalf("exit %d: %s", code, errOut)
				}
				r := decodeBench(t, out).Runs[0]
				probe := int64(0)
				if proto == "grpc" {
					probe = 1 // gRPC asks each target for one ID to read its headers
				}
				if leader == "" {
					if r.Leader != "" {
						t.Errorf("no leader named, but the run says %q leads", r.Leader)
					}
					total := int64(0)
					for _, n := range nodes {
						got := n.gets.Load() - probe
						if got == 0 {
							t.Errorf("no leader: %s answered none of 30 requests; want the 3 workers spread over the 3 targets", n.node)
						}
						total += got
					}
					if total != 30 {
						t.Errorf("no leader: %d requests answered; want 30", total)
					}
					continue
				}
				if r.Leader != targets[1] {
					t.Errorf("the run says %q leads; want n1's %s", r.Leader, targets[1])
				}
				for i, n := range nodes {
					want := int64(0)
					if i == 1 {
						want = 30
					}
					if got := n.gets.Load() - probe; got != want {
						t.Errorf("leader n1: %s answered %d of 30 requests; want %d", n.node, got, want)
					}
				}
			}
		})
	}
}
