package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestDecodeFriendly: decode prints the friendly form of a snowflake ID, and
// decoding that friendly text gives the same ID and parts back, for the
// default layout and for jssafe.
func TestDecodeFriendly(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		layout, id, friendly, js string
	}{
		{"twitter", "1050118621198921728", "20181010201924211-10-27-0", "no"},
		{"jssafe", "198015710397969", "20261201095959120-3-17", "yes"},
	} {
		code, out, errOut := runCLI(t, "decode", "--json", "--layout", c.layout, c.id)
		if code != 0 {
			t.Fatalf("decode %s: exit %d %s", c.id, code, errOut)
		}
		var m map[string]string
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("not JSON: %v %q", err, out)
		}
		if m["friendly"] != c.friendly || !strings.HasPrefix(m["js_safe"], c.js) {
			t.Fatalf("decode %s: friendly %q js_safe %q; want %q, %q", c.id, m["friendly"], m["js_safe"], c.friendly, c.js)
		}
		args := []string{"decode", "--json", c.friendly, "--layout", c.layout}
		code, back, errOut := runCLI(t, args...)
		if code != 0 || back != out {
			t.Fatalf("decode %s: exit %d %s\n got %s\nwant %s", c.friendly, code, errOut, back, out)
		}
	}
	code, _, errOut := runCLI(t, "decode", "--layout", "jssafe", "20261201095959123-3-17")
	if code != 2 || !strings.Contains(errOut, "not the start of a tick") {
		t.Fatalf("misaligned friendly time: exit %d %q", code, errOut)
	}
	code, out, _ := runCLI(t, "layouts")
	if code != 0 || !strings.Contains(out, "jssafe") || !strings.Contains(out, "2112-02-09") || !strings.Contains(out, "51200") {
		t.Fatalf("layouts lacks jssafe's end date or capacity:\n%s", out)
	}
}
