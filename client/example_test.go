package client

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"
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
