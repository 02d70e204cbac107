// Command idmint issues, decodes and serves unique IDs. See the README.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, again, stop := signals()
	code := run(ctx, &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, again: again}, os.Args[1:])
	stop()
	os.Exit(code)
}

// signals returns a context that ends at the first SIGINT or SIGTERM and
// a channel closed at the second (serve then skips the rest of its drain
// period), and a function that stops listening for them.
func signals() (context.Context, <-chan struct{}, func()) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	again := make(chan struct{})
	done := make(chan struct{})
	go func() {
		for n := 0; n < 2; n++ {
			select {
			case <-ch:
			case <-done:
				return
			}
			if n == 0 {
				cancel()
			} else {
				close(again)
			}
		}
	}()
	return ctx, again, func() { signal.Stop(ch); close(done); cancel() }
}
