package client

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/idmint/idmint/clock"
)

// Options configures a Client. Every zero value means the default given.
type Options struct {
	// Token is sent as "Authorization: Bearer <Token>" (gRPC: the
	// "authorization" metadata) with every request. Default none.
	Token string
	// Tokens overrides Token for the keys it names.
	Tokens map[string]string
	// TLS configures https:// endpoints, and is handed to Dialers (the
	// gRPC one uses it for grpcs:// endpoints and makes grpc:// ones use
	// TLS too). Default: the system roots.
	TLS *tls.Config
	// HTTPClient replaces the HTTP client (then TLS is not applied to it).
	HTTPClient *http.Client
	// Dialers build the transports of endpoints whose URL scheme is not
	// http or https, by scheme (lowercase). Default none: HTTP only. For
	// gRPC, grpctransport.Dialers (package client/grpctransport) gives
	// grpc and grpcs.
	Dialers map[string]Dialer

	// Timeout bounds a call whose context has no deadline. Default 10s.
	Timeout time.Duration
	// AttemptTimeout bounds one request to one endpoint. Default 3s.
	AttemptTimeout time.Duration
	// HedgeAfter is how long a request waits for an answer before it is
	// also sent to another endpoint. Default 200ms; negative: never hedge.
	HedgeAfter time.Duration

	// RefillEvery is the interval between refills of one key the size
	// of a refill request aims at: it asks for what the draw takes in
	// RefillEvery. Default 2s.
	RefillEvery time.Duration
	// MinBatch and MaxBatch bound the IDs one refill request asks for.
	// Defaults 100 and 1,000,000.
	MinBatch, MaxBatch int
	// MaxPrefetch bounds the prefetch distance: the IDs of one key the
	// client holds plus those its refills in flight asked for. The
	// distance follows the draw (see docs/client.md), so the bound is
	// reached only by a key drawn flat out. A process that exits loses
	// at most MaxPrefetch IDs per key (gaps, never reissued); IDs of
	// batch keys (snowflake, ticket, redis) cost 8 bytes each while held,
	// ranges (segment keys) nothing. Default 4×MaxBatch.
	MaxPrefetch int
	// MaxRefills is how many refill requests of one prefetched key may be
	// in flight at once. Default 8.
	MaxRefills int
	// MaxCount is the most IDs one request asks for: the servers'
	// max_count. Default 10000, the server's default.
	MaxCount int
	// MaxInFlight is how many requests the calls of one key that is not
	// prefetched (monotonic) may have in flight at once. Concurrent calls
	// share a request; a call that arrives while every slot is busy waits
	// for the next one. Default 2.
	MaxInFlight int

	// BreakerThreshold is how many consecutive failures open an
	// endpoint's circuit breaker. Default 2.
	BreakerThreshold int
	// MinBackoff and MaxBackoff bound how long an open breaker keeps an
	// endpoint out of rotation; the backoff doubles per failure. Defaults
	// 100ms and 10s.
	MinBackoff, MaxBackoff time.Duration

	// Hooks are called on refills, failovers and hedges.
	Hooks Hooks
	// Clock is the time source for backoff, hedging and batch sizing.
	// Default the system clock.
	Clock clock.Clock
}

func (o *Options) setDefaults() {
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	if o.AttemptTimeout == 0 {
		o.AttemptTimeout = 3 * time.Second
	}
	if o.HedgeAfter == 0 {
		o.HedgeAfter = 200 * time.Millisecond
	}
	if o.RefillEvery == 0 {
		o.RefillEvery = 2 * time.Second
	}
	if o.MinBatch == 0 {
		o.MinBatch = 100
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = 1_000_000
	}
	if o.MaxPrefetch == 0 {
		o.MaxPrefetch = 4 * max(o.MaxBatch, o.MinBatch)
	}
	if o.MaxRefills == 0 {
		o.MaxRefills = 8
	}
	if o.MaxCount == 0 {
		o.MaxCount = 10000
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = 2
	}
	if o.BreakerThreshold == 0 {
		o.BreakerThreshold = 2
	}
	if o.MinBackoff == 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 10 * time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.NewReal()
	}
}

func (o *Options) validate() error {
	bad := func(field string, v any, why string) error {
		return fmt.Errorf("client: Options.%s: %v: %s", field, v, why)
	}
	switch {
	case o.Timeout < 0:
		return bad("Timeout", o.Timeout, "must not be negative")
	case o.AttemptTimeout < 0:
		return bad("AttemptTimeout", o.AttemptTimeout, "must not be negative")
	case o.RefillEvery < 0:
		return bad("RefillEvery", o.RefillEvery, "must not be negative")
	case o.MinBatch < 1:
		return bad("MinBatch", o.MinBatch, "must be at least 1")
	case o.MaxBatch < o.MinBatch:
		return bad("MaxBatch", o.MaxBatch, fmt.Sprintf("must be at least MinBatch (%d)", o.MinBatch))
	case o.MaxBatch > 1<<30:
		return bad("MaxBatch", o.MaxBatch, "must be at most 2^30")
	case o.MaxPrefetch < o.MinBatch:
		return bad("MaxPrefetch", o.MaxPrefetch, fmt.Sprintf("must be at least MinBatch (%d)", o.MinBatch))
	case int64(o.MaxPrefetch) > 1<<32:
		return bad("MaxPrefetch", o.MaxPrefetch, "must be at most 2^32")
	case o.MaxRefills < 1 || o.MaxRefills > 64:
		return bad("MaxRefills", o.MaxRefills, "must be between 1 and 64")
	case o.MaxCount < 1 || o.MaxCount > 1_000_000:
		return bad("MaxCount", o.MaxCount, "must be between 1 and 1000000 (the server's max_count range)")
	case o.MaxInFlight < 1 || o.MaxInFlight > 64:
		return bad("MaxInFlight", o.MaxInFlight, "must be between 1 and 64")
	case o.BreakerThreshold < 1:
		return bad("BreakerThreshold", o.BreakerThreshold, "must be at least 1")
	case o.MinBackoff < 0:
		return bad("MinBackoff", o.MinBackoff, "must not be negative")
	case o.MaxBackoff < o.MinBackoff:
		return bad("MaxBackoff", o.MaxBackoff, fmt.Sprintf("must be at least MinBackoff (%v)", o.MinBackoff))
	}
	for scheme, d := range o.Dialers {
		switch {
		case scheme == "http" || scheme == "https":
			return bad("Dialers", fmt.Sprintf("%q", scheme), "HTTP is built in and cannot be replaced (Options.HTTPClient replaces its client)")
		case scheme == "" || scheme != strings.ToLower(scheme) || strings.ContainsAny(scheme, ":/"):
			return bad("Dialers", fmt.Sprintf("%q", scheme), "want a lowercase URL scheme such as grpc, without :// (URLs' schemes are compared lowercase)")
		case d == nil:
			return bad("Dialers", fmt.Sprintf("%q", scheme), "the Dialer is nil")
		}
	}
	return nil
}
