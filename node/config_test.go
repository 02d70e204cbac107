package node

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/snowflake"
	"github.com/idmint/idmint/testkit/testserver"
	"github.com/idmint/idmint/worker"
)

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	tw := layout()
	sonyflake, _ := snowflake.Lookup("sonyflake")
	for _, c := range []struct {
		name string
		cfg  Config
		is   error
		says string
	}{
		{"no layout", Config{Coordinator: "static://1?horizon=memory"}, ErrConfig, "Layout"},
		{"no coordinator", Config{Layout: tw}, ErrConfig, "Coordinator"},
		{"both", Config{Layout: tw, Coordinator: "static://1?horizon=memory", Assigner: must(worker.NewStatic(1))}, ErrConfig, "exactly one"},
		{"bad url", Config{Layout: tw, Coordinator: "etcd://h:0/x"}, worker.ErrBadURL, `host "h:0"`},
		{"out of range", Config{Layout: tw, Coordinator: "static://32?horizon=memory", Node: map[string]int64{"datacenter": 1}}, worker.ErrOutOfRange, "worker id 32 (from static) is out of range 0..31"},
		{"ip too wide", Config{Layout: tw, Coordinator: "ip://10.0.1.2", Node: map[string]int64{"datacenter": 1}}, worker.ErrOutOfRange, "out of range 0..31"},
		{"unknown field", Config{Layout: tw, Coordinator: "static://1?horizon=memory", WorkerField: "rack"}, ErrConfig, `WorkerField "rack"`},
		{"field set twice", Config{Layout: tw, Coordinator: "static://1?horizon=memory", Node: map[string]int64{"worker": 2}}, ErrConfig, `Node["worker"]`},
		{"limit too wide", Config{Layout: tw, Coordinator: "static://1?horizon=memory", WorkerLimit: 33}, ErrConfig, "WorkerLimit 33"},
		{"missing datacenter", Config{Layout: tw, Coordinator: "static://1?horizon=memory"}, snowflake.ErrInvalidNode, "datacenter"},
		{"sonyflake takes ip", Config{Layout: sonyflake, Coordinator: "static://70000?horizon=memory"}, worker.ErrOutOfRange, "0..65535"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, err := New(context.Background(), c.cfg)
			if err == nil {
				n.Close()
				t.Fatal("New succeeded")
			}
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("err = %v; want %v naming %q", err, c.is, c.says)
			}
		})
	}
}

func must(a worker.Assigner, err error) worker.Assigner {
	if err != nil {
		panic(err)
	}
	return a
}

// TestReacquireAfterLoss drives a node on a fake clock: its file lease is
// closed under it (as a coordinator would drop it); the node reports
// ErrNoLease, acquires again, and its new generator starts after the horizon.
func TestReacquireAfterLoss(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC))
	a, err := worker.NewFile(filepath.Join(t.TempDir(), "worker"), 3, worker.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(ctx, Config{Layout: layout(), Assigner: a, Clock: clk, Node: map[string]int64{"datacenter": 1}, Retry: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	var last int64
	for range 100 {
		id, err := n.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if id <= last {
			t.Fatalf("ID %d not above %d", id, last)
		}
		last = id
	}
	id, gen, ok := n.WorkerID()
	if !ok || id != 3 {
		t.Fatalf("WorkerID = %d, %d, %v", id, gen, ok)
	}
	n.cur.Load().lease.Close() // the lease ends under the node
	testserver.Eventually(t, "the node to re-acquire its lease", 10*time.Second, func() bool {
		_, g2, ok := n.WorkerID()
		clk.Advance(time.Millisecond) // wake the retry sleep, if any
		return ok && g2 > gen
	})
	clk.Step(-time.Minute) // and the wall clock goes back: the horizon still holds
	// next asks for an ID, moving the fake clock on while the generator
	// waits (for the clock to pass the horizon, or the next tick).
	next := func() (int64, error) {
		type res struct {
			id  int64
			err error
		}
		ch := make(chan res, 1)
		go func() { id, err := n.Next(ctx); ch <- res{id, err} }()
		deadline := time.Now().Add(30 * time.Second)
		for {
			select {
			case r := <-ch:
				return r.id, r.err
			default:
			}
			if time.Now().After(deadline) {
				return 0, errors.New("Next did not return within 30 s of advancing the fake clock")
			}
			if clk.Sleepers() > 0 {
				clk.Advance(100 * time.Millisecond)
			}
			runtime.Gosched()
		}
	}
	for range 100 {
		id, err := next()
		if errors.Is(err, snowflake.ErrClockBehind) {
			clk.Advance(time.Second)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if id <= last {
			t.Fatalf("after re-acquisition ID %d is not above %d", id, last)
		}
		last = id
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Next(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close = %v", err)
	}
}
