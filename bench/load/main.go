// Command load drives a running idmint server with requests at a fixed rate
// (open loop: a request that is late because earlier ones were slow is
// timed from when it was due, so a stalled server cannot hide its queue —
// no coordinated omission) or as fast
// as a fixed number of connections allow (-rate 0), over HTTP or gRPC, and
// prints throughput, IDs/s and latency percentiles.
//
//	go run ./load -url 'http://127.0.0.1:8080/api/segment/get/order' -rate 25000 -d 10s
//	go run ./load -grpc 127.0.0.1:9090 -key order -count 1000 -c 8 -d 10s
//
// It sends traffic only to the address it is given; run it against a server
// on this machine.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/idmint/idmint/api/idmintv1"
)

func main() {
	url := flag.String("url", "", "HTTP URL to GET")
	grpcAddr := flag.String("grpc", "", "gRPC address (host:port) to call NextIDs on")
	key := flag.String("key", "order", "key for gRPC")
	count := flag.Int("count", 1, "IDs per request (gRPC; for HTTP put count= in the URL and pass it here too for IDs/s)")
	rate := flag.Float64("rate", 0, "requests per second, open loop; 0 = closed loop as fast as -c connections go")
	conns := flag.Int("c", 16, "connections (closed loop) or workers (open loop)")
	dur := flag.Duration("d", 10*time.Second, "duration")
	flag.Parse()
	if (*url == "") == (*grpcAddr == "") {
		fmt.Fprintln(os.Stderr, "load: give exactly one of -url and -grpc")
		os.Exit(2)
	}
	if *conns < 1 || *count < 1 || *rate < 0 || *dur <= 0 {
		fmt.Fprintln(os.Stderr, "load: -c and -count must be at least 1, -rate not negative, -d positive")
		os.Exit(2)
	}
	var do func(ctx context.Context) error
	if *url != "" {
		tr := &http.Transport{MaxIdleConnsPerHost: *conns, MaxConnsPerHost: *conns}
		client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		do = func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return nil
		}
	} else {
		cc, err := grpc.NewClient(*grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			fmt.Fprintln(os.Stderr, "load:", err)
			os.Exit(1)
		}
		defer cc.Close()
		c := idmintv1.NewIDsClient(cc)
		do = func(ctx context.Context) error {
			_, err := c.NextIDs(ctx, &idmintv1.NextIDsRequest{Key: *key, Count: uint32(*count)})
			return err
		}
	}
	ctx := context.Background()
	start := time.Now()
	end := start.Add(*dur)
	var (
		mu     sync.Mutex
		lat    []time.Duration
		errs   atomic.Int64
		wg     sync.WaitGroup
		perReq = *count
	)
	record := func(local []time.Duration) {
		mu.Lock()
		lat = append(lat, local...)
		mu.Unlock()
	}
	if *rate == 0 {
		for range *conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var local []time.Duration
				for time.Now().Before(end) {
					t := time.Now()
					if err := do(ctx); err != nil {
						errs.Add(1)
						continue
					}
					local = append(local, time.Since(t))
				}
				record(local)
			}()
		}
	} else {
		// Request i is due at start + i/rate; a worker takes the next due
		// request and measures from its due time.
		interval := time.Duration(float64(time.Second) / *rate)
		var next atomic.Int64
		for range *conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var local []time.Duration
				for {
					due := start.Add(time.Duration(next.Add(1)-1) * interval)
					if !due.Before(end) {
						break
					}
					from := due
					if d := time.Until(due); d > 0 {
						// Early: sleep, and measure from the actual send, so
						// the timer's own lateness is not blamed on the
						// server. Late (a previous request was slow): measure
						// from the due time, so the server's stall counts.
						time.Sleep(d)
						from = time.Now()
					}
					if err := do(ctx); err != nil {
						errs.Add(1)
						continue
					}
					local = append(local, time.Since(from))
				}
				record(local)
			}()
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(lat)
	pct := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}
	n := len(lat)
	fmt.Printf("requests %d in %v (%.0f req/s, %.0f IDs/s), errors %d\n", n, elapsed.Round(time.Millisecond),
		float64(n)/elapsed.Seconds(), float64(n*perReq)/elapsed.Seconds(), errs.Load())
	fmt.Printf("latency p50 %v  p90 %v  p99 %v  p99.9 %v  max %v\n", pct(0.50), pct(0.90), pct(0.99), pct(0.999), pct(1))
}
