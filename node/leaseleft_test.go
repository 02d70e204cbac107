package node

import (
	"context"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/snowflake"
)

// TestLeaseLeft: LeaseLeft reads the fence of the lease held (TTL - margin
// after acquiring, shrinking with the monotonic clock, 0 once it closed),
// and says a static lease never expires.
func TestLeaseLeft(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clk := clock.NewFake(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	n, db := sqlNode(ctx, t, clk, snowflake.Settings{})
	defer n.Close()
	left, expires := n.LeaseLeft()
	if !expires || left <= 0 || left > 10*time.Second {
		t.Fatalf("fresh SQL lease: LeaseLeft = %v, %v; want within (0, TTL]", left, expires)
	}
	db.Close() // no keepalive can move the fence any more
	clk.Advance(time.Second)
	if l2, _ := n.LeaseLeft(); l2 != left-time.Second {
		t.Fatalf("a second later LeaseLeft = %v, want %v", l2, left-time.Second)
	}
	clk.Advance(left)
	if l3, _ := n.LeaseLeft(); l3 != 0 {
		t.Fatalf("past the fence LeaseLeft = %v, want 0", l3)
	}

	layout, _ := snowflake.Lookup("twitter")
	s, err := New(ctx, Config{Layout: layout, Coordinator: "static://3?horizon=memory", Node: map[string]int64{"datacenter": 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, expires := s.LeaseLeft(); expires {
		t.Fatal("a static lease reports that it expires")
	}
}
