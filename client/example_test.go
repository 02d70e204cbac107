package client

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func ExampleClient_Next() {
	srv := httptest.NewServer(&fakeNode{c: newCluster(), hold: make(chan struct{})}) // an idmint server
	defer srv.Close()
	c, err := New([]string{srv.URL}, Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a, _ := c.Next(ctx, "order")
	b, _ := c.Next(ctx, "order")
	first, count, _ := c.Range(ctx, "order", 3)
	fmt.Println(a, b, first, count)
	// Output: 1 2 3 3
}

func TestCollector(t *testing.T) {
	n := newFakeNode(t, newCluster())
	c := newClient(t, []string{n.url()}, Options{})
	if _, err := c.Next(testCtx(t), "order"); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c.Collector()); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, mf := range mfs {
		got[mf.GetName()] = len(mf.GetMetric())
	}
	for name, want := range map[string]int{"idmint_client_buffered_ids": 1, "idmint_client_refills_total": 1, "idmint_client_endpoint_up": 1, "idmint_client_failovers_total": 1, "idmint_client_hedges_total": 1} {
		if got[name] != want {
			t.Errorf("%s: %d series; want %d (all: %v)", name, got[name], want, got)
		}
	}
}
