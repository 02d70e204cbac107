package ctxcall

import (
	"context"
	"errors"
	"testing"
)

func TestDo(t *testing.T) {
	if v, err := Do(context.Background(), func() (int, error) { return 7, nil }); v != 7 || err != nil {
		t.Fatalf("Do = %d, %v", v, err)
	}
	block := make(chan struct{})
	defer close(block)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Do(ctx, func() (int, error) { <-block; return 1, nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Do on a cancelled context = %v; want context.Canceled", err)
	}
}
