//go:build !linux

package clock

import (
	"context"
	"time"
)

// shortPark waits on a runtime timer: idle, but as late as the platform's
// timers are (the spin only covers the last spinWindow).
func shortPark(d time.Duration) {
	_ = timerPark(context.Background(), sinceStart()+d, nil)
}
