package server

import (
	"context"
	"net/http"
	"testing"
)

type leaderIssuer struct {
	counter
	leader string
}

func (l *leaderIssuer) LeaderNode() string { return l.leader }

// Every answer names the node; answers for a key say its strategy and a
// generation that a delete and re-create change, /range included; a
// request refused by a key's token learns nothing about the key.
func TestAnswerHeaders(t *testing.T) {
	f := newFixture(t, nil)
	for _, path := range []string{"/v1/keys/order/ids?count=2", "/v1/keys/order/range?count=5", "/v1/keys/nosuch/ids", "/healthz"} {
		if got := do(f.h, req{target: path}).Header().Get(HeaderNode); got != NodeName() {
			t.Errorf("%s: %s = %q, want %q", path, HeaderNode, got, NodeName())
		}
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
	h.init("monotonic", iss, 1)
	hd := http.Header{}
	h.set(hd)
	if got := hd.Get(HeaderLeader); got != "node-b" {
		t.Fatalf("%s = %q, want node-b", HeaderLeader, got)
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
