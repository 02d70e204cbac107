package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// cpuReader reads a server's CPU seconds so far: from its /metrics
// (process_cpu_seconds_total, which idmint serve exports through
// client_golang's process collector) or, for the floor child, from
// /proc/PID/stat.
type cpuReader func(ctx context.Context) (float64, error)

// parseMetricsURLs checks --metrics: comma-separated http(s) URLs.
func parseMetricsURLs(s string) ([]string, error) {
	var out []string
	for _, u := range strings.Split(s, ",") {
		if u = strings.TrimSpace(u); u == "" {
			continue
		}
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return nil, usagef("--metrics: %q is not an http(s) URL of a server's /metrics", u)
		}
		out = append(out, u)
	}
	return out, nil
}

// metricsCPU reads process_cpu_seconds_total from a Prometheus text
// exposition at u. The admin listener may want $IDMINT_ADMIN_TOKEN.
func metricsCPU(u, adminToken string) cpuReader {
	hc := &http.Client{Timeout: 5 * time.Second}
	return func(ctx context.Context) (float64, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return 0, fmt.Errorf("--metrics %s: %w", u, err)
		}
		if adminToken != "" {
			req.Header.Set("Authorization", "Bearer "+adminToken)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, fmt.Errorf("--metrics %s: %w", u, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("--metrics %s: answered %s", u, resp.Status)
		}
		v, err := processCPU(io.LimitReader(resp.Body, 16<<20))
		if err != nil {
			return 0, fmt.Errorf("--metrics %s: %w", u, err)
		}
		return v, nil
	}
}

// processCPU finds the process_cpu_seconds_total sample in a text
// exposition.
func processCPU(r io.Reader) (float64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, "process_cpu_seconds_total")
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		if i := strings.LastIndexByte(rest, '}'); i >= 0 {
			rest = rest[i+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			break
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, fmt.Errorf("process_cpu_seconds_total %q: %w", f[0], err)
		}
		return v, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no process_cpu_seconds_total sample (is it a Go server with the process collector?)")
}

// clkTck is USER_HZ, the unit of /proc/PID/stat's CPU times: 100 on every
// Linux architecture Go supports (proc(5)).
const clkTck = 100

// procCPU reads the user+system CPU seconds of process pid from
// /proc/PID/stat (Linux).
func procCPU(pid int) cpuReader {
	return func(context.Context) (float64, error) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return 0, fmt.Errorf("floor CPU: %w", err)
		}
		// The command name (field 2) may hold spaces; fields after its
		// closing parenthesis start at field 3 (state). utime and stime are
		// fields 14 and 15 (proc(5)).
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			return 0, fmt.Errorf("floor CPU: /proc/%d/stat: no command field", pid)
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 13 {
			return 0, fmt.Errorf("floor CPU: /proc/%d/stat: %d fields", pid, len(f)+2)
		}
		ut, err1 := strconv.ParseInt(f[11], 10, 64)
		st, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 != nil || err2 != nil {
			return 0, fmt.Errorf("floor CPU: /proc/%d/stat: utime %q, stime %q", pid, f[11], f[12])
		}
		return float64(ut+st) / clkTck, nil
	}
}

// sumCPU reads every reader and adds the seconds up.
func sumCPU(ctx context.Context, rs []cpuReader) (float64, error) {
	var total float64
	for _, r := range rs {
		v, err := r(ctx)
		if err != nil {
			return 0, err
		}
		total += v
	}
	return total, nil
}

// cpuFigures turns the CPU seconds a run used into its figures.
func cpuFigures(used, secs float64, reqs, ids int64) *serverCPU {
	c := &serverCPU{Seconds: round3(used)}
	if secs > 0 {
		c.Cores = round3(used / secs)
	}
	if ids > 0 {
		c.MsPerMillionIDs = round3(used * 1e3 / (float64(ids) / 1e6))
	}
	if reqs > 0 {
		c.UsPerRequest = round3(used * 1e6 / float64(reqs))
	}
	return c
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
