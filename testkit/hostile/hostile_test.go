package hostile

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	v1 "github.com/idmint/idmint/api/idmintv1"
	"github.com/idmint/idmint/testkit/idtest"
)

// The memory an attack may leave a server at (resident set, as the
// kernel counts it).
const rssLimit = 150 << 20

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// idmintBinary is the idmint binary under attack: IDMINT_HOSTILE_BIN when set
// (to watch an older build fail), else cmd/idmint built once.
func idmintBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("IDMINT_HOSTILE_BIN"); b != "" {
		return b
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "idmint-hostile")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "idmint")
		cmd := idtest.BuildCommand(binPath)
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

type daemon struct {
	cmd               *exec.Cmd
	http, grpc, admin string // host:port
	stderr            *bytes.Buffer
	mu                sync.Mutex
}

func (d *daemon) log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stderr.String()
}

type lockedWriter struct{ d *daemon }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	return w.d.stderr.Write(p)
}

// serve starts `idmint serve` with a config of a uuid key and extra YAML
// lines, on ports the kernel picks.
func serve(t *testing.T, extra string) *daemon {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "idmint.yaml")
	yaml := "data_dir: " + filepath.Join(dir, "data") + "\nadmin_listen: 127.0.0.1:0\nkeys:\n  uuid: {strategy: uuid}\n" + extra
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &daemon{stderr: &bytes.Buffer{}}
	d.cmd = exec.Command(idmintBinary(t), "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0")
	d.cmd.Env = append(os.Environ(), "IDMINT_CONFIG=", "GOGC=", "GOMEMLIMIT=")
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stderr = lockedWriter{d}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.cmd.Process.Kill()
		d.cmd.Wait()
	})
	found, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			l := sc.Text()
			if a, ok := strings.CutPrefix(l, "idmint: grpc on "); ok {
				d.grpc, _, _ = strings.Cut(a, " ")
			}
			if a, ok := strings.CutPrefix(l, "idmint: admin (pprof, metrics) on "); ok {
				d.admin = strings.TrimPrefix(a, "http://")
			}
			if a, ok := strings.CutPrefix(l, "idmint: listening on "); ok {
				d.http = strings.TrimPrefix(a, "http://")
			}
			if strings.HasPrefix(l, "idmint: data directory ") { // after the addresses
				close(found)
				break
			}
		}
		io.Copy(io.Discard, out)
	}()
	select {
	case <-found:
	case <-exited:
		t.Fatalf("idmint serve stopped before saying where it listens; stderr:\n%s", d.log())
	case <-time.After(60 * time.Second):
		t.Fatalf("idmint serve did not say where it listens within 60s; stderr:\n%s", d.log())
	}
	if d.grpc == "" {
		t.Fatalf("idmint serve did not say where gRPC listens; stderr:\n%s", d.log())
	}
	return d
}

// rss is the daemon's resident set in bytes.
func (d *daemon) rss(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(d.cmd.Process.Pid) + "/status")
	if err != nil {
		t.Fatalf("read the server's memory: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc status")
	return 0
}

