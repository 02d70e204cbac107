package browsertest_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/server/admin"
	"github.com/idmint/idmint/server/dashboard"
	"github.com/idmint/idmint/server/strategies"
	"github.com/idmint/idmint/testkit/testserver"
)

// chromiumPath finds Debian's chromium (scripts/test.sh installs it). In
// CI a missing browser fails the test; elsewhere it skips with a message.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium not found: the dashboard test needs it in CI (scripts/test.sh installs Debian's chromium)")
	}
	t.Skip("chromium not found: install Debian's chromium (apt-get install --no-install-recommends chromium fonts-liberation) or run scripts/test.sh to run the dashboard test")
	return ""
}

// newBrowser starts headless Chromium for the test, with the flags this
// machine's closed network needs (no background connections), and returns
// its context; it is closed when the test ends.
func newBrowser(t *testing.T, ctx context.Context, chromium string, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-background-networking", true),
		chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(opts, extra...)...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	return bctx
}

// uiRow is one row of a dashboard table as the page shows it.
type uiRow struct {
	Key    string            `json:"key"`
	Fields map[string]string `json:"fields"`
}

// rowsJS reads the rows of the dashboard table with the given id.
const rowsJS = `JSON.stringify([...document.querySelectorAll('#%s tbody tr')].map(tr => ({key: tr.dataset.key,
  fields: Object.fromEntries([...tr.querySelectorAll('td[data-field]')].map(td => [td.dataset.field, td.textContent]))})))`

