package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idmint/idmint/clock"
)

// syncBuf is a log destination the test reads while the server writes.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// drainServer is a server with drain_period d on a fake clock, served on
// a loopback listener until stop is called.
type drainServer struct {
	s      *Server
	clk    *clock.Fake
	log    *syncBuf
	base   string
	stop   context.CancelFunc
	served chan error
}

func serveDraining(t *testing.T, d time.Duration) *drainServer {
	t.Helper()
	reg, _ := testRegistry()
	dd := Duration(d)
	cfg := &Config{DataDir: t.TempDir(), DrainPeriod: &dd, Keys: map[string]KeyConfig{"order": {Strategy: "counter"}}}
	cfg.SetDefaults()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	buf := &syncBuf{}
	s, err := New(context.Background(), Options{Config: cfg, Registry: reg, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ds := &drainServer{s: s, clk: clk, log: buf, base: "http://" + ln.Addr().String(), stop: stop, served: make(chan error, 1)}
	go func() { ds.served <- s.Serve(ctx, Listeners{HTTP: ln}) }()
	t.Cleanup(func() {
		stop()
		s.SkipDrain()
		select {
		case <-ds.served:
		case <-time.After(30 * time.Second):
			t.Error("Serve did not return 30 s after its context ended and the drain was skipped")
		}
	})
	return ds
}

// get answers GET base+path through hc, with the status, the body and
// whether the answer closed the connection.
func getClose(t *testing.T, hc *http.Client, url string) (int, string, bool) {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Close
}

// waitSleeper waits (up to 10 s of real time) until something sleeps on
// the fake clock: the drain.
func (ds *drainServer) waitSleeper(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ds.clk.WaitForSleepers(ctx, 1); err != nil {
		t.Fatalf("the server did not begin its drain period within 10 s of the signal; log:\n%s", ds.log)
	}
}

func (ds *drainServer) waitServed(t *testing.T) error {
	t.Helper()
	select {
	case err := <-ds.served:
		ds.served <- err // for Cleanup
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("Serve did not return within 10 s; log:\n%s", ds.log)
	}
	return nil
}

// The shutdown's phases in order, on an injected clock: while draining,
// /readyz answers 503 "draining", requests are still served and every
// answer closes its connection; at the end of the drain period (and not
// before) the listener closes; each phase is logged with its time.
func TestShutdownDrains(t *testing.T) {
	ds := serveDraining(t, 3*time.Second)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	if st, _, closed := getClose(t, hc, ds.base+"/readyz"); st != 200 || closed {
		t.Fatalf("/readyz before the signal: %d (connection closed: %v), want 200 on a kept connection", st, closed)
	}
	if ds.s.Draining() {
		t.Fatal("Draining before the signal")
	}

	ds.stop() // the signal
	ds.waitSleeper(t)
	if !ds.s.Draining() {
		t.Fatal("not Draining during the drain period")
	}
	st, body, closed := getClose(t, hc, ds.base+"/readyz")
	if st != 503 || !strings.Contains(body, `"status":"draining"`) || !closed {
		t.Fatalf("/readyz while draining: %d %q (connection closed: %v), want 503 saying draining with Connection: close", st, body, closed)
	}
	// Requests are still served, on new connections too (the last
	// answer closed the one before).
	for i := range 3 {
		st, body, closed = getClose(t, hc, ds.base+"/v1/keys/order/ids?count=2")
		if st != 200 || !closed {
			t.Fatalf("request %d while draining: %d %q (connection closed: %v), want 200 with Connection: close", i, st, body, closed)
		}
	}
	if strings.Contains(ds.log.String(), "stopped accepting") {
		t.Fatalf("stopped accepting before the drain period ended; log:\n%s", ds.log)
	}

	ds.clk.Advance(3 * time.Second)
	if err := ds.waitServed(t); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if c, err := net.DialTimeout("tcp", strings.TrimPrefix(ds.base, "http://"), 2*time.Second); err == nil {
		c.Close()
		t.Fatal("the listener still accepts after the shutdown")
	}
	log := ds.log.String()
	last := -1
	for _, want := range []string{
		"shutdown: draining", "drain_period=3s",
		"shutdown: stopped accepting", "after=3s",
		"shutdown: in-flight requests finished", "after=3s",
		"shutdown: done",
	} {
		i := strings.Index(log[last+1:], want)
		if i < 0 {
			t.Fatalf("the log does not say %q after the phase before; log:\n%s", want, log)
		}
		last += 1 + i
	}
}

// A second signal (SkipDrain) ends the drain at once: Serve returns
// without the clock reaching the drain period.
func TestShutdownSkipDrain(t *testing.T) {
	ds := serveDraining(t, 9*time.Minute)
	ds.stop()
	ds.waitSleeper(t)
	ds.s.SkipDrain()
	if err := ds.waitServed(t); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if log := ds.log.String(); !strings.Contains(log, "drain cut short") || !strings.Contains(log, "shutdown: done") {
		t.Fatalf("the log does not say the drain was cut short; log:\n%s", log)
	}
}

// drain_period 0 stops accepting at once, as before drains existed.
func TestShutdownNoDrain(t *testing.T) {
	ds := serveDraining(t, 0)
	ds.stop()
	if err := ds.waitServed(t); err != nil { // no Advance: nothing waits on the clock
		t.Fatalf("Serve: %v", err)
	}
	if log := ds.log.String(); !strings.Contains(log, "no drain period") {
		t.Fatalf("the log does not say there was no drain; log:\n%s", log)
	}
}

// drain_period: the default, 0 kept as 0, and a bad value named.
func TestDrainPeriodConfig(t *testing.T) {
	c, err := ParseConfig(strings.NewReader("drain_period: 0s\n"))
	if err != nil {
		t.Fatal(err)
	}
	c.SetDefaults()
	if c.Drain() != 0 {
		t.Fatalf("drain_period: 0s became %v", c.Drain())
	}
	c = &Config{}
	c.SetDefaults()
	if c.Drain() != DefaultDrainPeriod {
		t.Fatalf("default drain period %v, want %v", c.Drain(), DefaultDrainPeriod)
	}
	if err := c.Override(func(k string) string { return map[string]string{"IDMINT_DRAIN_PERIOD": "1s"}[k] }); err != nil || c.Drain() != time.Second {
		t.Fatalf("IDMINT_DRAIN_PERIOD=1s: %v, %v", c.Drain(), err)
	}
	if err := (&Config{}).Override(func(k string) string { return map[string]string{"IDMINT_DRAIN_PERIOD": "soon"}[k] }); err == nil || !strings.Contains(err.Error(), `IDMINT_DRAIN_PERIOD: "soon"`) {
		t.Fatalf("IDMINT_DRAIN_PERIOD=soon: %v, want an error naming the variable and value", err)
	}
	reg, _ := testRegistry()
	for _, bad := range []string{"-1s", "11m"} {
		c, err := ParseConfig(strings.NewReader("drain_period: " + bad + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		c.SetDefaults()
		var ve *ValidationError
		if err := c.Validate(reg); !errors.As(err, &ve) || !strings.Contains(err.Error(), "drain_period") {
			t.Fatalf("drain_period %s: %v, want a problem naming drain_period", bad, err)
		}
	}
}

// fakeStream is a server stream that accepts every message.
type fakeStream struct {
	grpc.ServerStream
	ctx  context.Context
	sent chan struct{}
}

func (f *fakeStream) Context() context.Context { return f.ctx }
func (f *fakeStream) SendMsg(any) error {
	select {
	case f.sent <- struct{}{}:
	default:
	}
	return nil
}

// A stream that runs until its client leaves ends when the server stops
// accepting, with Unavailable, instead of holding the graceful stop.
func TestStreamsEndAtStop(t *testing.T) {
	ds := serveDraining(t, 0)
	fs := &fakeStream{ctx: context.Background(), sent: make(chan struct{}, 1)}
	ended := make(chan error, 1)
	go func() {
		ended <- ds.s.endAtStop(nil, fs, nil, func(_ any, ss grpc.ServerStream) error {
			for { // StreamIDs without a total
				if err := ss.SendMsg(nil); err != nil {
					return err
				}
			}
		})
	}()
	select {
	case <-fs.sent:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream sent nothing")
	}
	select {
	case err := <-ended:
		t.Fatalf("the stream ended before the stop: %v", err)
	default:
	}
	ds.stop()
	select {
	case err := <-ended:
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("the stream ended with %v, want Unavailable", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end within 10 s of the stop")
	}
}
