package browsertest_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/server/admin"
	"github.com/idmint/idmint/server/dashboard"
	"github.com/idmint/idmint/server/strategies"
)

// TestAttackCSRFInBrowser: a zero-config server (no admin token, loopback
// only) and a page on another localhost port that the operator happens to
// open. The page posts a key to the server the way a page can without a
// preflight: as a text/plain form whose body is JSON (the classic
// name='{"…":"' value='…"}' trick), and with fetch in mode no-cors. In
// headless Chromium neither may create the key (the form did before).
func TestAttackCSRFInBrowser(t *testing.T) {
	chromium := chromiumPath(t)
	dir := t.TempDir()
	reg := server.NewRegistry()
	if err := strategies.Register(reg); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &server.Config{Listen: ln.Addr().String(), DataDir: dir, Coordinator: "static://7",
		Stores: map[string]string{"default": "sqlite://" + filepath.Join(dir, "seg.db")},
		Keys:   map[string]server.KeyConfig{"order": {Strategy: "segment"}}}
	cfg.SetDefaults()
	s, err := server.New(context.Background(), server.Options{Config: cfg, Registry: reg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Surfaces: []server.NewSurface{admin.New, dashboard.New}})
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
		case <-served:
		case <-time.After(30 * time.Second):
			t.Error("Serve did not return 30 s after its context ended")
		}
	})
	target := "http://" + ln.Addr().String()

	// The hostile page, on another port of localhost.
	page := fmt.Sprintf(`<!doctype html><html><body>
<form id="f" method="POST" action="%[1]s/v1/keys" enctype="text/plain" target="sink">
<input name='{"name":"csrfform","strategy":"uuid","tokens":["csrf-' value='0123456789abcdef"]}'></form>
<iframe name="sink"></iframe>
<script>
fetch(%[1]q + "/v1/keys", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"},
  body: JSON.stringify({name: "csrffetch", strategy: "uuid"})})
  .finally(() => { document.getElementById("f").submit(); setTimeout(() => { document.title = "done"; }, 500); });
</script></body></html>`, target)
	evil, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	es := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, page)
	})}
	go es.Serve(evil)
	defer es.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bctx := newBrowser(t, ctx, chromium)
	if err := chromedp.Do(bctx, chromedp.Navigate("http://localhost:"+portOf(evil.Addr())+"/")); err != nil {
		t.Fatalf("open the hostile page: %v", err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.title === "done"`, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("the hostile page did not run: %v", err)
	}
	for _, k := range []string{"csrffetch", "csrfform"} {
		resp, err := http.Get(target + "/v1/keys/" + k)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("the page's request created key %s (GET /v1/keys/%s: %d)", k, k, resp.StatusCode)
		}
	}
}

func portOf(a net.Addr) string {
	_, p, _ := net.SplitHostPort(a.String())
	return p
}
