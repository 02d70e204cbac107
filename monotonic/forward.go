package monotonic

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Forwarder carries a follower's request to the leader advertised at addr
// for the source called name, and returns the first of n consecutive IDs.
// It returns an error wrapping ErrFenced when that node is not the proven
// leader. Peers is the implementation between nodes (a framed stream per
// leader and source, HTTP for a leader without one).
type Forwarder interface {
	Forward(ctx context.Context, addr, name string, n int64) (first int64, err error)
}

// forwardBatch sends one coalesced request to the leader, finding it
// again (up to a few times, within ctx) when the one known is not.
func (e *Etcd) forwardBatch(ctx context.Context, n int64) (int64, error) {
	var last error
	for attempt := 0; attempt < 4; attempt++ {
		if attempt > 0 {
			if err := e.cfg.Clock.Sleep(ctx, time.Duration(attempt)*50*time.Millisecond); err != nil {
				break
			}
		}
		// The leader may be this node, elected meanwhile.
		if first, err := e.nextLocal(ctx, n); err == nil || !errors.Is(err, ErrFenced) {
			return first, err
		}
		addr := e.knownLeader()
		if addr == "" || attempt > 0 {
			a, err := e.findLeader(ctx)
			if err != nil {
				last = err
				continue
			}
			addr = a
		}
		if addr == "" || addr == e.cfg.Advertise {
			last = fmt.Errorf("%w: no other leader known", ErrFenced)
			continue
		}
		first, err := e.cfg.Forward.Forward(ctx, addr, e.cfg.Name, n)
		if err == nil {
			return first, nil
		}
		last = err
		e.leader.Store(nil)
	}
	if last == nil {
		last = ctx.Err()
	}
	if !errors.Is(last, ErrFenced) {
		last = fmt.Errorf("%w: forward to leader: %v", ErrFenced, last)
	}
	return 0, last
}

func (e *Etcd) knownLeader() string {
	if p := e.leader.Load(); p != nil {
		return *p
	}
	return ""
}

// findLeader reads the election's leader (the key with the lowest create
// revision, as concurrency.Election.Leader does).
func (e *Etcd) findLeader(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	resp, err := e.cfg.Client.Get(ctx, e.electionKey(), clientv3.WithFirstCreate()...)
	if err != nil {
		return "", fmt.Errorf("monotonic: find leader: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	a := string(resp.Kvs[0].Value)
	e.leader.Store(&a)
	return a, nil
}

// coalescer merges concurrent forwarded requests into batches, at most
// max round trips in flight.
type coalescer struct {
	send    func(ctx context.Context, n int64) (int64, error)
	max     int
	timeout time.Duration // bounds one round trip (flushTimeout when 0)

	mu       sync.Mutex
	pending  []*fwdReq
	inflight int
}

type fwdReq struct {
	n     int64
	first int64
	err   error
	done  chan struct{}
}

func (c *coalescer) submit(ctx context.Context, n int64) (int64, error) {
	r := &fwdReq{n: n, done: make(chan struct{})}
	c.mu.Lock()
	c.pending = append(c.pending, r)
	start := c.inflight < c.max
	if start {
		c.inflight++
	}
	c.mu.Unlock()
	if start {
		go c.flush()
	}
	select {
	case <-r.done:
		return r.first, r.err
	case <-ctx.Done():
		return 0, ctx.Err() // the values, if any arrive, become a gap
	}
}

// flushTimeout bounds one forwarded round trip, whatever the callers'
// deadlines (a batch serves several callers).
const flushTimeout = 3 * time.Second

func (c *coalescer) flush() {
	timeout := c.timeout
	if timeout <= 0 {
		timeout = flushTimeout
	}
	for {
		c.mu.Lock()
		var batch []*fwdReq
		var total int64
		for len(c.pending) > 0 && (len(batch) == 0 || total+c.pending[0].n <= MaxCount) {
			batch = append(batch, c.pending[0])
			total += c.pending[0].n
			c.pending[0] = nil
			c.pending = c.pending[1:]
		}
		if len(batch) == 0 {
			c.inflight--
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		first, err := c.send(ctx, total)
		cancel()
		off := int64(0)
		for _, r := range batch {
			if err != nil {
				r.err = err
			} else if first > math.MaxInt64-off {
				r.err = ErrExhausted
			} else {
				r.first = first + off
				off += r.n
			}
			close(r.done)
		}
	}
}