// TestDashboardInBrowser starts a real server (segment, snowflake and ULID
// keys, SQLite store, admin token), loads /ui in headless Chromium, gives
// it the admin token through its form, and checks that the keys and their
// figures appear, that the issued count and the segment buffer move after
// IDs are issued, that a key created from the page appears, that nothing
// on the page fails (exceptions, CSP) and that a phone-wide screen needs no
// sideways scrolling. It saves a screenshot to $IDMINT_UI_SCREENSHOT (or
// the test's temporary directory).
func TestDashboardInBrowser(t *testing.T) {
	chromium := chromiumPath(t)
	const adminToken = "dashboard-admin-token-0123456789"
	dir := t.TempDir()
	reg := server.NewRegistry()
	if err := strategies.Register(reg); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &server.Config{Listen: ln.Addr().String(), DataDir: dir, Coordinator: "static://7", AdminToken: adminToken,
		Stores: map[string]string{"default": "sqlite://" + filepath.Join(dir, "seg.db")},
		Keys: map[string]server.KeyConfig{
			"order": {Strategy: "segment", Step: 1000},
			"user":  {Strategy: "snowflake"},
			"event": {Strategy: "ulid"},
		}}
	cfg.SetDefaults()
	// Samples every 250 ms instead of 5 s: the charts fill in seconds (13
	// samples for the screenshot took 65–75 s of the test's 2 minutes at
	// 5 s, and it failed on a busy machine), and the page draws them the
	// same way (it reads the interval from the state).
	const sampleEvery = 250 * time.Millisecond
	dash, err := dashboard.NewWith(dashboard.Options{SampleEvery: sampleEvery})
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(context.Background(), server.Options{Config: cfg, Registry: reg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Surfaces: []server.NewSurface{admin.New, dash}})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(sctx, server.Listeners{HTTP: ln}) }()
	t.Cleanup(func() {
		stop()
		s.SkipDrain() // no load balancer to drain for
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Serve did not return 30 s after its context ended")
		}
	})
	base := "http://" + ln.Addr().String()
	issue := func(key string, n int) {
		t.Helper()
		resp, err := http.Get(base + "/v1/keys/" + key + "/ids?count=" + strconv.Itoa(n))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("issue %d from %s: %d %s", n, key, resp.StatusCode, b)
		}
	}

	// A little traffic on user and event all along, so their rates and
	// charts have something to show; order moves only when the test says.
	loadCtx, stopLoad := context.WithCancel(context.Background())
	var load sync.WaitGroup
	load.Add(1)
	go func() {
		defer load.Done()
		start := time.Now()
		for loadCtx.Err() == nil {
			// Batches of 10 to 80 IDs, changing every 4 samples: the charts
			// get a shape.
			n := []int{10, 37, 80, 37}[int(time.Since(start)/(4*sampleEvery))%4]
			for _, k := range []string{"user", "event"} {
				if resp, err := http.Get(base + "/v1/keys/" + k + "/ids?count=" + strconv.Itoa(n)); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
			select {
			case <-loadCtx.Done():
			case <-time.After(sampleEvery / 5):
			}
		}
	}()
	defer func() { stopLoad(); load.Wait() }()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bctx := newBrowser(t, ctx, chromium, chromedp.WindowSize(1000, 900))

	// Everything the page writes to its console: exceptions, CSP reports,
	// failed loads. Collected here, judged at the end.
	var mu sync.Mutex
	var console []chromedp.ConsoleMessage
	msgs := chromedp.Console(bctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			mu.Lock()
			console = append(console, m)
			mu.Unlock()
		}
	}()

	// waitFor polls the page until ok accepts the rows of a table, or fails
	// naming what it saw last.
	rows := func(table string) []uiRow {
		t.Helper()
		raw, err := chromedp.Run(bctx, chromedp.Evaluate[string](strings.Replace(rowsJS, "%s", table, 1)))
		if err != nil {
			t.Fatalf("read #%s: %v", table, err)
		}
		var rs []uiRow
		if err := json.Unmarshal([]byte(raw), &rs); err != nil {
			t.Fatalf("rows of #%s: %v: %s", table, err, raw)
		}
		return rs
	}
	byKey := func(rs []uiRow) map[string]map[string]string {
		m := map[string]map[string]string{}
		for _, r := range rs {
			m[r.Key] = r.Fields
		}
		return m
	}
	waitFor := func(what, table string, ok func(map[string]map[string]string) bool) map[string]map[string]string {
		t.Helper()
		deadline := time.Now().Add(45 * time.Second)
		for {
			got := byKey(rows(table))
			if ok(got) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not on the page after 45 s; #%s shows %v", what, table, got)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/ui"), chromedp.WaitVisible(chromedp.ID("token"))); err != nil {
		t.Fatalf("load /ui and wait for the token form (the state needs the admin token): %v", err)
	}
	status, err := chromedp.Run(bctx, chromedp.Text(chromedp.ID("status")))
	if err != nil || status != "admin token required" {
		t.Fatalf("status before the token = %q, %v", status, err)
	}
	if err := chromedp.Do(bctx, chromedp.SendKeys(chromedp.ID("token"), adminToken),
		chromedp.Click(chromedp.CSS("#token-form button[type=submit]"))); err != nil {
		t.Fatalf("enter the admin token: %v", err)
	}

	keys := waitFor("the three keys", "keys", func(m map[string]map[string]string) bool { return len(m) == 3 })
	for name, strategy := range map[string]string{"order": "segment", "user": "snowflake", "event": "ulid"} {
		f := keys[name]
		if f == nil || f["name"] != name || !strings.HasPrefix(f["strategy"], strategy) || f["ready"] != "yes" {
			t.Fatalf("key %s shows %v, want strategy %s, ready", name, f, strategy)
		}
	}
	// The filter box narrows the table to the keys whose name holds it
	// (any case), and emptied, shows them all again.
	if err := chromedp.Do(bctx, chromedp.SendKeys(chromedp.ID("key-filter"), "ORD")); err != nil {
		t.Fatalf("type a filter: %v", err)
	}
	waitFor("the filter ORD keeping only order", "keys", func(m map[string]map[string]string) bool { _, ok := m["order"]; return len(m) == 1 && ok })
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`(() => { const f = document.getElementById("key-filter"); f.value = ""; f.dispatchEvent(new Event("input")); return true; })()`)); err != nil {
		t.Fatalf("clear the filter: %v", err)
	}
	waitFor("all three keys after the filter is cleared", "keys", func(m map[string]map[string]string) bool { return len(m) == 3 })
	if keys["order"]["issued"] != "0" {
		t.Fatalf("order shows %q issued before any request", keys["order"]["issued"])
	}
	segs := waitFor("order's buffers", "segments", func(m map[string]map[string]string) bool { return m["order"] != nil })
	before := segs["order"]["slot0"] + "|" + segs["order"]["slot1"]

	issue("order", 1000)
	issue("order", 234)
	waitFor("order's issued count after 1,234 IDs", "keys", func(m map[string]map[string]string) bool {
		return m["order"]["issued"] == "1,234"
	})
	segs = waitFor("order's buffers after issuing", "segments", func(m map[string]map[string]string) bool {
		return m["order"]["slot0"]+"|"+m["order"]["slot1"] != before
	})
	if !strings.Contains(segs["order"]["slot0"]+segs["order"]["slot1"], "1,235 →") {
		t.Fatalf("order's slots after IDs 1 to 1,234: %v (want the serving one at 1,235)", segs["order"])
	}
	waitFor("user's count moving", "keys", func(m map[string]map[string]string) bool {
		return m["user"]["issued"] != "0" && m["event"]["issued"] != "0"
	})
	leases := waitFor("user's clock figures", "clocks", func(m map[string]map[string]string) bool { return m["user"] != nil })
	if leases["user"]["rollbacks"] != "0" {
		t.Fatalf("user shows %q clock rollbacks", leases["user"]["rollbacks"])
	}

	// An admin action from the page: create a key.
	if err := chromedp.Do(bctx,
		chromedp.SendKeys(chromedp.ID("create-name"), "invoice"),
		chromedp.SendKeys(chromedp.ID("create-strategy"), "segment"),
		chromedp.SendKeys(chromedp.ID("create-step"), "500"),
		chromedp.Click(chromedp.CSS("#create-form button[type=submit]"))); err != nil {
		t.Fatalf("create a key from the page: %v", err)
	}
	waitFor("the key created from the page", "keys", func(m map[string]map[string]string) bool {
		return m["invoice"] != nil && strings.HasPrefix(m["invoice"]["strategy"], "segment")
	})
	if msg, err := chromedp.Run(bctx, chromedp.Text(chromedp.ID("admin-msg"))); err != nil || msg != "done" {
		t.Fatalf("admin message after creating = %q, %v", msg, err)
	}
	issue("invoice", 3)
	waitFor("invoice's count", "keys", func(m map[string]map[string]string) bool { return m["invoice"]["issued"] == "3" })

	// Let the charts gather a second sample before the picture is taken;
	// when the picture is wanted (IDMINT_UI_SCREENSHOT), 13 of them.
	// Samples are taken on the server's real clock while the page polls.
	shot := os.Getenv("IDMINT_UI_SCREENSHOT")
	want := 2
	if shot != "" {
		want = 13
	}
	testserver.Eventually(t, "order's rate chart to hold "+strconv.Itoa(want)+" samples", time.Duration(want+2)*sampleEvery+30*time.Second, func() bool {
		return orderSamples(t, base, adminToken) >= want
	})
	issue("order", 400)
	waitFor("order's issued count after 1,634 IDs", "keys", func(m map[string]map[string]string) bool {
		return m["order"]["issued"] == "1,634"
	})
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "dashboard.png")
	}
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("dashboard screenshot: %s (%d bytes)", shot, len(png))

	// On a phone-wide screen the page needs no sideways scrolling (wide
	// tables scroll inside their own box).
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(390, 844)); err != nil {
		t.Fatal(err)
	}
	over, err := chromedp.Run(bctx, chromedp.Evaluate[float64](`document.documentElement.scrollWidth - window.innerWidth`))
	if err != nil || over > 0 {
		t.Fatalf("at 390 px the page is %v px wider than the screen (%v)", over, err)
	}

	mu.Lock()
	defer mu.Unlock()
	for _, m := range console {
		// The first state request is refused (401) until the token is given.
		if m.IsException() || strings.Contains(m.Text, "Content Security Policy") ||
			(m.Type == "error" && !strings.Contains(m.URL, "/ui/api/state")) {
			t.Errorf("page console: %s %s:%d %s", m.Type, m.URL, m.Line+1, m.Text)
		}
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("the browser test ran out of time")
	}
}

// orderSamples is how many samples the dashboard's state holds for the
// key "order" (0 when the state cannot be read).
func orderSamples(t *testing.T, base, adminToken string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/ui/api/state", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var st dashboard.UIState
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&st) != nil {
		return 0
	}
	for _, k := range st.Keys {
		if k.Name == "order" {
			return len(k.History)
		}
	}
	return 0
}
