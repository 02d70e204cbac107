package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idmint/idmint/clock"
)

// endpoint is one server and its health.
type endpoint struct {
	url  string
	t    transport
	idx  int                    // its index in pool.eps
	node atomic.Pointer[string] // the node name its answers give (Idmint-Node), nil until one did

	mu        sync.Mutex
	fails     int           // consecutive failures
	openUntil time.Duration // client mono time the breaker stays open until
	probing   bool          // a half-open probe is in flight
	lastErr   error

	requests, failures atomic.Int64
}

// pool sends requests to endpoints with failover, hedging and a circuit
// breaker per endpoint.
type pool struct {
	eps   []*endpoint
	clk   clock.Clock
	opts  *Options
	hooks *Hooks
	rr    atomic.Uint32

	failovers, hedges atomic.Int64
}

// learn records the node name an answer of e gave.
func (e *endpoint) learn(node string) {
	if node == "" {
		return
	}
	if p := e.node.Load(); p == nil || *p != node {
		e.node.Store(&node)
	}
}

// nodeName is the name e's answers last gave, "" if none did.
func (e *endpoint) nodeName() string {
	if p := e.node.Load(); p != nil {
		return *p
	}
	return ""
}

// byNode returns the endpoint whose answers name node, nil if none does.
func (p *pool) byNode(node string) *endpoint {
	if node == "" {
		return nil
	}
	for _, e := range p.eps {
		if n := e.node.Load(); n != nil && *n == node {
			return e
		}
	}
	return nil
}

// state reports whether e's breaker is closed at now, and if not whether
// it is half-open (one probe may go).
func (e *endpoint) state(now time.Duration, threshold int) (closed, halfOpen bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if now < e.openUntil {
		return false, false
	}
	if e.fails < threshold {
		return true, false
	}
	return false, !e.probing
}

// pick returns the endpoints to try, in order: prefer first when it may
// be tried (a key's leader), then half-open ones (one probe each: a node
// that came back rejoins with the next request, and one still down costs
// a failover or a hedge), then closed ones starting at a rotating index.
// When none may be tried, retryAt is the soonest end of a backoff.
func (p *pool) pick(prefer *endpoint) (order []*endpoint, retryAt time.Duration) {
	now := p.clk.Mono()
	n := len(p.eps)
	start := int(p.rr.Add(1)) % n
	var half []*endpoint
	var first *endpoint
	retryAt = -1
	for i := range n {
		e := p.eps[(start+i)%n]
		closed, ho := e.state(now, p.opts.BreakerThreshold)
		switch {
		case e == prefer && (closed || ho):
			first = e
		case closed:
			order = append(order, e)
		case ho:
			half = append(half, e)
		default:
			e.mu.Lock()
			at := e.openUntil
			if at <= now { // probe in flight: look again soon
				at = now + p.opts.MinBackoff
			}
			e.mu.Unlock()
			if retryAt < 0 || at < retryAt {
				retryAt = at
			}
		}
	}
	order = append(half, order...)
	if first != nil {
		order = append([]*endpoint{first}, order...)
	}
	return order, retryAt
}

