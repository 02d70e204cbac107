package server

import (
	"strings"
	"testing"
)

// Answers carry no Go package prefixes ("server: bad key name"): the
// client did not call a Go package. The core strips them where every
// error answer is written.
func TestAnswersWithoutPackagePrefixes(t *testing.T) {
	f := newFixture(t, nil)
	w := do(f.h, req{target: "/v1/keys/a%20b/ids"})
	if b := w.Body.String(); w.Code != 400 || !strings.Contains(b, `"message":"bad key name`) || strings.Contains(b, "server: ") {
		t.Fatalf("bad key name: %d %s", w.Code, b)
	}
}

// A 503 and /readyz say that a store failed, not where it lives: no file
// path, URL or host:port of the server's stores reaches the client (the
// log has them).
func TestUnavailableNamesNoLocation(t *testing.T) {
	f := newFixture(t, nil)
	leak := `sqldb: connect postgres://idmint:xxxxx@db.internal:5432/idmint: dial tcp 10.1.2.3:5432: connect: connection refused; open /var/lib/idmint/segments.db: permission denied`
	f.cs.get("order").leak.Store(&leak)
	for _, target := range []string{"/v1/keys/order/ids", "/readyz"} {
		w := do(f.h, req{target: target})
		b := w.Body.String()
		if w.Code != 503 || !strings.Contains(b, "connect [url]: dial tcp [address]: connect: connection refused; open [path]: permission denied") {
			t.Errorf("%s: %d %s", target, w.Code, b)
		}
		for _, secret := range []string{"db.internal", "10.1.2.3", "/var/lib", "5432", "postgres:"} {
			if strings.Contains(b, secret) {
				t.Errorf("%s: the answer names %q: %s", target, secret, b)
			}
		}
	}
}
