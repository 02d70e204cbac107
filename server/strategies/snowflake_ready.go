package strategies

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/node"
)

// warmTimeout bounds one warm-up: the wait a fresh generator may need
// (the horizon lead, 2 s by default) plus the coordinator's round trips.
const warmTimeout = 30 * time.Second

// readyWait is how long Ready waits for a warm-up in flight before it
// answers "not yet": enough for one that needs no wait (a horizon load and
// extension), far less than a probe's timeout.
const readyWait = 250 * time.Millisecond

// errWarming: the node has not yet loaded and extended the horizon of the
// lease it holds.
var errWarming = errors.New("strategies: snowflake node is loading its worker ID's horizon")

// nodeResource is one worker-ID lease and generator, shared by every
// snowflake key of one layout and node-field values. It keeps the node
// warm: a generator built on a new lease can issue only once it has loaded
// the horizon the worker ID's previous holder recorded and the clock has
// passed it, which may take up to the horizon lead after a crash. A
// warm-up issues (and drops: a gap, never a repeat) one ID to get through
// that wait before the first request has to.
type nodeResource struct {
	n *node.Node

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu      sync.Mutex // guards closed and wg.Add
	closed  bool
	wg      sync.WaitGroup
	warming atomic.Pointer[chan struct{}] // closed when the warm-up in flight ends

	pool *workerPool // the coordinator's free worker IDs; nil: no shared pool
}

// newNodeResource keeps n warm and, when pooled, counts the coordinator's
// free worker IDs in the background (see watchPool).
func newNodeResource(n *node.Node, pooled bool, clk clock.Clock, log *slog.Logger) *nodeResource {
	r := &nodeResource{n: n}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.warm()
	if pooled {
		r.pool = &workerPool{}
		r.wg.Add(1)
		go r.watchPool(n.Workers, n.WorkerPool(), clk, log)
	}
	return r
}

// Close stops any warm-up and closes the node.
func (r *nodeResource) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	return r.n.Close()
}

// Ready reports whether the node can issue now: it holds a lease, has
// loaded and extended that lease's horizon, and the clock has passed the
// last time the worker ID's previous holder may have stamped. When it
// cannot, Ready starts a warm-up (so readiness comes without traffic),
// waits up to readyWait (and ctx) for it, and otherwise says why not.
func (r *nodeResource) Ready(ctx context.Context) error {
	err := r.canIssue()
	if err == nil || errors.Is(err, node.ErrNoLease) {
		return err
	}
	done := r.warm()
	if done == nil {
		return err
	}
	t := time.NewTimer(readyWait)
	defer t.Stop()
	var cdone <-chan struct{}
	if ctx != nil {
		cdone = ctx.Done()
	}
	select {
	case <-done:
		return r.canIssue()
	case <-t.C:
	case <-cdone:
	}
	return err
}

// canIssue is Ready without the warm-up.
func (r *nodeResource) canIssue() error {
	if _, _, ok := r.n.WorkerID(); !ok {
		return node.ErrNoLease
	}
	if r.n.Horizon().IsZero() {
		return errWarming
	}
	if a := r.n.Ahead(); a > 0 {
		return fmt.Errorf("strategies: snowflake node waits %v for the clock to reach the last time stamped under its worker ID (a previous holder's horizon, or a clock set back)", a.Round(time.Millisecond))
	}
	return nil
}

// warm starts a warm-up unless one runs, and returns the channel closed
// when the one in flight ends (nil after Close).
func (r *nodeResource) warm() chan struct{} {
	if ch := r.warming.Load(); ch != nil {
		return *ch
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	if ch := r.warming.Load(); ch != nil {
		return *ch
	}
	ch := make(chan struct{})
	r.warming.Store(&ch)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		ctx, cancel := context.WithTimeout(r.ctx, warmTimeout)
		defer cancel()
		r.n.Next(ctx) // an error shows in the next Ready
		r.warming.Store(nil)
		close(ch)
	}()
	return ch
}
