package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
)

type tokenHash [sha256.Size]byte

func hashTokens(ts []string) []tokenHash {
	out := make([]tokenHash, len(ts))
	for i, t := range ts {
		out[i] = sha256.Sum256([]byte(t))
	}
	return out
}

// bearer returns the token of an `Authorization: Bearer <t>` header.
func bearer(r *http.Request) (string, bool) { return bearerValue(r.Header.Get("Authorization")) }

// bearerValue returns the token of an Authorization value "Bearer <t>".
func bearerValue(h string) (string, bool) {
	const p = "Bearer "
	if len(h) <= len(p) || !strings.EqualFold(h[:len(p)], p) {
		return "", false
	}
	return strings.TrimSpace(h[len(p):]), true
}

// authorize checks the request's bearer token against allowed, comparing
// SHA-256 digests in constant time (neither the token's content nor its
// length leaks through timing). It returns 0 when allowed, 401 when no
// token was presented, 403 when a wrong one was. Every allowed token is
// compared, so the time does not depend on which one matched.
func authorize(r *http.Request, allowed []tokenHash) int {
	if len(allowed) == 0 {
		return 0
	}
	return authorizeValue(r.Header.Get("Authorization"), allowed)
}

// authorizeValue is authorize for an Authorization value (HTTP header or
// gRPC metadata).
func authorizeValue(h string, allowed []tokenHash) int {
	if len(allowed) == 0 {
		return 0
	}
	t, ok := bearerValue(h)
	if !ok {
		return http.StatusUnauthorized
	}
	sum := sha256.Sum256([]byte(t))
	match := 0
	for i := range allowed {
		match |= subtle.ConstantTimeCompare(sum[:], allowed[i][:])
	}
	if match == 1 {
		return 0
	}
	return http.StatusForbidden
}

// isLoopbackRemote reports whether the request came from a loopback address.
func isLoopbackRemote(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
