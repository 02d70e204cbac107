package strategies

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/server"
)

// A strategy's New reads its options through the same parse as its Check:
// a key whose options Check refuses is refused by New too, naming the
// field and the value, before any store or lease is opened, instead of
// being built with the bad option read as zero.
func TestNewRefusesWhatCheckRefuses(t *testing.T) {
	reg := server.NewRegistry()
	if err := Register(reg); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := &server.Config{DataDir: dir, Coordinator: "static://7",
		Stores:  map[string]string{"default": "sqlite://" + filepath.Join(dir, "seg.db")},
		Layouts: map[string]string{"mine": "time=41:1ms,dc=3,worker=7,seq=12,epoch=2024-01-01"}}
	cfg.SetDefaults()
	env := &server.Env{Clock: clock.NewReal(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Config: cfg, Registry: reg, NodeName: "n1"}
	for _, c := range []struct {
		name  string
		kc    server.KeyConfig
		field string
		value string
	}{
		{"snowflake node field", server.KeyConfig{Strategy: "snowflake", Layout: "mine", Options: map[string]string{"dc": "abc"}}, "options.dc", "abc"},
		{"snowflake node field too large", server.KeyConfig{Strategy: "snowflake", Layout: "mine", Options: map[string]string{"dc": "8"}}, "options.dc", "8"},
		{"snowflake worker_limit", server.KeyConfig{Strategy: "snowflake", Options: map[string]string{"worker_limit": "-1"}}, "options.worker_limit", "-1"},
		{"redis block", server.KeyConfig{Strategy: "redis", Options: map[string]string{"redis": "127.0.0.1:1", "block": "ten"}}, "options.block", "ten"},
		{"redis endpoint", server.KeyConfig{Strategy: "redis", Options: map[string]string{"redis": "nowhere"}}, "options.redis", "nowhere"},
		{"ordernum format", server.KeyConfig{Strategy: "ordernum", Options: map[string]string{"format": "length=x", "key": strings.Repeat("ab", 16)}}, "options.format", "length=x"},
		{"ordernum tz", server.KeyConfig{Strategy: "ordernum", Options: map[string]string{"tz": "Mars/Olympus", "key": strings.Repeat("ab", 16)}}, "options.tz", "Mars/Olympus"},
		{"ticket conns", server.KeyConfig{Strategy: "ticket", Options: map[string]string{"servers": "mysql://127.0.0.1:1/x", "conns": "0"}}, "options.conns", "0"},
		{"uuid version", server.KeyConfig{Strategy: "uuid", Options: map[string]string{"version": "9"}}, "options.version", "9"},
		{"flake128 worker", server.KeyConfig{Strategy: "flake128", Options: map[string]string{"worker": "w1"}}, "options.worker", "w1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.kc.Store = server.DefaultStore
			st, ok := reg.Strategy(c.kc.Strategy)
			if !ok {
				t.Fatalf("strategy %q not registered", c.kc.Strategy)
			}
			found := func(ps []server.Problem) bool {
				for _, p := range ps {
					if p.Field == c.field && p.Value == c.value {
						return true
					}
				}
				return false
			}
			if ps := st.Check(c.kc, cfg); !found(ps) {
				t.Fatalf("Check: no problem for %s=%q among %v", c.field, c.value, ps)
			}
			iss, err := st.New(context.Background(), env, "k1", c.kc)
			if err == nil {
				iss.Close(context.Background())
				t.Fatalf("New built an issuer from %s=%q, which Check refuses", c.field, c.value)
			}
			var ve *server.ValidationError
			if !errors.As(err, &ve) || !found(ve.Problems) {
				t.Fatalf("New: %v; want a ValidationError naming %s=%q", err, c.field, c.value)
			}
		})
	}
}
