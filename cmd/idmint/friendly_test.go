package main

import (
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
		code, text, errOut := runCLI(t, "decode", "--layout", c.layout, c.id)
		if code != 0 {
			t.Fatalf("decode %s: exit %d %s", c.id, code, errOut)
		}
		if !strings.Contains(text, "\n  friendly   "+c.friendly+"\n") || !strings.Contains(text, "\n  js_safe    "+c.js) {
			t.Fatalf("decode %s: want friendly %q and js_safe %q in\n%s", c.id, c.friendly, c.js, text)
		}
		// The friendly form decodes to the same ID and parts, text and JSON.
		for _, asJSON := range []bool{false, true} {
			args := []string{"decode", "--layout", c.layout}
			if asJSON {
				args = append(args, "--json")
			}
			_, want, _ := runCLI(t, append(args, c.id)...)
			code, back, errOut := runCLI(t, append(args, c.friendly)...)
			if code != 0 || back != want {
				t.Fatalf("decode %v %s: exit %d %s\n got %s\nwant %s", args, c.friendly, code, errOut, back, want)
			}
			if asJSON && !strings.Contains(back, `"id":"`+c.id+`"`) {
				t.Fatalf("decode --json %s: %s; want id %s", c.friendly, back, c.id)
			}
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
