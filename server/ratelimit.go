package server

import (
	"math"
	"sync"
	"time"

	"github.com/idmint/idmint/clock"
)

// limiter is a token bucket of rate requests per second and a burst of one
// second's worth, timed by the injected clock's monotonic reading.
type limiter struct {
	clk    clock.Clock
	rate   float64
	burst  float64
	mu     sync.Mutex
	tokens float64
	last   time.Duration
}

func newLimiter(clk clock.Clock, rate float64) *limiter {
	if rate <= 0 {
		return nil
	}
	b := math.Max(rate, 1)
	return &limiter{clk: clk, rate: rate, burst: b, tokens: b, last: clk.Mono()}
}

// allow takes one token. When none is left it returns false and how long
// until one will be.
func (l *limiter) allow() (bool, time.Duration) {
	now := l.clk.Mono()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tokens = math.Min(l.burst, l.tokens+(now-l.last).Seconds()*l.rate)
	l.last = now
	if l.tokens >= 1 {
		l.tokens--
		return true, 0
	}
	wait := time.Duration((1 - l.tokens) / l.rate * float64(time.Second))
	return false, wait
}
