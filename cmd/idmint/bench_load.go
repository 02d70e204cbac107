package main

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idmint/idmint/internal/hdr"
)

// The load engine of `idmint bench`: workers that each own one connection
// (an HTTP/1.1 connection, a gRPC stream slot, or a goroutine on the Go
// client), run closed loop (each sends its next request when the last one
// answered) or open loop (request i is due at start + i/rate, whoever is
// free sends it), and record latencies into their own histograms.

// op issues one request on a worker's connection. When dst is non-nil it
// writes the IDs it received into dst (len(dst) ≥ the request's count) and
// returns how many; otherwise it may return the count without decoding.
type op func(ctx context.Context, dst []int64) (int, error)

// loadClock is the engine's time: real in the command, fake in tests.
type loadClock interface {
	// since is the time elapsed since the run started (monotonic).
	since() time.Duration
	// sleepUntil waits until since() ≥ d or ctx ends.
	sleepUntil(ctx context.Context, d time.Duration)
	// wall is the wall-clock time in Unix nanoseconds (for stamps).
	wall() int64
}

type realClock struct{ start time.Time }

func (c realClock) since() time.Duration { return time.Since(c.start) }
func (c realClock) wall() int64          { return time.Now().UnixNano() }
func (c realClock) sleepUntil(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d - time.Since(c.start))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// loadSpec is one run's shape.
type loadSpec struct {
	workers  int
	rate     float64       // requests per second in total; 0: closed loop
	duration time.Duration // ignored when requests > 0
	requests int64         // total requests; 0: run for duration
	count    int           // IDs per request
	check    bool          // keep every ID: uniqueness and per-worker order
	order    bool          // check per-worker order (with check)
	stamp    func(id int64) (unixNano int64, ok bool)
}

// workerStats is what one worker measured. The worker holds mu while it
// records; the progress line takes it to read.
type workerStats struct {
	mu       sync.Mutex
	lat      *hdr.Histogram // whole run
	win      *hdr.Histogram // since the last progress line
	reqs     int64
	ids      int64
	errs     int64
	firstErr error

	// --check
	got      []int64
	last     int64
	started  bool
	disorder int64

	// stamp lag
	lag   *hdr.Histogram
	ahead int64
}

// loadResult sums the workers.
type loadResult struct {
	elapsed   time.Duration
	reqs, ids int64
	errs      int64
	firstErr  error
	lat       *hdr.Histogram
	// check
	checked    int64
	duplicates int64
	disorder   int64
	// stamp
	lag   *hdr.Histogram
	ahead int64
}

// progress is a snapshot for the live line: totals and the window's p99.
type progress struct {
	at              time.Duration
	reqs, ids, errs int64
	p99             time.Duration
}

// runLoad runs ops (one per worker) under spec and returns the totals.
// onTick, if set, is called about every tick with a snapshot.
func runLoad(ctx context.Context, spec loadSpec, clk loadClock, ops []op, tick time.Duration, onTick func(progress)) *loadResult {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stats := make([]*workerStats, len(ops))
	var next atomic.Int64
	var interval time.Duration
	if spec.rate > 0 {
		interval = time.Duration(float64(time.Second) / spec.rate)
	}
	var wg sync.WaitGroup
	for i, o := range ops {
		ws := &workerStats{lat: hdr.New(), win: hdr.New()}
		if spec.stamp != nil {
			ws.lag = hdr.New()
		}
		stats[i] = ws
		wg.Go(func() { work(ctx, spec, clk, o, ws, &next, interval) })
	}
	if onTick != nil && tick > 0 {
		done := make(chan struct{})
		defer func() { <-done }()
		go func() {
			defer close(done)
			t := time.NewTicker(tick)
			defer t.Stop()
			win := hdr.New()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				var p progress
				win.Reset()
				for _, ws := range stats {
					ws.mu.Lock()
					p.reqs += ws.reqs
					p.ids += ws.ids
					p.errs += ws.errs
					win.Merge(ws.win)
					ws.win.Reset()
					ws.mu.Unlock()
				}
				p.at = clk.since()
				p.p99 = time.Duration(win.ValueAt(0.99))
				onTick(p)
			}
		}()
	}
	wg.Wait()
	res := &loadResult{elapsed: clk.since(), lat: hdr.New()}
	if spec.stamp != nil {
		res.lag = hdr.New()
	}
	var all []int64
	for _, ws := range stats {
		res.reqs += ws.reqs
		res.ids += ws.ids
		res.errs += ws.errs
		if res.firstErr == nil {
			res.firstErr = ws.firstErr
		}
		res.lat.Merge(ws.lat)
		if res.lag != nil {
			res.lag.Merge(ws.lag)
			res.ahead += ws.ahead
		}
		res.disorder += ws.disorder
		all = append(all, ws.got...)
		ws.got = nil
	}
	if spec.check {
		slices.Sort(all)
		res.checked = int64(len(all))
		for i := 1; i < len(all); i++ {
			if all[i] == all[i-1] {
				res.duplicates++
			}
		}
	}
	return res
}

