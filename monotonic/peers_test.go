package monotonic

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPeersSecret: with a secret, the peer endpoint answers only requests
// carrying the token derived from the same secret; a node with another
// secret, or none, is refused with a message saying why.
func TestPeersSecret(t *testing.T) {
	t.Parallel()
	listen := func(secret string) *Peers {
		t.Helper()
		p, err := ListenPeers("127.0.0.1:0", WithSecret([]byte(secret)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	leader := listen("0123456789abcdef-shared")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name   string
		from   *Peers
		reason string
	}{
		{"same secret", listen("0123456789abcdef-shared"), "no monotonic source"}, // past authentication
		{"other secret", listen("another-secret-of-16"), "refused this node's peer token"},
		{"no secret", listen(""), "refused this node's peer token"},
	} {
		_, err := tc.from.Forward(ctx, leader.Addr(), "k", 1)
		if err == nil || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.reason)
		}
	}
	// The secret itself never travels: the token is derived from it.
	req, _ := http.NewRequest(http.MethodPost, "http://"+leader.Addr()+peerPath+"?name=k&n=1", nil)
	req.Header.Set("Authorization", "Bearer 0123456789abcdef-shared")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the raw secret as token: status %d, want 401", resp.StatusCode)
	}
}

// TestPeersKeySecret: without a node-wide secret (no admin_token), a key
// whose forwarding secret is derived from its tokens is served only to
// peers that know them; a plain request with no token is refused.
func TestPeersKeySecret(t *testing.T) {
	t.Parallel()
	listen := func(secret string) *Peers {
		t.Helper()
		p, err := ListenPeers("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		var s []byte
		if secret != "" {
			s = []byte(secret)
		}
		p.Add("k", nil, s) // registered, no source behind it: past authentication means "no monotonic source"
		return p
	}
	leader := listen("order-service-token-123")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name   string
		from   *Peers
		reason string
	}{
		{"same tokens", listen("order-service-token-123"), "no monotonic source"},
		{"other tokens", listen("someone-else-entirely"), "refused this node's peer token"},
		{"no tokens", listen(""), "refused this node's peer token"},
	} {
		_, err := tc.from.Forward(ctx, leader.Addr(), "k", 1)
		if err == nil || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.reason)
		}
	}
	resp, err := http.Post("http://"+leader.Addr()+"/idmint-monotonic/v1/next?name=k&n=1", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a request with no token for a key with tokens: %d; want 401", resp.StatusCode)
	}
}
