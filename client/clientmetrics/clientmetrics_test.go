package clientmetrics_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idmint/idmint/client"
	"github.com/idmint/idmint/client/clientmetrics"
)

// segmentNode is an idmint node over HTTP with one segment key, order.
func segmentNode(t *testing.T) *httptest.Server {
	var mu sync.Mutex
	var next int64
	take := func(n int64) int64 {
		mu.Lock()
		defer mu.Unlock()
		next += n
		return next - n + 1
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/keys/order/ids", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(r.URL.Query().Get("count"), 10, 64)
		if err != nil || n < 1 || n > 10000 {
			http.Error(w, `{"error":{"code":"bad_count","message":"count","field":"count"}}`, http.StatusBadRequest)
			return
		}
		first := take(n)
		ids := make([]string, n)
		for i := range ids {
			ids[i] = strconv.FormatInt(first+int64(i), 10)
		}
		json.NewEncoder(w).Encode(map[string]any{"key": "order", "strategy": "segment", "ids": ids})
	})
	mux.HandleFunc("GET /v1/keys/order/range", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(r.URL.Query().Get("count"), 10, 64)
		if err != nil || n < 1 {
			http.Error(w, `{"error":{"code":"bad_count","message":"count","field":"count"}}`, http.StatusBadRequest)
			return
		}
		first := take(n)
		w.Header().Set("Idmint-Strategy", "segment")
		json.NewEncoder(w).Encode(map[string]any{"key": "order", "first": strconv.FormatInt(first, 10), "last": strconv.FormatInt(first+n-1, 10), "count": n})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// The collector registers with a pedantic registry (its descriptions
// match what it collects) and gives the client's Stats: one series per
// key and endpoint, the endpoint up, the key's refills counted.
func TestCollector(t *testing.T) {
	srv := segmentNode(t)
	c, err := client.New([]string{srv.URL}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Next(ctx, "order"); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(clientmetrics.Collector(c)); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]int{}
	value := map[string]float64{}
	label := map[string]string{}
	for _, mf := range mfs {
		series[mf.GetName()] = len(mf.GetMetric())
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				label[mf.GetName()] = l.GetName() + "=" + l.GetValue()
			}
			switch {
			case m.GetGauge() != nil:
				value[mf.GetName()] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				value[mf.GetName()] = m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				h := m.GetHistogram()
				value[mf.GetName()] = float64(h.GetSampleCount())
				value[mf.GetName()+"_sum"] = h.GetSampleSum()
				if b := h.GetBucket(); len(b) > 0 {
					value[mf.GetName()+"_top"] = float64(b[len(b)-1].GetCumulativeCount())
					value[mf.GetName()+"_le"] = b[len(b)-1].GetUpperBound()
				}
			}
		}
	}
	for name, want := range map[string]int{"idmint_client_prefetch_target_ids": 1, "idmint_client_draw_rate_ids_per_second": 1, "idmint_client_refill_latency_seconds": 1,
		"idmint_client_refills_in_flight": 1, "idmint_client_wait_seconds": 1, "idmint_client_wait_max_seconds": 1, "idmint_client_buffered_ids": 1, "idmint_client_batch_ids": 1, "idmint_client_refills_total": 1, "idmint_client_refill_errors_total": 1,
		"idmint_client_endpoint_up": 1, "idmint_client_endpoint_requests_total": 1, "idmint_client_endpoint_failures_total": 1, "idmint_client_failovers_total": 1, "idmint_client_hedges_total": 1} {
		if series[name] != want {
			t.Errorf("%s: %d series; want %d (all: %v)", name, series[name], want, series)
		}
	}
	st := c.Stats() // after the scrape: counters only grow (a refill may run meanwhile)
	if value["idmint_client_endpoint_up"] != 1 || label["idmint_client_endpoint_up"] != "endpoint="+srv.URL {
		t.Errorf("idmint_client_endpoint_up{%s} = %v; want 1 for endpoint %s", label["idmint_client_endpoint_up"], value["idmint_client_endpoint_up"], srv.URL)
	}
	if got, want := value["idmint_client_endpoint_requests_total"], float64(st.Endpoints[0].Requests); got > want || got < 1 {
		t.Errorf("idmint_client_endpoint_requests_total = %v; want at least 1 and at most Stats' %v of later", got, want)
	}
	// The first call waited for the key's first answer: one wait, in the
	// histogram's buckets (up to 10 s) and its sum.
	w := "idmint_client_wait_seconds"
	if value[w] != 1 || value[w+"_top"] != 1 || value[w+"_le"] != 10 || value[w+"_sum"] <= 0 || value[w+"_sum"] != value["idmint_client_wait_max_seconds"] {
		t.Errorf("%s: count %v, last bucket %v ≤ %vs, sum %v s, max %v s; want the first call's wait counted once", w, value[w], value[w+"_top"], value[w+"_le"], value[w+"_sum"], value["idmint_client_wait_max_seconds"])
	}
	if value["idmint_client_prefetch_target_ids"] < 100 {
		t.Errorf("idmint_client_prefetch_target_ids = %v; want at least MinBatch (100)", value["idmint_client_prefetch_target_ids"])
	}
	if label["idmint_client_buffered_ids"] != "key=order" {
		t.Errorf("idmint_client_buffered_ids labelled %q; want key=order", label["idmint_client_buffered_ids"])
	}
}
