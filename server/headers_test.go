package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

type leaderIssuer struct {
	counter
	leader string
}

func (l *leaderIssuer) LeaderNode() string { return l.leader }

// Answers for a key name the node, once the request may use the key;
// they say its strategy and a generation that a delete and re-create
// change, /range included; a request refused before (no such key, no
// token, a bad path) learns neither the node nor anything about the key.
func TestAnswerHeaders(t *testing.T) {
	f := newFixture(t, nil)
	for _, path := range []string{"/v1/keys/order/ids?count=2", "/v1/keys/order/range?count=5", "/v1/snowflake/snowflake", "/v1/decode/12?key=order"} {
		if got := do(f.h, req{target: path}).Header().Get(HeaderNode); got != NodeName() {
			t.Errorf("%s: %s = %q, want %q", path, HeaderNode, got, NodeName())
		}
	}
	for _, r := range []req{{target: "/v1/keys/nosuch/ids"}, {target: "/healthz"}, {target: "/nosuch"}, {target: "/v1//keys"},
		{target: "/v1/keys/secret/ids"}, {target: "/v1/keys/secret/ids", hdr: map[string]string{"Authorization": "Bearer wrong-token-0123456789"}},
		{method: "PUT", target: "/v1/keys/order/ids"}, {target: "/v1/keys/order/ids?count=abc"}, {target: "/v1/decode/12?key=secret"}} {
		rec := do(f.h, r)
		for _, h := range []string{HeaderNode, HeaderStrategy, HeaderGeneration} {
			if v, ok := rec.Header()[h]; ok {
				t.Errorf("%s %s: %d carries %s %q", r.method, r.target, rec.Code, h, v)
			}
		}
	}
	if got := do(f.h, req{target: "/v1/keys/secret/ids", hdr: map[string]string{"Authorization": "Bearer " + keyTok}}).Header().Get(HeaderNode); got != NodeName() {
		t.Errorf("with the key's token: %s = %q, want %q", HeaderNode, got, NodeName())
	}
	rec := do(f.h, req{target: "/v1/keys/order/range?count=5"})
	if got := rec.Header().Get(HeaderStrategy); got != "counter" {
		t.Errorf("range: %s = %q, want counter", HeaderStrategy, got)
	}
	gen := rec.Header().Get(HeaderGeneration)
	if gen == "" {
		t.Fatalf("range: no %s", HeaderGeneration)
	}
	if g := do(f.h, req{target: "/v1/keys/order/ids"}).Header().Get(HeaderGeneration); g != gen {
		t.Errorf("generation changed without a re-create: %q then %q", gen, g)
	}
	if other := do(f.h, req{target: "/v1/keys/snowflake/ids"}).Header().Get(HeaderGeneration); other == gen {
		t.Errorf("two keys share generation %q", gen)
	}
	if rec := do(f.h, req{target: "/v1/keys/secret/ids"}); rec.Code != http.StatusUnauthorized || rec.Header().Get(HeaderStrategy) != "" {
		t.Errorf("no token: %d, %s %q; want 401 and no strategy", rec.Code, HeaderStrategy, rec.Header().Get(HeaderStrategy))
	}
	create := func(strategy string) {
		t.Helper()
		if _, err := f.s.CreateKey(context.Background(), "made", KeyConfig{Strategy: strategy}); err != nil {
			t.Fatalf("create made (%s): %v", strategy, err)
		}
	}
	create("counter")
	made := do(f.h, req{target: "/v1/keys/made/ids"}).Header().Get(HeaderGeneration)
	if err := f.s.DeleteKey(context.Background(), "made"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	create("text")
	rec = do(f.h, req{target: "/v1/keys/made/ids"})
	if g := rec.Header().Get(HeaderGeneration); g == made || g == "" {
		t.Errorf("generation after delete and re-create = %q, want a new token (was %q)", g, made)
	}
	if got := rec.Header().Get(HeaderStrategy); got != "text" {
		t.Errorf("strategy after re-create = %q, want text", got)
	}
}

// A key whose issuer reports a leader names it on its answers, and says
// nothing when the leader is unknown.
func TestAnswerHeadersLeader(t *testing.T) {
	iss := &leaderIssuer{leader: "node-b"}
	var h keyHeaders
	h.init([]string{"node-a"}, "monotonic", iss)
	hd := http.Header{}
	h.set(hd)
	if got := hd.Get(HeaderLeader); got != "node-b" {
		t.Fatalf("%s = %q, want node-b", HeaderLeader, got)
	}
	if got := hd.Get(HeaderNode); got != "node-a" {
		t.Fatalf("%s = %q, want node-a", HeaderNode, got)
	}
	iss.leader = ""
	hd = http.Header{}
	h.set(hd)
	if v, ok := hd[HeaderLeader]; ok {
		t.Fatalf("%s sent with no leader known: %q", HeaderLeader, v)
	}
	iss.leader = "node-c"
	h.set(hd)
	if got := hd.Get(HeaderLeader); got != "node-c" {
		t.Fatalf("%s = %q after the leader changed, want node-c", HeaderLeader, got)
	}
}

// The generation is a random prefix and a counter of key builds: it tells
// builds apart, across restarts too, and says nothing of when the process
// started (it used to be the start time in base 36).
func TestGenerationSaysNothing(t *testing.T) {
	a, b := newGeneration(), newGeneration()
	pa, ca, _ := strings.Cut(a, ".")
	pb, cb, _ := strings.Cut(b, ".")
	if pa != pb || ca == cb {
		t.Fatalf("two builds in one process: %q, %q; want one prefix, two counters", a, b)
	}
	if len(pa) != 16 {
		t.Fatalf("prefix %q: want 64 bits in hex", pa)
	}
	now := time.Now().UnixNano()
	for _, base := range []int{10, 16, 36} {
		if n, err := strconv.ParseInt(pa, base, 64); err == nil && n > now-int64(24*time.Hour) && n <= now {
			t.Fatalf("prefix %q reads as a time of today in base %d", pa, base)
		}
	}
}