// during samples the daemon's RSS every 100 ms for d while probe runs
// every 200 ms as the well-behaved client; it returns the largest RSS
// seen and every probe failure.
func (d *daemon) during(t *testing.T, dur time.Duration, probe func() error) (peak int64, failures []string) {
	t.Helper()
	end := time.Now().Add(dur)
	next := time.Now()
	for time.Now().Before(end) {
		peak = max(peak, d.rss(t))
		if !time.Now().Before(next) {
			start := time.Now()
			if err := probe(); err != nil {
				failures = append(failures, fmt.Sprintf("%v after %v", err, time.Since(start).Round(time.Millisecond)))
			} else if took := time.Since(start); took > probeTimeout {
				failures = append(failures, fmt.Sprintf("answered after %v", took.Round(time.Millisecond)))
			}
			next = time.Now().Add(200 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond) // the sampling period
	}
	return peak, failures
}

// probeTimeout is how long the well-behaved client's probe may take while
// an attack runs: a starved server misses it by the answer timeout (10 s),
// and a loaded 2-core machine (the suite beside busy loops) once missed
// 1 s by a little.
const probeTimeout = 2 * time.Second

// judge fails the test when the RSS peaked over rssLimit or the probe of
// who failed.
func judge(t *testing.T, peak int64, failures []string, who string) {
	t.Helper()
	if peak > rssLimit {
		t.Errorf("RSS peaked at %d MiB, over %d MiB", peak>>20, rssLimit>>20)
	}
	if len(failures) > 0 {
		t.Errorf("%s was not answered within %v %d time(s): %s", who, probeTimeout, len(failures), strings.Join(failures, "; "))
	}
}

// dialMany opens n connections to addr from 16 goroutines, runs each on
// every one that opened (a dial that times out is skipped: the kernel's
// queue is full), and closes them all when the test ends.
func dialMany(t *testing.T, addr string, n int, timeout time.Duration, each func(net.Conn)) []net.Conn {
	t.Helper()
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		conns []net.Conn
	)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += 16 {
				c, err := net.DialTimeout("tcp", addr, timeout)
				if err != nil {
					continue
				}
				if each != nil {
					each(c)
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	return conns
}

func skipUnlessLinux(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	if testing.Short() {
		t.Skip("starts idmint serve and opens thousands of connections")
	}
}

// httpProbe asks for one ID with a deadline of a second.
func httpProbe(addr string) func() error {
	hc := &http.Client{Timeout: probeTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	return func() error {
		resp, err := hc.Get("http://" + addr + "/v1/keys/uuid/ids")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
}

// 2,000 HTTP connections ask for 10,000 UUIDs each and never read: RSS
// went from 35 MB to 1.73 GB. Answers wait in a bounded budget now, and
// one that is not read within answer_timeout loses its connection.
func TestAttackUnreadHTTPAnswers(t *testing.T) {
	skipUnlessLinux(t)
	d := serve(t, "")
	base := d.rss(t)
	req := "GET /v1/keys/uuid/ids?count=10000 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
	conns := dialMany(t, d.http, 2000, 5*time.Second, func(c net.Conn) {
		c.(*net.TCPConn).SetReadBuffer(4 << 10) // keep the kernel from reading for us
		io.WriteString(c, req)
	})
	if len(conns) < 2000 {
		t.Fatalf("%d of 2,000 connections opened", len(conns))
	}
	peak, failures := d.during(t, 6*time.Second, httpProbe(d.http))
	t.Logf("RSS %d MiB before, peak %d MiB while 2,000 connections did not read", base>>20, peak>>20)
	judge(t, peak, failures, "the well-behaved client")
}

// h2Conn is a raw HTTP/2 connection whose streams have a window of 0: the
// server may send headers but no answer bytes.
type h2Conn struct {
	c      net.Conn
	fr     *http2.Framer
	mu     sync.Mutex
	closed chan struct{} // closed when the server closes the connection
}

func dialZeroWindow(t *testing.T, addr string) *h2Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	h := &h2Conn{c: c, fr: http2.NewFramer(c, c), closed: make(chan struct{})}
	if err := h.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	// Read and drop what the server sends (headers, settings, pings):
	// only its DATA is held back, by the window.
	go func() {
		defer close(h.closed)
		for {
			f, err := h.fr.ReadFrame()
			if err != nil {
				return
			}
			if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
				h.mu.Lock()
				h.fr.WriteSettingsAck()
				h.mu.Unlock()
			}
		}
	}()
	return h
}

// call opens stream id with a unary NextIDs request.
func (h *h2Conn) call(t *testing.T, id uint32, r *v1.NextIDsRequest) {
	t.Helper()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/idmint.v1.IDs/NextIDs"},
		{":authority", "127.0.0.1"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	msg, err := proto.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 5+len(msg))
	binary.BigEndian.PutUint32(body[1:], uint32(len(msg)))
	copy(body[5:], msg)
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if err := h.fr.WriteData(id, true, body); err != nil {
		t.Fatal(err)
	}
}

// 1,024 unary NextIDs{count: 10000} calls on HTTP/2 windows of 0, never
// read: RSS 66 -> 378 MB (4,096 calls: 1.6 GB). Their answers now wait in
// the budget, and a connection that owes answer bytes and writes none for
// answer_timeout is closed.
func TestAttackUnreadGRPCUnary(t *testing.T) {
	skipUnlessLinux(t)
	d := serve(t, "")
	base := d.rss(t)
	// 128 connections of 32 streams (the server's per-connection cap).
	var hs []*h2Conn
	defer func() {
		for _, h := range hs {
			h.c.Close()
		}
	}()
	for c := 0; c < 128; c++ {
		h := dialZeroWindow(t, d.grpc)
		hs = append(hs, h)
		for s := uint32(0); s < 32; s++ {
			h.call(t, 2*s+1, &v1.NextIDsRequest{Key: "uuid", Count: 10000})
		}
	}
	cc, err := grpc.NewClient(d.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	cl := v1.NewIDsClient(cc)
	probe := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		defer cancel()
		r, err := cl.NextIDs(ctx, &v1.NextIDsRequest{Key: "uuid", Count: 1})
		if err == nil && len(r.TextIds) != 1 {
			err = fmt.Errorf("%d IDs for 1", len(r.TextIds))
		}
		return err
	}
	peak, failures := d.during(t, 6*time.Second, probe)
	t.Logf("RSS %d MiB before, peak %d MiB while 4,096 calls on windows of 0 were not read", base>>20, peak>>20)
	judge(t, peak, failures, "the well-behaved client")
}

// 8,000 idle connections to the admin listener added 122 MB: it now
// holds 256 at once, like the other listeners' caps.
func TestAttackIdleAdminConns(t *testing.T) {
	skipUnlessLinux(t)
	d := serve(t, "")
	if d.admin == "" {
		t.Fatalf("idmint serve did not say where the admin listener is; stderr:\n%s", d.log())
	}
	base := d.rss(t)
	conns := dialMany(t, d.admin, 8000, 30*time.Millisecond, nil)
	peak, _ := d.during(t, 2*time.Second, func() error { return nil })
	t.Logf("RSS %d MiB before, peak %d MiB with %d idle admin connections", base>>20, peak>>20, len(conns))
	if peak-base > 40<<20 {
		t.Errorf("idle admin connections grew RSS by %d MiB (from %d MiB)", (peak-base)>>20, base>>20)
	}
}

// A connection that owes answer bytes and lets none through for
// answer_timeout is closed, which frees what the server queued for it.
func TestAttackStalledGRPCConnClosed(t *testing.T) {
	skipUnlessLinux(t)
	d := serve(t, "answer_timeout: 1s\n")
	h := dialZeroWindow(t, d.grpc)
	defer h.c.Close()
	h.call(t, 1, &v1.NextIDsRequest{Key: "uuid", Count: 10000})
	select {
	case <-h.closed:
	case <-time.After(15 * time.Second):
		t.Fatal("a connection that read no answer bytes was still open 15s after answer_timeout (1s)")
	}
	// A connection that reads is not closed: the well-behaved client.
	cc, err := grpc.NewClient(d.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	cl := v1.NewIDsClient(cc)
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := cl.NextIDs(ctx, &v1.NextIDsRequest{Key: "uuid", Count: 10000})
		cancel()
		if err != nil || len(r.TextIds) != 10000 {
			t.Fatalf("a reading client's call %d: %v", i, err)
		}
	}
}

// Keys created through the admin API until max_keys refuses them (4,949
// keys had pushed RSS to 269 MB, and /ui/api/state to 754 KB), while the
// dashboard's state is read: the server stays under the limit and answers.
func TestAttackManyKeys(t *testing.T) {
	skipUnlessLinux(t)
	d := serve(t, "")
	base := d.rss(t)
	hc := &http.Client{Timeout: 10 * time.Second}
	strategies := []string{"segment", "uuid", "snowflake", "ulid"}
	made, refused := 0, 0
	var wg sync.WaitGroup
	var mu sync.Mutex
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < 4200; i += 8 {
				body := fmt.Sprintf(`{"name":"k%d","strategy":%q}`, i, strategies[i%len(strategies)])
				req, _ := http.NewRequest("POST", "http://"+d.http+"/v1/keys", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := hc.Do(req)
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				switch resp.StatusCode {
				case 201:
					made++
				case 429:
					refused++
				}
				mu.Unlock()
			}
		}()
	}
	peak := int64(0)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		case <-time.After(200 * time.Millisecond):
		}
		peak = max(peak, d.rss(t))
	}
	state := func() error {
		resp, err := hc.Get("http://" + d.http + "/ui/api/state")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != 200 {
			return fmt.Errorf("state: %d", resp.StatusCode)
		}
		return nil
	}
	p, failures := d.during(t, 3*time.Second, state)
	peak = max(peak, p)
	t.Logf("%d keys made, %d refused; RSS %d MiB before, peak %d MiB", made, refused, base>>20, peak>>20)
	if refused == 0 {
		t.Errorf("no create was refused: %d keys made", made)
	}
	judge(t, peak, failures, "the dashboard's state")
}

