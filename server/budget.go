package server

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/peer"
)

// The answer budget bounds the memory that clients which do not read can
// pin. Every answer larger than answerFree bytes holds its size in the
// budget from before its IDs are issued until it has left the process:
// on HTTP until the handler's write returns (each such write has
// answer_timeout to finish, or the connection is closed); on gRPC, where
// an answer is queued and the handler returns at once, until that many
// bytes have been written to the connection it is queued on (a connection
// whose owed bytes make no progress for answer_timeout is closed, which
// frees its queue). 2,000 HTTP connections asking for 10,000 UUIDs each
// and never reading used to pin 1.7 GB; 1,024 unary calls on HTTP/2
// windows of 0, 378 MB.
//
// A request that finds the budget spent waits up to answerWait, in
// arrival order, then is refused with 503 and Retry-After. Answers of at
// most answerFree bytes (single IDs, ranges, errors) never wait: they are
// bounded by the connection caps instead (max_conns, GRPCMaxConns x
// GRPCMaxStreamsPerConn, each at most answerFree).
const (
	answerFree = 1 << 10
	answerWait = time.Second
)

type answerBudget struct {
	limit int64

	mu      sync.Mutex
	used    int64
	waiters []*budgetWaiter // FIFO
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed when granted
	done  bool          // granted or given up, under mu
}

func newAnswerBudget(limit int64) *answerBudget { return &answerBudget{limit: limit} }

