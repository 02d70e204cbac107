package strategies

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/worker"
)

// poolEvery is how often a node lists its coordinator to count the free
// worker IDs; poolListTimeout bounds one listing. A scrape reads the last
// count and never waits on the coordinator.
const (
	poolEvery       = 30 * time.Second
	poolListTimeout = 10 * time.Second
)

// workerPool is the last count of a shared coordinator's worker IDs: how
// many of the node's pool (0..WorkerPool-1) no live lease holds.
type workerPool struct {
	known atomic.Bool // a listing has succeeded, and the last one did
	free  atomic.Int64
	size  atomic.Int64
}

// pooledCoordinator reports whether a coordinator scheme grants worker IDs
// from a pool that several nodes share (etcd, ZooKeeper, a SQL table),
// which can run out. The others give each node one ID decided outside any
// pool (file: the ID its file keeps; static, ip, mac, k8s: the ID the
// operator, the address or the pod's ordinal gives): nothing to count.
func pooledCoordinator(coord string) bool {
	scheme, _, _ := strings.Cut(coord, "://")
	return remoteHorizon(scheme)
}

// freeWorkerIDs counts the IDs in 0..pool-1 that no live lease holds.
func freeWorkerIDs(hs []worker.Holder, pool int64) int64 {
	free := pool
	for _, h := range hs {
		if h.Live && h.ID >= 0 && h.ID < pool {
			free--
		}
	}
	return free
}

// watchPool lists the coordinator at once and then every poolEvery until
// the resource closes, keeping the count Stats reports. A failed listing
// makes the count unknown (the series disappear) until one succeeds.
// list is the node's coordinator listing (Node.Workers), size its pool
// (Node.WorkerPool).
func (r *nodeResource) watchPool(list func(context.Context) ([]worker.Holder, error), size int64, clk clock.Clock, log *slog.Logger) {
	defer r.wg.Done()
	failing := false
	for {
		ctx, cancel := context.WithTimeout(r.ctx, poolListTimeout)
		hs, err := list(ctx)
		cancel()
		if r.ctx.Err() != nil {
			return
		}
		if err != nil {
			r.pool.known.Store(false)
			if !failing {
				log.Warn("cannot list the coordinator's worker IDs: idmint_worker_ids_free is unknown until a listing succeeds", "err", err)
			}
			failing = true
		} else {
			r.pool.free.Store(freeWorkerIDs(hs, size))
			r.pool.size.Store(size)
			r.pool.known.Store(true)
			failing = false
		}
		if clk.Sleep(r.ctx, poolEvery) != nil {
			return
		}
	}
}

// poolStats are the pool's figures, none while its count is unknown.
func (r *nodeResource) poolStats() []server.Stat {
	if r.pool == nil || !r.pool.known.Load() {
		return nil
	}
	return []server.Stat{
		{Name: "worker_ids_free", Help: "Worker IDs of the pool this node takes from (0..worker_limit-1, or the worker field's range) that no live lease holds in the coordinator, as last listed (every 30 s); only for coordinators that share a pool (etcd, ZooKeeper, SQL).",
			Value: float64(r.pool.free.Load())},
		{Name: "worker_ids", Help: "Size of the pool of worker IDs this node takes from (0..worker_limit-1, or the worker field's range); only for coordinators that share a pool (etcd, ZooKeeper, SQL).",
			Value: float64(r.pool.size.Load())},
	}
}
