package server

import (
	"sync/atomic"
	"time"
)

// RefusalLogEvery is how often, at most, one key's refusals (fenced, no
// lease, store down: the 503 answers) are logged. A refusal inside the
// interval is only counted; the next line logged carries the count as
// "suppressed". A node refusing 50,000 requests a second thus writes one
// line per key every 10 s instead of 50,000 a second.
const RefusalLogEvery = 10 * time.Second

// refusalLog throttles one key's refusal warnings. Lock-free: the refusal
// path runs at request rate while a store is down.
type refusalLog struct {
	next       atomic.Int64 // Mono (ns) before which refusals are only counted
	suppressed atomic.Int64 // refusals not logged since the last line

	uiNext       atomic.Int64 // Mono (ns) before which refusals skip the dashboard's list
	uiSuppressed atomic.Int64 // refusals not listed since the key's last entry
}

// issuerRefused maps an issuer's error to the answer and logs the server's
// refusals (5xx) at a bounded rate.
func (s *Server) issuerRefused(k *Key, err error) apiError {
	e := issuerError(err, k.name)
	if e.status >= 500 {
		s.logRefusal(k, err)
	}
	return e
}

// logRefusal logs k's refusal unless one was logged less than
// RefusalLogEvery ago, in which case it only counts it.
func (s *Server) logRefusal(k *Key, err error) {
	s.noteRefusal(k, err)
	now := int64(s.clk.Mono())
	next := k.refusals.next.Load()
	if now < next || !k.refusals.next.CompareAndSwap(next, now+int64(RefusalLogEvery)) {
		k.refusals.suppressed.Add(1)
		return
	}
	s.log.Warn("issuer refused", "key", k.name, "strategy", k.cfg.Strategy, "err", err,
		"suppressed", k.refusals.suppressed.Swap(0), "log_every", RefusalLogEvery.String())
}
