package segment

import (
	"sync"
	"sync/atomic"
)

// warmLoads bounds the first loads Warm keeps in flight: enough to fill a
// batch, few enough that 10,000 keys do not start 10,000 goroutines.
const warmLoads = 512

// Warm loads the first segment of each of keys in the background, so the
// first request of each finds it in memory. With a BatchAllocator store
// the loads go in batches (10,000 keys on SQLite: about twenty commits).
// Keys that are loaded or loading already are skipped. Each key is tried
// once: a key whose load fails is left to load on its first call, and a
// failure that retrying may fix (the store down, slow or unreachable)
// stops the warm-up, so a store that is down costs one timeout, not one
// per key. It logs one line when done. Close stops it.
func (a *Allocator) Warm(keys []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed.Load() || len(keys) == 0 {
		return
	}
	a.wg.Add(1) // under mu: Close takes mu before it waits
	go a.warm(keys)
}

// warmLot is how many keys Warm queues at a time: a batch of its own,
// small enough that the loads callers wait for, which go first, are not
// held long behind one at the store.
const warmLot = 500

// warmClaims is how many keys of a warm-up batch finish their load (the
// witness claim, the buffer) at once: concurrent claims share an fsync in
// the data directory's witness.
const warmClaims = 128

// warmState gathers a warm-up's outcome.
type warmState struct {
	stop           atomic.Bool
	loaded, failed atomic.Int64
	mu             sync.Mutex
	first          error
}

func (w *warmState) note(err error) {
	if err == nil {
		w.loaded.Add(1)
		return
	}
	w.failed.Add(1)
	w.mu.Lock()
	if w.first == nil {
		w.first = err
	}
	w.mu.Unlock()
	if !permanent(err) {
		w.stop.Store(true)
	}
}

// claimWarm marks k as loading for the warm-up; false if it is loaded or
// loading already.
func (k *Key) claimWarm() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.loaded || k.loading || k.next != nil {
		return false
	}
	k.loading = true
	return true
}

func (a *Allocator) warm(names []string) {
	defer a.wg.Done()
	var st warmState
	if a.batch != nil {
		a.warmBatched(names, &st)
	} else {
		a.warmEach(names, &st)
	}
	if a.ctx.Err() != nil {
		return
	}
	if st.first != nil {
		a.opts.Logger.Warn("segment: warm-up stopped; the keys it did not load load on their first request",
			"keys", len(names), "loaded", st.loaded.Load(), "failed", st.failed.Load(), "err", st.first)
		return
	}
	a.opts.Logger.Info("segment: first segments loaded", "keys", len(names), "loaded", st.loaded.Load())
}

// warmBatched queues the keys' first leases warmLot at a time, each lot
// together so it goes in one AllocateMany, with at most two lots in
// flight (one at the store, one finishing), and finishes each load on
// warmClaims goroutines.
func (a *Allocator) warmBatched(names []string, st *warmState) {
	var wg sync.WaitGroup
	lots := make(chan struct{}, 2)
	for start := 0; start < len(names); start += warmLot {
		lots <- struct{}{} // before the check: the lot that frees it may stop the warm-up
		if st.stop.Load() || a.ctx.Err() != nil {
			break
		}
		var keys []*Key
		var reqs []AllocateRequest
		for _, name := range names[start:min(start+warmLot, len(names))] {
			if k, err := a.Key(name); err == nil && k.claimWarm() {
				keys = append(keys, k)
				reqs = append(reqs, AllocateRequest{Key: name})
			}
		}
		if len(keys) == 0 {
			<-lots
			continue
		}
		waits := a.batch.enqueue(a.ctx, reqs, true)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-lots }()
			next := make(chan int)
			var pool sync.WaitGroup
			for range min(warmClaims, len(keys)) {
				pool.Add(1)
				go func() {
					defer pool.Done()
					for i := range next {
						st.note(keys[i].warmOnce(waits[i])) // every claimed key, to clear its loading
					}
				}()
			}
			for i := range keys {
				next <- i
			}
			close(next)
			pool.Wait()
		}()
	}
	wg.Wait()
}

// warmEach loads the keys one by one, warmLoads at a time, for a store
// without batches.
func (a *Allocator) warmEach(names []string, st *warmState) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, warmLoads)
	for _, name := range names {
		if st.stop.Load() || a.ctx.Err() != nil {
			break
		}
		k, err := a.Key(name)
		if err != nil || !k.claimWarm() {
			continue // a name Key refuses shows on its calls
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			st.note(k.warmOnce(nil))
		}()
	}
	wg.Wait()
}

// warmOnce is one load of k's first segment, started by Warm with
// k.loading set; unlike loadLoop it does not retry.
func (k *Key) warmOnce(pre *batchWait) error {
	b, err := k.load(pre)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.attempts++
	k.loading = false
	if err == nil {
		k.next, k.lastErr = b, nil
	} else {
		k.lastErr = err
		k.loadErrors++
		if !permanent(err) {
			k.storeErrs++
		}
	}
	k.broadcastLocked()
	return err
}
