package server

import (
	"strings"
	"testing"
)

// /v1/decode without layout= or key= on a server with no default snowflake
// key says what to pass, instead of "bad key name" for the empty key.
func TestDecodeWithoutDefaultKey(t *testing.T) {
	f := newFixture(t, func(c *Config) { delete(c.Keys, "snowflake") })
	e := wantError(t, do(f.h, req{target: "/v1/decode/10"}), 400, CodeBadLayout, "layout")
	if !strings.Contains(e.Error.Message, "layout=") || !strings.Contains(e.Error.Message, "key=") || strings.Contains(e.Error.Message, "name") && strings.Contains(e.Error.Message, "bad key") {
		t.Fatalf("message %q: want it to say to pass layout= or key=", e.Error.Message)
	}
	if w := do(f.h, req{target: "/v1/decode/42?layout=plain"}); w.Code != 200 {
		t.Fatalf("with layout=: %d %s", w.Code, w.Body)
	}
}
