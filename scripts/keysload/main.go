// Command keysload is the load half of scripts/keys-startup.sh: started
// beside a starting `idmint serve`, it sends single-ID requests spread
// round-robin over keys k0..kN-1 for a fixed time counted from the moment
// the server process was started, and prints how many answered in each
// half second, how many keys answered at least once, and the errors.
//
//	keysload -url http://127.0.0.1:18080 -keys 10000 -since UNIX_NANOS -d 2s -c 128
//
// It talks only to the URL it is given and stops by itself after -d.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "keysload:", err)
		os.Exit(1)
	}
}

func run() error {
	base := flag.String("url", "http://127.0.0.1:18080", "the server's base URL")
	keys := flag.Int("keys", 1, "keys k0..kN-1 to spread the requests over")
	since := flag.Int64("since", 0, "when the server process started, Unix nanoseconds (0: now)")
	dur := flag.Duration("d", 2*time.Second, "how long after -since to stop")
	conns := flag.Int("c", 128, "concurrent connections, each one request at a time")
	flag.Parse()
	if *keys < 1 || *conns < 1 || *dur <= 0 {
		return fmt.Errorf("-keys %d, -c %d, -d %v: want positive values", *keys, *conns, *dur)
	}
	start := time.Now()
	if *since != 0 {
		start = time.Unix(0, *since)
	}
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(*dur))
	defer cancel()
	tr := &http.Transport{MaxIdleConnsPerHost: *conns, MaxConnsPerHost: *conns, DisableCompression: true}
	cl := &http.Client{Transport: tr, Timeout: *dur}

	const slot = 500 * time.Millisecond
	nslots := int(*dur/slot) + 1
	var (
		next     atomic.Int64 // round-robin key counter
		done     = make([]atomic.Int64, nslots)
		errs     atomic.Int64
		refused  atomic.Int64 // connection refused: not listening yet
		firstOK  atomic.Int64 // ns after start of the first answer
		seen     = make([]atomic.Bool, *keys)
		firstErr atomic.Value
		wg       sync.WaitGroup
	)
	firstOK.Store(-1)
	for range *conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)-1) % *keys
				err := get(ctx, cl, *base+"/v1/keys/k"+strconv.Itoa(i)+"/ids")
				at := time.Since(start)
				switch {
				case ctx.Err() != nil:
					return
				case err == nil:
					if s := int(at / slot); s < nslots {
						done[s].Add(1)
					}
					seen[i].Store(true)
					firstOK.CompareAndSwap(-1, int64(at))
				case errors.Is(err, errNotUp):
					refused.Add(1)
					next.Add(-1) // not an attempt at this key
					time.Sleep(5 * time.Millisecond)
				default:
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		}()
	}
	wg.Wait()
	var total int64
	fmt.Printf("answers per 0.5 s after start:")
	for s := range nslots - 1 {
		fmt.Printf(" %d", done[s].Load())
		total += done[s].Load()
	}
	covered := 0
	for i := range seen {
		if seen[i].Load() {
			covered++
		}
	}
	fmt.Printf("\nrequests/s over the first %v after start: %.0f; keys answered %d of %d; first answer at %d ms; errors %d",
		*dur, float64(total)/dur.Seconds(), covered, *keys, firstOK.Load()/1e6, errs.Load())
	if e, ok := firstErr.Load().(string); ok {
		fmt.Printf(" (first: %s)", e)
	}
	fmt.Println()
	return nil
}

var errNotUp = errors.New("not listening")

func get(ctx context.Context, cl *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := cl.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return errNotUp
		}
		return err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %.200s", url, resp.Status, body)
	}
	return nil
}
