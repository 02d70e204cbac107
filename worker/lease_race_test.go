package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLeaseCloseReleasesAfterLoss: a lost lease still runs the backend's
// release when closed (a ZooKeeper lock of our own live session would
// otherwise block the next Acquire for as long as the process runs), and
// exactly once however often Close is called.
func TestLeaseCloseReleasesAfterLoss(t *testing.T) {
	t.Parallel()
	l, b, clk := fakeLease(t)
	b.set(func(b *fakeBackend) { b.kaErr = fmt.Errorf("%w: version moved", ErrLeaseLost) })
	tick(t, l, clk)
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed after the coordinator reported the lease lost")
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); l.Close() }()
	}
	wg.Wait()
	b.set(func(b *fakeBackend) {
		if b.releases != 1 {
			t.Fatalf("release ran %d times after loss and 4 Closes, want exactly 1", b.releases)
		}
	})
	if !errors.Is(l.Err(), ErrLeaseLost) {
		t.Fatalf("Err after Close of a lost lease = %v, want it to stay ErrLeaseLost", l.Err())
	}
}

// TestLeaseDeadlineFromSendTime: a keepalive that takes 2 s to be answered
// proves the lease from when it was sent, not from when the answer came.
func TestLeaseDeadlineFromSendTime(t *testing.T) {
	t.Parallel()
	l, b, clk := fakeLease(t)
	entered := make(chan struct{})
	answer := make(chan struct{})
	b.set(func(b *fakeBackend) {
		b.kaHook = func(context.Context) { entered <- struct{}{}; <-answer }
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clk.WaitForSleepers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(l.every) // the keepalive is sent at Mono 1 s
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("keepalive not sent")
	}
	clk.Advance(2 * time.Second) // its answer arrives at Mono 3 s
	b.set(func(b *fakeBackend) { b.kaHook = nil })
	close(answer)
	if err := clk.WaitForSleepers(ctx, 1); err != nil {
		t.Fatal("keepalive loop did not go back to sleep:", err)
	}
	if got, want := l.ValidUntil(), 1*time.Second+3*time.Second-600*time.Millisecond; got != want {
		t.Fatalf("ValidUntil = %v, want send time 1s + TTL - margin = %v (the reply came at 3s)", got, want)
	}
}

// TestLeaseLossNeverRevived: confirmations racing the loss, many rounds
// over: once Done is closed, ValidUntil is 0 and stays 0.
func TestLeaseLossNeverRevived(t *testing.T) {
	t.Parallel()
	for round := range 2000 {
		l, _, _ := fakeLease(t)
		l.cancel() // no keepalive loop: the racers below play it
		l.wg.Wait()
		start := make(chan struct{})
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := time.Duration(1); ; i++ {
					l.confirm(i*time.Millisecond + time.Duration(g))
					select {
					case <-stop:
						return
					default:
					}
				}
			}()
		}
		close(start)
		l.lose(fmt.Errorf("%w: round %d", ErrLeaseLost, round))
		for range 50 {
			if v := l.ValidUntil(); v != 0 {
				close(stop)
				wg.Wait()
				t.Fatalf("round %d: ValidUntil = %v after the lease was lost: a racing confirmation revived it", round, v)
			}
		}
		close(stop)
		wg.Wait()
		if v := l.ValidUntil(); v != 0 || l.Valid() {
			t.Fatalf("round %d: ValidUntil = %v after the racers stopped", round, v)
		}
	}
}

