package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/monotonic"
)

// TestDecodeMonotonic: a timestamp-form monotonic ID decodes with idmint
// decode (--format monotonic, or --layout monotonic as /v1/decode takes
// it) into the millisecond and logical counter it was made of.
func TestDecodeMonotonic(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 4, 3, 8, 969e6, time.UTC)
	id := strconv.FormatInt(monotonic.Stamp(at)|5, 10)
	for _, flag := range []string{"--format", "--layout"} {
		code, out, errOut := runCLI(t, "decode", flag, "monotonic", id)
		if code != 0 || !strings.Contains(out, "2026-12-01T04:03:08.969Z") || !strings.Contains(out, "sequence   5 (the logical counter)") {
			t.Fatalf("decode %s monotonic %s: exit %d\n%s%s", flag, id, code, out, errOut)
		}
	}
	if code, _, errOut := runCLI(t, "decode", "--format", "monotonic", "--", "-5"); code != 2 || !strings.Contains(errOut, "negative") {
		t.Fatalf("decode of a negative monotonic ID: exit %d %s", code, errOut)
	}
}