// 1,030 connections to the gRPC port that send only the HTTP/2 preface
// made every real call fail for ~120 s. A connection with no call in
// progress is closed when the listener is full, so a new client is
// answered within a second while they are held.
func TestAttackGRPCHalfOpenLockout(t *testing.T) {
	skipUnlessLinux(t)
	d := serve(t, "")
	conns := dialMany(t, d.grpc, 1030, 100*time.Millisecond, func(c net.Conn) { io.WriteString(c, http2.ClientPreface) })
	probe := func() error {
		// A new connection each time: the lockout is of new clients.
		cc, err := grpc.NewClient(d.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		defer cancel()
		_, err = v1.NewIDsClient(cc).NextIDs(ctx, &v1.NextIDsRequest{Key: "uuid", Count: 1})
		return err
	}
	peak, failures := d.during(t, 3*time.Second, probe)
	judge(t, peak, failures, fmt.Sprintf("with %d half-open connections held, a new client", len(conns)))
}

// 4,100 keep-alive connections that made one request each and then sat
// idle kept every max_conns slot for idle_timeout. An idle connection is
// closed when the listener is full, so a new client is answered within a
// second.
func TestAttackIdleKeepAliveLockout(t *testing.T) {
	skipUnlessLinux(t)
	d := serve(t, "")
	conns := dialMany(t, d.http, 4100, time.Second, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		c.SetDeadline(time.Time{})
	})
	peak, failures := d.during(t, 3*time.Second, httpProbe(d.http))
	judge(t, peak, failures, fmt.Sprintf("with %d idle keep-alive connections held, a new client", len(conns)))
}