// TestLeaseLossRacesKeepalive: the same race through the real keepalive
// loop: a keepalive that is answered "fine" while Extend learns the lease
// is lost, many rounds over.
func TestLeaseLossRacesKeepalive(t *testing.T) {
	t.Parallel()
	for round := range 200 {
		l, b, clk := fakeLease(t)
		entered := make(chan struct{})
		answer := make(chan struct{})
		b.set(func(b *fakeBackend) {
			b.kaHook = func(context.Context) { close(entered); <-answer }
			b.storeErr = fmt.Errorf("%w: taken over", ErrLeaseLost)
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := clk.WaitForSleepers(ctx, 1); err != nil {
			t.Fatal(err)
		}
		clk.Advance(l.every)
		select {
		case <-entered:
		case <-ctx.Done():
			t.Fatal("keepalive not sent")
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); close(answer) }()                                 // the keepalive answers OK ...
		if _, err := l.Extend(ctx, t0.Add(time.Hour)); !errors.Is(err, ErrLeaseLost) { // ... as the loss is learned
			t.Fatalf("round %d: Extend = %v, want ErrLeaseLost", round, err)
		}
		wg.Wait()
		l.Close() // waits for the keepalive loop to end
		cancel()
		if v := l.ValidUntil(); v != 0 {
			t.Fatalf("round %d: ValidUntil = %v after loss and Close", round, v)
		}
	}
}

// confirmingBackend is a fakeBackend whose stores prove the lease, as
// ZooKeeper's do.
type confirmingBackend struct{ *fakeBackend }

func (confirmingBackend) storeConfirms() bool { return true }

func TestLeaseStoreConfirmsWhereBackendSaysSo(t *testing.T) {
	t.Parallel()
	l, _, clk := fakeLeaseOn(t, &confirmingBackend{&fakeBackend{}})
	clk.Advance(2 * time.Second)
	if _, err := l.Extend(context.Background(), t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, want := l.ValidUntil(), 2*time.Second+2400*time.Millisecond; got != want {
		t.Fatalf("ValidUntil after a confirmed store sent at 2s = %v, want %v", got, want)
	}
	// A plain backend's store proves nothing.
	p, _, pclk := fakeLease(t)
	pclk.Advance(2 * time.Second)
	if _, err := p.Extend(context.Background(), t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, want := p.ValidUntil(), 2400*time.Millisecond; got != want {
		t.Fatalf("ValidUntil after a store on a backend whose stores prove nothing = %v, want %v", got, want)
	}
}

// TestLeaseWritesBounded: a store that never answers cannot hold Extend,
// nor a Release waiting behind it, past the configured timeout, even when
// the caller's context has no deadline.
func TestLeaseWritesBounded(t *testing.T) {
	t.Parallel()
	l, b, _ := fakeLease(t, WithTimeout(200*time.Millisecond))
	b.set(func(b *fakeBackend) { b.storeBlock = true })
	done := make(chan error, 2)
	go func() { _, err := l.Extend(context.Background(), t0.Add(time.Hour)); done <- err }()
	go func() { done <- l.Release(context.Background(), t0.Add(-time.Hour)) }()
	for range 2 {
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("write against a silent coordinator = %v, want a deadline error", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a horizon write against a silent coordinator did not give up within 10 s (timeout 200 ms)")
		}
	}
}

// TestLeaseLogNeverValidWhenExpired: a failed keepalive after the deadline
// is logged as expired, never as valid with a negative valid_for.
func TestLeaseLogNeverValidWhenExpired(t *testing.T) {
	t.Parallel()
	var (
		mu  sync.Mutex
		buf bytes.Buffer
	)
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil))
	l, b, clk := fakeLease(t, WithLogger(log))
	b.set(func(b *fakeBackend) { b.kaErr = errors.New("connection refused") })
	for range 4 { // 1s, 2s: valid; 3s, 4s: past 2.4s
		tick(t, l, clk)
	}
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	var valid, expired int
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		switch {
		case strings.Contains(line, "valid_for=-"), strings.Contains(line, "valid until") && !strings.Contains(line, "valid_for="):
			t.Fatalf("log says the lease is valid when it is not: %s", line)
		case strings.Contains(line, "valid_for="):
			valid++
		case strings.Contains(line, "lease expired") && strings.Contains(line, "expired_for="):
			expired++
		}
	}
	if valid != 2 || expired != 2 {
		t.Fatalf("logged %d valid and %d expired keepalive failures, want 2 and 2:\n%s", valid, expired, out)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// TestLeaseLateAnswerDoesNotExtend: a confirmation answered after the
// lease's deadline has passed (a keepalive, or a ZooKeeper-style store that
// proves the lease) proves it only from when it was sent. Sent at 1 s and
// answered at 4 s, with the lease granted at 0 until 2.4 s (TTL 3 s, margin
// 600 ms), it proves the lease until 3.4 s: already past, so nothing may be
// issued on it, although the coordinator answered "fine".
func TestLeaseLateAnswerDoesNotExtend(t *testing.T) {
	t.Parallel()
	const sendAt, answerAt = time.Second, 4 * time.Second
	want := sendAt + 3*time.Second - 600*time.Millisecond
	check := func(t *testing.T, l *Lease, now time.Duration, what string) {
		t.Helper()
		if got := l.ValidUntil(); got != want {
			t.Fatalf("ValidUntil after a %s sent at %v and answered at %v = %v, want %v (send time + TTL - margin)", what, sendAt, answerAt, got, want)
		}
		if l.Valid() {
			t.Fatalf("lease valid at %v after a %s answered past its deadline (valid until %v)", now, what, l.ValidUntil())
		}
	}
	t.Run("keepalive", func(t *testing.T) {
		t.Parallel()
		l, b, clk := fakeLease(t) // keepalives every TTL/3 = 1 s
		entered, answer := make(chan struct{}), make(chan struct{})
		b.set(func(b *fakeBackend) { b.kaHook = func(context.Context) { entered <- struct{}{}; <-answer } })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := clk.WaitForSleepers(ctx, 1); err != nil {
			t.Fatal(err)
		}
		clk.Advance(sendAt)
		select {
		case <-entered:
		case <-ctx.Done():
			t.Fatal("keepalive not sent")
		}
		clk.Advance(answerAt - sendAt) // past 2.4 s (the grant) and 3.4 s (this keepalive)
		if l.Valid() {
			t.Fatalf("lease valid at %v, past its deadline, while its keepalive is unanswered", clk.Mono())
		}
		b.set(func(b *fakeBackend) { b.kaHook = nil })
		close(answer)
		if err := clk.WaitForSleepers(ctx, 1); err != nil {
			t.Fatal("keepalive loop did not go back to sleep:", err)
		}
		check(t, l, clk.Mono(), "keepalive")
	})
	t.Run("confirming store", func(t *testing.T) {
		t.Parallel()
		l, b, clk := fakeLeaseOn(t, &confirmingBackend{&fakeBackend{}})
		// Keepalives fail (coordinator unreachable): only the store can
		// prove the lease here.
		b.set(func(b *fakeBackend) { b.kaErr = errors.New("connection refused") })
		clk.Advance(sendAt)
		b.set(func(b *fakeBackend) {
			b.storeHook = func(context.Context) { clk.Advance(answerAt - sendAt) }
		})
		if _, err := l.Extend(context.Background(), t0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		check(t, l, clk.Mono(), "store")
	})
}
