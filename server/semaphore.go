package server

// semaphore is a counting semaphore whose acquire never waits.
type semaphore chan struct{}

func newSemaphore(n int) semaphore { return make(semaphore, n) }

// TryAcquire takes a slot, or reports false when all are taken.
func (s semaphore) TryAcquire() bool {
	select {
	case s <- struct{}{}:
		return true
	default:
		return false
	}
}

// Release returns a slot taken by TryAcquire.
func (s semaphore) Release() { <-s }
