package client

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
)

// segTransport is a Transport of a scheme the client does not speak
// itself: one segment key, answers that name their node.
type segTransport struct {
	node   string
	next   atomic.Int64
	closed atomic.Bool
}

func (s *segTransport) Range(_ context.Context, key, _ string, n int) (int64, int64, Meta, error) {
	m := Meta{Node: s.node, Strategy: "segment", Generation: "1"}
	if key != "order" {
		return 0, 0, m, &Error{Endpoint: s.node, Status: 404, Code: "unknown_key", Message: "no key called " + key}
	}
	return s.next.Add(int64(n)) - int64(n) + 1, int64(n), m, nil
}

func (s *segTransport) IDs(ctx context.Context, key, token string, n int) ([]int64, bool, Meta, error) {
	first, count, m, err := s.Range(ctx, key, token, n)
	if err != nil {
		return nil, false, m, err
	}
	ids := make([]int64, count)
	for i := range ids {
		ids[i] = first + int64(i)
	}
	return ids, false, m, nil
}

func (s *segTransport) Close() { s.closed.Store(true) }

// A Dialer of Options.Dialers serves its scheme's endpoints: its
// transport's IDs come back, its answers' Meta reach the client (the node
// name in Stats), its errors are classified as the HTTP transport's are,
// and Close closes it.
func TestDialerTransport(t *testing.T) {
	tr := &segTransport{node: "mem-node"}
	var got Target
	c, err := New([]string{"mem://a:1"}, Options{Dialers: map[string]Dialer{"mem": func(tg Target) (Transport, error) {
		got = tg
		return tr, nil
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Endpoint != "mem://a:1" || got.URL == nil || got.URL.Host != "a:1" {
		t.Errorf("Dialer got %+v; want the endpoint and its parsed URL", got)
	}
	ctx := testCtx(t)
	seen := map[int64]bool{}
	for range 5000 {
		id, err := c.Next(ctx, "order")
		if err != nil {
			t.Fatal(err)
		}
		if seen[id] {
			t.Fatalf("ID %d twice", id)
		}
		seen[id] = true
	}
	st := c.Stats()
	if len(st.Endpoints) != 1 || st.Endpoints[0].Node != "mem-node" {
		t.Errorf("endpoints %+v; want the node name the transport's Meta gave", st.Endpoints)
	}
	if len(st.Keys) != 1 || st.Keys[0].Refills == 0 {
		t.Errorf("keys %+v; want the segment key prefetched with refills", st.Keys)
	}
	var e *Error
	if _, err := c.Next(ctx, "nosuch"); !errors.As(err, &e) || e.Retryable || e.Code != "unknown_key" {
		t.Errorf("Next(nosuch) = %v; want the transport's permanent unknown_key", err)
	}
	c.Close()
	if !tr.closed.Load() {
		t.Error("Close did not close the Dialer's transport")
	}
}

func TestDialerOptions(t *testing.T) {
	mem := func(Target) (Transport, error) { return &segTransport{}, nil }
	for _, tc := range []struct {
		eps  []string
		opts Options
		want string
	}{
		{[]string{"grpc://a:1"}, Options{}, `scheme "grpc" needs the gRPC transport: set Options.Dialers to grpctransport.Dialers`},
		{[]string{"grpcs://a:1"}, Options{}, `scheme "grpcs" needs the gRPC transport`},
		{[]string{"ftp://a:1"}, Options{Dialers: map[string]Dialer{"mem": mem}}, `scheme "ftp": want http, https or one of Options.Dialers: mem`},
		{[]string{"http://a:1"}, Options{Dialers: map[string]Dialer{"http": mem}}, `Options.Dialers: "http": HTTP is built in`},
		{[]string{"http://a:1"}, Options{Dialers: map[string]Dialer{"Mem": mem}}, `Options.Dialers: "Mem": want a lowercase URL scheme`},
		{[]string{"http://a:1"}, Options{Dialers: map[string]Dialer{"mem://": mem}}, `Options.Dialers: "mem://": want a lowercase URL scheme`},
		{[]string{"http://a:1"}, Options{Dialers: map[string]Dialer{"mem": nil}}, `Options.Dialers: "mem": the Dialer is nil`},
		{[]string{"mem://a:1"}, Options{Dialers: map[string]Dialer{"mem": func(Target) (Transport, error) { return nil, errors.New("no such thing") }}}, "no such thing"},
	} {
		if _, err := New(tc.eps, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%v, Dialers %v) = %v; want an error containing %q", tc.eps, tc.opts.Dialers, err, tc.want)
		}
	}
	// A Dialer's error closes the transports already built.
	first := &segTransport{}
	_, err := New([]string{"mem://a:1", "bad://b:1"}, Options{Dialers: map[string]Dialer{
		"mem": func(Target) (Transport, error) { return first, nil },
		"bad": func(Target) (Transport, error) { return nil, errors.New("refused") },
	}})
	if err == nil || !first.closed.Load() {
		t.Errorf("New with a failing second Dialer = %v, first transport closed %v; want an error and it closed", err, first.closed.Load())
	}
}
