package strategies

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/snowflake"
	"github.com/idmint/idmint/testkit/testserver"
)

// TestStaticHorizonInDataDir: a server on static://N keeps its snowflake
// key's time horizon in the data directory (static has no coordinator to
// keep it in), covering every ID it issued, and a restart on that
// directory issues only after the recorded horizon, even when the horizon
// lies ahead of the clock, as it does after the clock was set back.
func TestStaticHorizonInDataDir(t *testing.T) {
	dir := t.TempDir()
	layout, _ := snowflake.Lookup(DefaultLayout)
	start := func() (*server.Server, http.Handler) {
		s, err := snowflakeServer(t, dir, "static://7")
		if err != nil {
			t.Fatal(err)
		}
		return s, s.Handler()
	}
	issue := func(h http.Handler) (max int64, ok bool) {
		code, body := get(t, h, "GET", "/v1/keys/snowflake/ids?count=50", "")
		if code != http.StatusOK {
			return 0, false
		}
		var b struct{ IDs []string }
		if err := json.Unmarshal([]byte(body), &b); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		for _, s := range b.IDs {
			id, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			max = id
		}
		return max, true
	}
	stamp := func(id int64) time.Time {
		p, err := snowflake.Decode(layout, id)
		if err != nil {
			t.Fatal(err)
		}
		return p.Time
	}
	path := filepath.Join(dir, "worker-static.horizon")
	horizon := func() time.Time {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("the static worker's horizon file: %v", err)
		}
		var st struct{ Horizon time.Time }
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		return st.Horizon
	}
	until := func(h http.Handler) (id int64) {
		testserver.Eventually(t, "the snowflake key to issue", 15*time.Second, func() bool {
			var ok bool
			id, ok = issue(h)
			return ok
		})
		return id
	}

	s1, h1 := start()
	last := until(h1)
	if hz := horizon(); hz.Before(stamp(last)) {
		t.Fatalf("horizon %v in %s is below the last ID's time %v", hz, path, stamp(last))
	}
	s1.Close(context.Background())

	// The clock "went back" 400 ms: the recorded horizon is ahead of it.
	b, _ := os.ReadFile(path)
	var st map[string]any
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	ahead := time.Now().Add(400 * time.Millisecond).UTC()
	st["horizon"] = ahead
	b, _ = json.Marshal(st)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}

	s2, h2 := start()
	defer s2.Close(context.Background())
	first := until(h2)
	if got := stamp(first); !got.After(ahead.Truncate(time.Millisecond)) {
		t.Fatalf("after the restart the first ID is stamped %v, not after the recorded horizon %v", got, ahead)
	}
	if first <= last {
		t.Fatalf("after the restart %d is not above the last run's %d", first, last)
	}
}

// snowflakeServer is a server with one snowflake key ("snowflake", the
// default layout) on data directory dir, its worker ID from coordinator.
// The caller closes it.
func snowflakeServer(t testing.TB, dir, coordinator string) (*server.Server, error) {
	t.Helper()
	reg := server.NewRegistry()
	if err := Register(reg); err != nil {
		t.Fatal(err)
	}
	cfg := &server.Config{DataDir: dir, Coordinator: coordinator, Stores: map[string]string{},
		Keys: map[string]server.KeyConfig{"snowflake": {Strategy: "snowflake"}}}
	cfg.SetDefaults()
	return server.New(context.Background(), server.Options{Config: cfg, Registry: reg, Surfaces: surfaces,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}