// acquire takes n bytes (n is clipped to the whole budget, so any answer
// can go once the others have), waiting up to wait and while ctx lasts.
// It reports whether it got them.
func (b *answerBudget) acquire(ctx context.Context, n int64, wait time.Duration) bool {
	n = min(n, b.limit)
	b.mu.Lock()
	if len(b.waiters) == 0 && b.used+n <= b.limit {
		b.used += n
		b.mu.Unlock()
		return true
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-w.ready:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.done { // granted while giving up: keep it
		return true
	}
	w.done = true
	for i, x := range b.waiters {
		if x == w {
			b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
			break
		}
	}
	b.grantLocked() // the head may have been this one
	return false
}

// force takes n bytes without waiting, beyond the limit if need be: for
// answers that turned out larger than reserved (their bytes exist already).
func (b *answerBudget) force(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	b.used += n
	b.mu.Unlock()
}

// release gives n bytes back and wakes the waiters they admit.
func (b *answerBudget) release(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	if b.used < 0 {
		b.used = 0
	}
	b.grantLocked()
	b.mu.Unlock()
}

func (b *answerBudget) grantLocked() {
	for len(b.waiters) > 0 {
		w := b.waiters[0]
		if b.used+w.n > b.limit {
			return
		}
		b.used += w.n
		w.done = true
		close(w.ready)
		b.waiters[0] = nil
		b.waiters = b.waiters[1:]
	}
}

// inUse returns the bytes held, for metrics and tests.
func (b *answerBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// BudgetRefusal is the answer to a request that found the budget spent
// (HoldAnswer refused it).
func (s *Server) BudgetRefusal() ErrorAnswer {
	return ErrorAnswer{Status: 503, Code: CodeUnavailable, Field: "answer_budget", RetryAfter: time.Second,
		Message: "the server already holds answer_budget (" + strconv.FormatInt(s.budget.limit, 10) +
			" bytes) of answers that their clients have not read yet; retry, or ask for fewer IDs"}
}

// maxSmallIDBytes bounds what one ID of any strategy takes in an answer,
// so that a request for a few IDs is known to go free without looking its
// key up (the hot path of single IDs).
const maxSmallIDBytes = 128

// HoldAnswer reserves the estimated size of an answer of n IDs of the key
// called name; 0 when the answer is small enough to go free. ok is false
// when the budget stayed spent.
func (s *Server) HoldAnswer(ctx context.Context, name string, n int) (held int64, ok bool) {
	if int64(n)*maxSmallIDBytes+64 <= answerFree {
		return 0, true
	}
	estimate := s.answerEstimate(name, n)
	if estimate <= answerFree {
		return 0, true
	}
	if !s.budget.acquire(ctx, estimate, answerWait) {
		s.metrics.budgetRefused.Inc()
		return 0, false
	}
	return min(estimate, s.budget.limit), true
}

// settle turns a reservation of held bytes into one of exactly size.
func (s *Server) settle(held, size int64) int64 {
	if held == 0 {
		return 0
	}
	if size > held {
		s.budget.force(size - held)
	} else {
		s.budget.release(held - size)
	}
	return size
}

// owe hands a gRPC answer's reservation to the connection it is queued
// on, which gives it back as the bytes are written (or when it closes). A
// call whose connection is unknown (a test's own listener) gives it back
// at once: such a server has no watchdog either.
func (s *Server) owe(ctx context.Context, held int64) {
	if held == 0 {
		return
	}
	if p, ok := peer.FromContext(ctx); ok && s.grpcConns != nil {
		if c := s.grpcConns.lookup(p.Addr); c != nil && c.owe(held) {
			return
		}
	}
	s.budget.release(held)
}

// owing tracks, per connection, answer bytes reserved and not yet
// written, so that a connection whose client stops reading is closed and
// its reservation given back.
type owing struct {
	budget *answerBudget
	now    func() time.Duration

	owed     atomic.Int64
	progress atomic.Int64 // now() when owed bytes were last written or first owed
	closed   atomic.Bool
}

func (o *owing) owe(n int64) bool {
	if o.closed.Load() {
		return false
	}
	if o.owed.Add(n) == n {
		o.progress.Store(int64(o.now()))
	}
	if o.closed.Load() { // closed meanwhile: give back what close missed
		o.settleAll()
	}
	return true
}

// wrote gives back up to n owed bytes.
func (o *owing) wrote(n int) {
	if n <= 0 || o.owed.Load() == 0 {
		return
	}
	for {
		owed := o.owed.Load()
		r := min(owed, int64(n))
		if r <= 0 {
			return
		}
		if o.owed.CompareAndSwap(owed, owed-r) {
			o.budget.release(r)
			o.progress.Store(int64(o.now()))
			return
		}
	}
}

// stalled reports whether bytes are owed and none were written for d.
func (o *owing) stalled(d time.Duration) bool {
	return o.owed.Load() > 0 && o.now()-time.Duration(o.progress.Load()) > d
}

func (o *owing) settleAll() {
	o.closed.Store(true)
	if r := o.owed.Swap(0); r > 0 {
		o.budget.release(r)
	}
}

// connIndex finds a gRPC connection by its remote address.
type connIndex struct {
	mu sync.Mutex
	m  map[string]*limitConn
}

func (x *connIndex) add(c *limitConn) {
	x.mu.Lock()
	x.m[c.RemoteAddr().String()] = c
	x.mu.Unlock()
}

func (x *connIndex) remove(c *limitConn) {
	x.mu.Lock()
	if x.m[c.RemoteAddr().String()] == c {
		delete(x.m, c.RemoteAddr().String())
	}
	x.mu.Unlock()
}

func (x *connIndex) lookup(a net.Addr) *limitConn {
	if a == nil {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.m[a.String()]
}

// closeStalled closes every connection owing bytes that made no progress
// for d.
func (x *connIndex) closeStalled(d time.Duration) int {
	x.mu.Lock()
	var stuck []*limitConn
	for _, c := range x.m {
		if c.owing != nil && c.owing.stalled(d) {
			stuck = append(stuck, c)
		}
	}
	x.mu.Unlock()
	for _, c := range stuck {
		c.Close()
	}
	return len(stuck)
}

// answerEstimate is the size an answer of n IDs of the key called name is
// expected to reach: the largest bytes per ID its answers have had, or a
// guess before the first.
func (s *Server) answerEstimate(name string, n int) int64 {
	per := int64(48) // a text ID's JSON and its string
	if k := s.Lookup(name); k != nil {
		if b := k.idBytes.Load(); b > 0 {
			per = b
		} else if k.ints != nil {
			per = 22 // `"-9223372036854775808",`
		}
	}
	return int64(n)*per + 64
}

// noteAnswer records the bytes per ID of an answer of n IDs.
func (k *Key) noteAnswer(n int, size int64) {
	if n <= 0 {
		return
	}
	per := (size + int64(n) - 1) / int64(n)
	for {
		old := k.idBytes.Load()
		if per <= old || k.idBytes.CompareAndSwap(old, per) {
			return
		}
	}
}
