// Package ctxcall runs a blocking call that takes no context (go-zookeeper's
// client) so that its caller can give up when a context ends.
package ctxcall

import "context"

// Do runs f in a goroutine and returns its result, or ctx's error as soon
// as ctx is done; f then finishes on its own and its result is dropped.
func Do[T any](ctx context.Context, f func() (T, error)) (T, error) {
	type res struct {
		v   T
		err error
	}
	ch := make(chan res, 1)
	go func() { v, err := f(); ch <- res{v, err} }()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
