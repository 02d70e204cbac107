package server

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines returns the log lines containing sub.
func (s *syncBuffer) lines(sub string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range strings.Split(s.b.String(), "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}

// TestRefusalsLoggedAtBoundedRate: a key refusing every request (store
// down) is logged once per RefusalLogEvery, over HTTP, Leaf's route and
// gRPC alike, and the next line counts the refusals left out; another key
// has its own allowance.
func TestRefusalsLoggedAtBoundedRate(t *testing.T) {
	reg, cs := testRegistry()
	cfg := &Config{DataDir: t.TempDir(), Keys: map[string]KeyConfig{
		"order": {Strategy: "counter"}, "user": {Strategy: "counter"},
	}}
	cfg.SetDefaults()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var logs syncBuffer
	s, err := New(context.Background(), Options{Config: cfg, Registry: reg, Clock: clk, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	h := s.Handler()
	cs.get("order").fail.Store(true)
	cs.get("user").fail.Store(true)

	const requests = 300
	var wg sync.WaitGroup
	for c := 0; c < 3; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < requests/3; i++ {
				target := []string{"/v1/keys/order/ids?count=2", "/v1/keys/order/ids", "/v1/keys/order/range?count=5"}[i%3]
				if w := do(h, req{target: target}); w.Code < 500 {
					t.Errorf("%s answered %d while the key refuses", target, w.Code)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := logs.lines(`msg="issuer refused" key=order`); len(got) != 1 {
		t.Fatalf("%d refusal lines for %d refused requests in one interval, want 1:\n%s", len(got), requests, strings.Join(got, "\n"))
	}
	if got := logs.lines("suppressed=0"); len(got) != 1 {
		t.Fatalf("first line should report 0 suppressed: %v", got)
	}

	// The other key is not silenced by the first.
	do(h, req{target: "/v1/keys/user/ids"})
	if got := logs.lines(`msg="issuer refused" key=user`); len(got) != 1 {
		t.Fatalf("key user: %d lines, want 1", len(got))
	}

	// After the interval, one more line with the count of those left out.
	clk.Advance(RefusalLogEvery)
	do(h, req{target: "/v1/keys/order/ids"})
	do(h, req{target: "/v1/keys/order/ids"})
	got := logs.lines(`msg="issuer refused" key=order`)
	if len(got) != 2 {
		t.Fatalf("after %v: %d lines, want 2:\n%s", RefusalLogEvery, len(got), strings.Join(got, "\n"))
	}
	if want := "suppressed=" + strconv.Itoa(requests-1); !strings.Contains(got[1], want) {
		t.Fatalf("second line lacks %s: %s", want, got[1])
	}
	if !strings.Contains(got[1], "level=WARN") || !strings.Contains(got[1], "counter: store unavailable") {
		t.Fatalf("line does not carry the level and the cause: %s", got[1])
	}
}

// TestRefusalTruncated: a long error message is cut to refusalErrorLen bytes
// of valid UTF-8.
func TestRefusalTruncated(t *testing.T) {
	f := newFixture(t, nil)
	k := f.s.Lookup("order")
	f.s.listRefusal(k, errLong(strings.Repeat("é", refusalErrorLen)))
	e := f.s.Refusals()[0]
	if len(e.Error) > refusalErrorLen+len("…") || !strings.HasSuffix(e.Error, "…") || !utf8Valid(e.Error) {
		t.Fatalf("error kept as %d bytes: %q", len(e.Error), e.Error)
	}
}

type errLong string

func (e errLong) Error() string { return string(e) }

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }
