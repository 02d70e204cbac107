package strategies

import (
	"regexp"
	"testing"

	"github.com/idmint/idmint/server"
)

// TestSegmentStoreErrorsExported: a segment key's store failures are a
// metric (idmint_segment_store_errors_total, idmint_segment_store_failing)
// from the start, so an outage the double buffer absorbs shows up.
func TestSegmentStoreErrorsExported(t *testing.T) {
	_, h := serveWith(t, map[string]server.KeyConfig{"order": {Strategy: "segment"}}, setup{})
	if code, body := get(t, h, "GET", "/v1/keys/order/ids?count=5", ""); code != 200 {
		t.Fatalf("ids: %d %s", code, body)
	}
	_, body := get(t, h, "GET", "/metrics", "")
	for _, re := range []string{
		`# TYPE idmint_segment_store_errors_total counter\n`,
		`idmint_segment_store_errors_total\{key="order",strategy="segment"\} 0\n`,
		`idmint_segment_store_failing\{key="order",strategy="segment"\} 0\n`,
	} {
		if !regexp.MustCompile(re).MatchString(body) {
			t.Errorf("/metrics lacks %s", re)
		}
	}
}
