package strategies

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/testkit/testserver"
)

// TestMonotonicPeerExposure: the unauthenticated forwarding listener stays
// on loopback unless admin_token is set (forwarded requests then carry a
// token derived from it), and a wildcard listener needs advertise.
func TestMonotonicPeerExposure(t *testing.T) {
	t.Parallel()
	const token = "an-admin-token-of-32-characters!"
	for _, tc := range []struct {
		name  string
		opts  map[string]string
		token string
		field string // "" when fine
	}{
		{"loopback without token", map[string]string{"peer_listen": "127.0.0.1:7070"}, "", ""},
		{"localhost without token", map[string]string{"peer_listen": "localhost:7070"}, "", ""},
		{"private address without token", map[string]string{"peer_listen": "10.0.0.5:7070"}, "", "options.peer_listen"},
		{"wildcard without token", map[string]string{"peer_listen": ":7070", "advertise": "10.0.0.5:7070"}, "", "options.peer_listen"},
		{"private address with token", map[string]string{"peer_listen": "10.0.0.5:7070"}, token, ""},
		{"wildcard with token and advertise", map[string]string{"peer_listen": "0.0.0.0:7070", "advertise": "10.0.0.5:7070"}, token, ""},
		{"wildcard without advertise", map[string]string{"peer_listen": "0.0.0.0:7070"}, token, "options.advertise"},
		{"empty host without advertise", map[string]string{"peer_listen": ":7070"}, token, "options.advertise"},
	} {
		ps := checkMonotonic(server.KeyConfig{Strategy: "monotonic", Options: tc.opts}, &server.Config{AdminToken: tc.token})
		switch {
		case tc.field == "" && len(ps) != 0:
			t.Errorf("%s: problems %v, want none", tc.name, ps)
		case tc.field != "" && (len(ps) != 1 || ps[0].Field != tc.field):
			t.Errorf("%s: problems %v, want one naming %s", tc.name, ps, tc.field)
		case tc.field == "options.peer_listen" && !strings.Contains(ps[0].Message, "admin_token"):
			t.Errorf("%s: message %q does not say admin_token is needed", tc.name, ps[0].Message)
		}
	}
}

func TestMonotonicCoordinatorPrefix(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ url, hosts, prefix string }{
		{"etcd://h1:2379/app?name=orders", "h1:2379", "/app/orders/monotonic/"},
		{"etcd://h1,h2/app", "h1:2379,h2:2379", "/app/default/monotonic/"},
		{"etcd://h1:2379,h2:2379/app?name=o", "h1:2379,h2:2379", "/app/o/monotonic/"},
		{"etcd://h1", "h1:2379", "/idmint/default/monotonic/"},
		{"file:///tmp/w", "", ""},
	} {
		hs, p := MonotonicCoordinatorPrefix(tc.url)
		if strings.Join(hs, ",") != tc.hosts || p != tc.prefix {
			t.Errorf("%s: %v %q, want %s %q", tc.url, hs, p, tc.hosts, tc.prefix)
		}
	}
}

// TestAttackMonotonicPeerNeedsKeyTokens: on a node without admin_token,
// the forwarding endpoint of a monotonic key that has tokens answered 200
// with IDs to a request that carried no token at all, while the public
// route answered 401. It now refuses such a request.
func TestAttackMonotonicPeerNeedsKeyTokens(t *testing.T) {
	addr := testserver.Addr(t, testserver.Etcd)
	keys := map[string]server.KeyConfig{"tx": {Strategy: "monotonic", Tokens: []string{"tx-service-token-0123456789"}, Options: map[string]string{"ttl": "2"}}}
	_, h, log := serveMono(t, keys, t.TempDir(), etcdCoordinator(t, addr, "peer"))
	req := httptest.NewRequest("GET", "/v1/keys/tx/ids?count=1", nil)
	req.Header.Set("Authorization", "Bearer tx-service-token-0123456789")
	testserver.Eventually(t, "the key to answer its token", 20*time.Second, func() bool {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code == http.StatusOK
	})
	m := regexp.MustCompile(`peer=(127\.0\.0\.1:\d+)`).FindStringSubmatch(log.String())
	if m == nil {
		t.Fatalf("no peer address in the log:\n%s", log.String())
	}
	resp, err := http.Post("http://"+m[1]+"/idmint-monotonic/v1/next?name=tx&n=5", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the peer endpoint answered %d %q to a request without a token for a key with tokens; want 401", resp.StatusCode, body)
	}
}
