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
