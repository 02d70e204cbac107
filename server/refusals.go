package server

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
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

// StatusClientClosed is the status of an answer to a request whose
// client gave up while the issuer worked on it (nginx's 499): nobody reads
// it, and it is no refusal of the server's.
const StatusClientClosed = 499

// IssuerRefused maps an issuer's error on the request of ctx to the answer
// and logs the server's refusals (5xx) at a bounded rate. When the client
// gave up (ctx cancelled) the answer is 499 and the request is counted in
// idmint_requests_abandoned_total, not as a refusal.
func (s *Server) IssuerRefused(ctx context.Context, k *Key, err error) ErrorAnswer {
	if s.abandoned(ctx, k, err) {
		return ErrorAnswer{Status: StatusClientClosed, Code: CodeCancelled, Field: "key",
			Message: "key " + strconv.Quote(k.name) + ": the client gave up on the request"}
	}
	e := issuerError(err, k.name)
	if e.Status >= 500 {
		s.LogRefusal(ctx, k, err)
	}
	return e
}

// abandoned reports whether the request of ctx was given up by its client
// (its context cancelled: the connection closed, the call cancelled), and
// then counts it and logs it at debug level. An issuer's own cancellation
// (a retired key, a lost lease) leaves ctx alone and stays a refusal.
func (s *Server) abandoned(ctx context.Context, k *Key, err error) bool {
	if ctx == nil || !errors.Is(ctx.Err(), context.Canceled) {
		return false
	}
	s.metrics.abandoned.Inc()
	s.log.Debug("request abandoned by its client", "key", k.name, "err", err)
	return true
}

// LogRefusal records k's issuer refusing (a 503) the request of ctx on the
// recent list (Refusals) and logs it, unless one was logged less than
// RefusalLogEvery ago, in which case it only counts it. A request its
// client gave up on (ctx cancelled) is counted as abandoned instead.
func (s *Server) LogRefusal(ctx context.Context, k *Key, err error) {
	if s.abandoned(ctx, k, err) {
		return
	}
	s.listRefusal(k, err)
	now := int64(s.clk.Mono())
	next := k.refusals.next.Load()
	if now < next || !k.refusals.next.CompareAndSwap(next, now+int64(RefusalLogEvery)) {
		k.refusals.suppressed.Add(1)
		return
	}
	s.log.Warn("issuer refused", "key", k.name, "strategy", k.cfg.Strategy, "err", err,
		"suppressed", k.refusals.suppressed.Swap(0), "log_every", RefusalLogEvery.String())
}

const (
	// RefusalsKept is how many recent refusals the server lists.
	RefusalsKept = 50
	// refusalListEvery is how often, at most, one key's refusals enter the
	// recent list; refusals in between are counted on the next entry.
	refusalListEvery = time.Second
	// refusalErrorLen bounds an error message kept in the list.
	refusalErrorLen = 300
)

// refusalList is the ring of recent refusals. Its lock is never held
// across I/O.
type refusalList struct {
	mu    sync.Mutex
	errs  [RefusalsKept]Refusal // next is the slot written next
	next  int
	nerrs int
}

// Refusal is one entry of the server's list of recent refusals (the
// dashboard shows it).
type Refusal struct {
	Time     time.Time `json:"time"`
	Key      string    `json:"key"`
	Strategy string    `json:"strategy"`
	Code     string    `json:"code"`
	Error    string    `json:"error"`
	// Count is how many refusals of the key this entry stands for: this
	// one and those since the key's previous entry.
	Count int64 `json:"count"`
}

// listRefusal records k's refusal in the recent list, at most once per
// refusalListEvery per key (lock-free until then: refusals come at request
// rate while a store is down).
func (s *Server) listRefusal(k *Key, err error) {
	now := int64(s.clk.Mono())
	next := k.refusals.uiNext.Load()
	if now < next || !k.refusals.uiNext.CompareAndSwap(next, now+int64(refusalListEvery)) {
		k.refusals.uiSuppressed.Add(1)
		return
	}
	e := Refusal{Time: s.clk.Now().UTC(), Key: k.name, Strategy: k.cfg.Strategy,
		Code: issuerError(err, k.name).Code, Error: err.Error(), Count: 1 + k.refusals.uiSuppressed.Swap(0)}
	if len(e.Error) > refusalErrorLen {
		e.Error = strings.ToValidUTF8(e.Error[:refusalErrorLen], "") + "…"
	}
	u := &s.recent
	u.mu.Lock()
	u.errs[u.next] = e
	u.next = (u.next + 1) % len(u.errs)
	u.nerrs = min(u.nerrs+1, len(u.errs))
	u.mu.Unlock()
}

// Refusals returns the recent refusals, newest first: at most
// RefusalsKept, one entry per key per second standing for the refusals in
// between.
func (s *Server) Refusals() []Refusal {
	u := &s.recent
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]Refusal, 0, u.nerrs)
	for i := 1; i <= u.nerrs; i++ {
		out = append(out, u.errs[(u.next-i+len(u.errs))%len(u.errs)])
	}
	return out
}