// work is one worker's loop.
func work(ctx context.Context, spec loadSpec, clk loadClock, o op, ws *workerStats, next *atomic.Int64, interval time.Duration) {
	var dst []int64
	if spec.check || spec.stamp != nil {
		dst = make([]int64, spec.count)
	}
	for ctx.Err() == nil {
		i := next.Add(1) - 1
		if spec.requests > 0 && i >= spec.requests {
			return
		}
		var from time.Duration
		if interval > 0 {
			// Open loop. Request i is due at i·interval. A worker that is
			// early sleeps and times from the actual send, so its own
			// timer's lateness is not blamed on the server; one that is
			// late (earlier requests were slow) times from the due time,
			// so the queue a stalled server built counts in full: the
			// correction for coordinated omission.
			due := time.Duration(i) * interval
			if spec.requests == 0 && due >= spec.duration {
				return
			}
			if clk.since() < due {
				clk.sleepUntil(ctx, due)
				if ctx.Err() != nil {
					return
				}
				from = clk.since()
			} else {
				from = due
			}
		} else {
			from = clk.since()
			if spec.requests == 0 && from >= spec.duration {
				return
			}
		}
		var sent int64
		if spec.stamp != nil {
			sent = clk.wall()
		}
		n, err := o(ctx, dst)
		lat := clk.since() - from
		var recv int64
		if spec.stamp != nil {
			recv = clk.wall()
		}
		ws.mu.Lock()
		if err != nil {
			if ctx.Err() == nil {
				ws.errs++
				if ws.firstErr == nil {
					ws.firstErr = err
				}
			}
			ws.mu.Unlock()
			continue
		}
		ws.reqs++
		ws.ids += int64(n)
		ws.lat.Record(int64(lat))
		ws.win.Record(int64(lat))
		if dst != nil {
			got := dst[:n]
			if spec.check {
				for _, id := range got {
					if spec.order && ws.started && id <= ws.last {
						ws.disorder++
					}
					ws.last, ws.started = id, true
				}
				ws.got = append(ws.got, got...)
			}
			if spec.stamp != nil {
				for _, id := range got {
					recordStamp(ws, spec, id, sent, recv)
				}
			}
		}
		ws.mu.Unlock()
	}
}

// recordStamp records how far an ID's stamp lies outside the request's
// window [sent, recv]. The stamp t is the start of the ID's tick, so a
// stamp from before the request was sent counts sent−t: this overstates
// the lag by up to one tick (the truncation), never understates it. A
// stamp inside the window counts 0; one after the answer came (a clock
// ahead) counts t−recv and is also counted as ahead.
func recordStamp(ws *workerStats, spec loadSpec, id, sent, recv int64) {
	t, ok := spec.stamp(id)
	if !ok {
		ws.ahead++ // undecodable: counted with the impossible ones
		return
	}
	switch {
	case t < sent:
		ws.lag.Record(sent - t)
	case t > recv:
		ws.ahead++
		ws.lag.Record(t - recv)
	default:
		ws.lag.Record(0)
	}
}
