package strategies

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/testkit/testserver"
)

// fileServer serves one snowflake key under a file:// coordinator in dir.
func fileServer(t *testing.T, dir string, clk clock.Clock) *server.Server {
	t.Helper()
	reg := server.NewRegistry()
	if err := Register(reg); err != nil {
		t.Fatal(err)
	}
	cfg := &server.Config{DataDir: dir, Coordinator: "file://" + filepath.Join(dir, "worker"),
		Keys: map[string]server.KeyConfig{"snowflake": {Strategy: "snowflake"}}}
	cfg.SetDefaults()
	s, err := server.New(context.Background(), server.Options{Config: cfg, Registry: reg, Surfaces: surfaces, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// issue asks for n IDs with a request that gives up after limit.
func issue(s *server.Server, n int, limit time.Duration) (int, []int64) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	r := httptest.NewRequest("GET", "/v1/keys/snowflake/ids?count="+strconv.Itoa(n), nil).WithContext(ctx)
	r.RemoteAddr = "127.0.0.1:1"
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	var b struct{ IDs []string }
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &b) != nil {
		return w.Code, nil
	}
	out := make([]int64, len(b.IDs))
	for i, id := range b.IDs {
		out[i], _ = strconv.ParseInt(id, 10, 64)
	}
	return w.Code, out
}

// TestSnowflakeReadyOnlyWhenItCanIssue: a snowflake key whose worker ID's
// recorded horizon is ahead of the clock (a restart on a clock behind the
// last holder's) cannot issue until the clock passes it; /readyz says 503
// for exactly that long, then 200 on its own, without any request.
func TestSnowflakeReadyOnlyWhenItCanIssue(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(time.Now().Truncate(time.Millisecond))
	a := fileServer(t, dir, clk)
	code, before := issue(a, 100, 10*time.Second)
	if code != 200 || len(before) != 100 {
		t.Fatalf("first server: %d, %d IDs", code, len(before))
	}
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	// The next server's clock reads 1.5 s behind what the first stamped.
	clk.Step(-1500 * time.Millisecond)
	b := fileServer(t, dir, clk)
	defer b.Close(context.Background())
	h := b.Handler()
	if code, body := get(t, h, "GET", "/readyz", ""); code != 503 {
		t.Fatalf("readyz = %d %s while the key cannot issue; want 503", code, body)
	}
	if code, ids := issue(b, 1, 300*time.Millisecond); code == 200 {
		t.Fatalf("issued %v while the clock is behind the recorded horizon", ids)
	}
	if code, _ := get(t, h, "GET", "/readyz", ""); code != 503 {
		t.Fatalf("readyz = %d; want 503", code)
	}

	clk.Advance(1600 * time.Millisecond)
	testserver.Eventually(t, "/readyz to answer 200 once the clock passed the horizon", 10*time.Second, func() bool {
		code, _ := get(t, h, "GET", "/readyz", "")
		return code == 200
	})
	// Ready means a request issues now, without waiting.
	code, after := issue(b, 100, 200*time.Millisecond)
	if code != 200 || len(after) != 100 {
		t.Fatalf("ready, but a request got %d", code)
	}
	if after[0] <= before[len(before)-1] {
		t.Fatalf("second server issued %d, not above the first's last %d", after[0], before[len(before)-1])
	}
}
