package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// A strategy's Prepare runs once, before any of its keys is built, with
// every key of the start: the config's and the key store's (a stored key
// the config shadows only once); a failing Prepare fails the start naming
// the strategy.
func TestPrepare(t *testing.T) {
	dir := t.TempDir()
	store := &FileKeyStore{Path: filepath.Join(dir, "keys.json")}
	if err := store.Save(context.Background(), map[string]KeyConfig{"api1": {Strategy: "batched"}, "cfg1": {Strategy: "batched"}}); err != nil {
		t.Fatal(err)
	}
	var calls [][]string
	built := 0
	var fail error
	reg := NewRegistry()
	must(reg.Register(Strategy{Name: "batched",
		Prepare: func(ctx context.Context, env *Env, keys map[string]KeyConfig) error {
			var names []string
			for n, k := range keys {
				if k.Store != DefaultStore {
					t.Errorf("key %s reached Prepare with store %q", n, k.Store)
				}
				names = append(names, n)
			}
			sort.Strings(names)
			if built != 0 {
				t.Errorf("Prepare ran after %d key(s) were built", built)
			}
			calls = append(calls, names)
			return fail
		},
		New: func(ctx context.Context, env *Env, name string, k KeyConfig) (Issuer, error) {
			built++
			return &counter{name: name}, nil
		}}))
	start := func() (*Server, error) {
		cfg := &Config{DataDir: dir, Keys: map[string]KeyConfig{"cfg1": {Strategy: "batched"}, "cfg2": {Strategy: "batched"}}}
		cfg.SetDefaults()
		return New(context.Background(), Options{Config: cfg, Registry: reg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), KeyStore: store})
	}
	s, err := start()
	if err != nil {
		t.Fatal(err)
	}
	s.Close(context.Background())
	if len(calls) != 1 || strings.Join(calls[0], ",") != "api1,cfg1,cfg2" {
		t.Fatalf("Prepare calls %v, want one with api1,cfg1,cfg2", calls)
	}
	if built != 3 {
		t.Fatalf("%d keys built, want 3", built)
	}
	fail, built = errors.New("store unreachable"), 0
	if _, err := start(); err == nil || !strings.Contains(err.Error(), "batched") || !strings.Contains(err.Error(), "store unreachable") {
		t.Fatalf("a failing Prepare: %v", err)
	}
	if built != 0 {
		t.Fatalf("%d keys built after Prepare failed", built)
	}
}
