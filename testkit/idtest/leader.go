package idtest

import (
	"io"
	"net/http"
	"strings"
	"time"
)

// MonotonicLeader reports whether the idmint serve node at base says, on
// its /metrics, that it is the proven leader of the monotonic key.
func MonotonicLeader(base, key string) bool {
	hc := &http.Client{Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(base + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "idmint_monotonic_leader{") && strings.Contains(line, `key="`+key+`"`) {
			return strings.HasSuffix(line, " 1")
		}
	}
	return false
}
