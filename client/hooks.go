package client

import "time"

// Hooks are called on events, from the goroutine that saw them; they must
// not block. Any may be nil.
type Hooks struct {
	// Refill is called after every refill of a prefetched key.
	Refill func(RefillEvent)
	// Failover is called when a request that failed is sent to another
	// endpoint.
	Failover func(FailoverEvent)
	// Hedge is called when a slow request is also sent to another
	// endpoint.
	Hedge func(HedgeEvent)
}

// FailoverEvent describes a request moved to another endpoint.
type FailoverEvent struct {
	Key      string
	From, To string // endpoint URLs
	Err      error  // From's failure
}

// HedgeEvent describes a request also sent to a second endpoint.
type HedgeEvent struct {
	Key   string
	Slow  string // the endpoint that had not answered
	To    string
	After time.Duration
}
