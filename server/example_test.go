package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync/atomic"

	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/server/leaf"
)

// seq is a toy strategy: one in-memory counter per key.
type seq struct{ n atomic.Int64 }

func (s *seq) NextInt64s(ctx context.Context, dst []int64) error {
	end := s.n.Add(int64(len(dst)))
	for i := range dst {
		dst[i] = end - int64(len(dst)) + int64(i) + 1
	}
	return nil
}
func (s *seq) Close(ctx context.Context) error { return nil }

// A strategy plugs in through the registry; the handlers never change.
func Example() {
	reg := server.NewRegistry()
	reg.Register(server.Strategy{Name: "seq", New: func(ctx context.Context, env *server.Env, name string, k server.KeyConfig) (server.Issuer, error) {
		return &seq{}, nil
	}})
	cfg := &server.Config{DataDir: "/tmp/idmint-example", Keys: map[string]server.KeyConfig{"order": {Strategy: "seq"}}}
	cfg.SetDefaults()
	// Leaf's API is a surface beside the native one: served when asked for.
	s, err := server.New(context.Background(), server.Options{Config: cfg, Registry: reg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Surfaces: []server.NewSurface{leaf.New}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close(context.Background())
	h := s.Handler()
	for _, target := range []string{"/api/segment/get/order", "/v1/keys/order/ids?count=3", "/v1/keys/order/ids?count=0", "/v1/keys/nope/ids"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", target, nil))
		fmt.Print(w.Code, " ", w.Body.String())
		if w.Code == 200 && target[1] == 'a' {
			fmt.Println()
		}
	}
	// Output:
	// 200 1
	// 200 {"key":"order","strategy":"seq","ids":["2","3","4"]}
	// 400 {"error":{"code":"bad_count","message":"count: 0 is out of range: must be between 1 and 10000 (max_count)","field":"count"}}
	// 404 {"error":{"code":"unknown_key","message":"no key called \"nope\"","field":"key"}}
}

// Validate reports every problem of a config at once, each with its field.
func ExampleConfig_Validate() {
	reg := server.NewRegistry()
	cfg := &server.Config{Listen: "0.0.0.0:8080", MaxCount: -1, Keys: map[string]server.KeyConfig{"-bad": {Strategy: "nope"}}}
	cfg.SetDefaults()
	err := cfg.Validate(reg)
	fmt.Println(err)
	// Output:
	// server: config has 4 problem(s):
	//   listen: serving a non-loopback address needs admin_token (without it only loopback is served) (value "0.0.0.0:8080")
	//   max_count: must be between 1 and 1000000 (value "-1")
	//   keys.-bad: server: bad key name: "-bad": character '-' at byte 0 is not allowed (letters, digits, . _ : - only) (value "-bad")
	//   keys.-bad.strategy: unknown strategy; known:  (value "nope")
}