// lastFailure is the failure that opened a breaker, for an error that
// says why every endpoint is backing off: the first endpoint's that has
// one, nil when none has.
func (p *pool) lastFailure() error {
	for _, e := range p.eps {
		e.mu.Lock()
		err := e.lastErr
		e.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// endProbe ends e's probe, if it was one, without judging e: the attempt
// lost to another, was cancelled by its caller, or was refused for the
// request's own fault.
func (e *endpoint) endProbe() {
	e.mu.Lock()
	e.probing = false
	e.mu.Unlock()
}

// success closes e's breaker.
func (p *pool) success(e *endpoint) {
	e.mu.Lock()
	e.fails, e.openUntil, e.probing, e.lastErr = 0, 0, false, nil
	e.mu.Unlock()
}

// failure counts a failure of e; from BreakerThreshold consecutive ones
// on, e is left alone for a backoff doubling from MinBackoff to MaxBackoff
// (with ±20 % jitter so clients do not come back in step), and never for
// less than the server's Retry-After.
func (p *pool) failure(e *endpoint, err error) {
	e.failures.Add(1)
	var ra time.Duration
	var ce *Error
	if errors.As(err, &ce) {
		ra = ce.RetryAfter
	}
	now := p.clk.Mono()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fails++
	e.probing = false
	e.lastErr = err
	var back time.Duration
	if e.fails >= p.opts.BreakerThreshold {
		back = p.opts.MinBackoff << min(e.fails-p.opts.BreakerThreshold, 20)
		back = min(back, p.opts.MaxBackoff)
		back = back*4/5 + time.Duration(rand.Int64N(int64(back)*2/5+1))
	}
	if ra > 0 {
		back = max(back, min(ra, p.opts.MaxBackoff))
	}
	if back > 0 {
		e.openUntil = max(e.openUntil, now+back)
	}
}

type result[T any] struct {
	v   T
	err error
	e   *endpoint
}

// do runs op against endpoints until one succeeds, prefer first when it
// is not nil and may be tried: a retryable failure moves on to the next
// endpoint at once (a failover), and an attempt still unanswered after
// HedgeAfter is joined by one on the next endpoint (a hedge); the first
// success wins and the others are cancelled. A permanent failure is
// returned at once. When every endpoint tried has failed, or none may be
// tried, the error is an *unavailable.
func do[T any](ctx context.Context, p *pool, key string, prefer *endpoint, op func(context.Context, *endpoint) (T, error)) (T, error) {
	var zero T
	order, retryAt := p.pick(prefer)
	if len(order) == 0 {
		return zero, &unavailable{last: p.lastFailure(), retryAt: retryAt}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan result[T], len(order))
	type attempt struct {
		e       *endpoint
		started time.Duration
	}
	var running []attempt
	next := 0
	launch := func() {
		e := order[next]
		next++
		e.mu.Lock()
		if e.fails >= p.opts.BreakerThreshold {
			e.probing = true
		}
		e.mu.Unlock()
		e.requests.Add(1)
		running = append(running, attempt{e, p.clk.Mono()})
		go func() {
			actx, acancel := context.WithTimeout(ctx, p.opts.AttemptTimeout)
			v, err := op(actx, e)
			acancel()
			results <- result[T]{v, err, e}
		}()
	}
	launch()
	var hedge <-chan struct{}
	armHedge := func() {
		if p.opts.HedgeAfter <= 0 || next >= len(order) {
			hedge = nil
			return
		}
		ch := make(chan struct{})
		hedge = ch
		go func() {
			if p.clk.Sleep(ctx, p.opts.HedgeAfter) == nil {
				close(ch)
			}
		}()
	}
	armHedge()
	var last error
	for len(running) > 0 {
		select {
		case r := <-results:
			for i, a := range running {
				if a.e == r.e {
					running = append(running[:i], running[i+1:]...)
					break
				}
			}
			if r.err == nil {
				p.success(r.e)
				// The attempts still running lost to a hedge: they were
				// slower than HedgeAfter, which counts against them.
				now := p.clk.Mono()
				for _, a := range running {
					if now-a.started >= p.opts.HedgeAfter && p.opts.HedgeAfter > 0 {
						p.failure(a.e, &Error{Endpoint: a.e.url, Message: "slower than the hedge threshold " + p.opts.HedgeAfter.String(), Retryable: true})
					} else {
						a.e.endProbe()
					}
				}
				return r.v, nil
			}
			if !retryable(r.err) {
				// The endpoint answered and refused the request itself
				// (400, 401, 403, unknown key): that says nothing about its
				// health either way, so its breaker neither counts it nor
				// forgets earlier failures. Counting it opened the breaker
				// of a healthy node on the bad_count answers the client
				// halves its requests by.
				r.e.endProbe()
				return zero, r.err
			}
			if ctx.Err() != nil && !errors.Is(r.err, context.DeadlineExceeded) {
				// Cancelled by our caller: not the endpoint's fault.
				r.e.endProbe()
			} else {
				p.failure(r.e, r.err)
			}
			last = r.err
			if ctx.Err() != nil {
				continue
			}
			if next < len(order) {
				p.failovers.Add(1)
				if p.hooks.Failover != nil {
					p.hooks.Failover(FailoverEvent{Key: key, From: r.e.url, To: order[next].url, Err: r.err})
				}
				launch()
				armHedge()
			}
		case <-hedge:
			p.hedges.Add(1)
			if p.hooks.Hedge != nil {
				p.hooks.Hedge(HedgeEvent{Key: key, Slow: running[len(running)-1].e.url, To: order[next].url, After: p.opts.HedgeAfter})
			}
			launch()
			armHedge()
		case <-ctx.Done():
			// Wait for nothing more; the attempts see the cancellation.
			for _, a := range running {
				a.e.endProbe()
			}
			return zero, &unavailable{last: errors.Join(last, ctx.Err()), tried: next}
		}
	}
	_, retryAt = p.pick(nil)
	return zero, &unavailable{last: last, tried: next, retryAt: retryAt}
}
