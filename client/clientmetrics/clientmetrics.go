// Package clientmetrics exposes a client.Client's state as Prometheus
// metrics. The client core does not import Prometheus, so a program that
// does not import this package does not link it.
//
//	prometheus.MustRegister(clientmetrics.Collector(c))
package clientmetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/idmint/idmint/client"
)

// Collector returns a Prometheus collector of c's state (c.Stats() at
// each scrape), labelled by key or endpoint: idmint_client_buffered_ids,
// idmint_client_batch_ids, idmint_client_refills_total,
// idmint_client_refill_errors_total, idmint_client_prefetch_target_ids,
// idmint_client_draw_rate_ids_per_second,
// idmint_client_refill_latency_seconds,
// idmint_client_refills_in_flight, idmint_client_wait_seconds (a
// histogram of the calls that waited for a refill: its _count is how
// many did, its buckets how long, 50µs to 10s),
// idmint_client_wait_max_seconds, idmint_client_endpoint_up,
// idmint_client_endpoint_requests_total,
// idmint_client_endpoint_failures_total, idmint_client_failovers_total
// and idmint_client_hedges_total. Register it with a
// prometheus.Registerer.
func Collector(c *client.Client) prometheus.Collector { return collector{c} }

type collector struct{ c *client.Client }

var (
	descBuffered   = prometheus.NewDesc("idmint_client_buffered_ids", "IDs the client holds for a key.", []string{"key"}, nil)
	descBatch      = prometheus.NewDesc("idmint_client_batch_ids", "IDs the next refill of a key asks for.", []string{"key"}, nil)
	descRefills    = prometheus.NewDesc("idmint_client_refills_total", "Refills of a key that brought IDs.", []string{"key"}, nil)
	descRefillErrs = prometheus.NewDesc("idmint_client_refill_errors_total", "Refills of a key that brought none.", []string{"key"}, nil)
	descTarget     = prometheus.NewDesc("idmint_client_prefetch_target_ids", "IDs the client keeps held or asked for ahead of a key's callers (the prefetch distance).", []string{"key"}, nil)
	descRate       = prometheus.NewDesc("idmint_client_draw_rate_ids_per_second", "A key's estimated draw, in IDs per second (doubled while calls wait).", []string{"key"}, nil)
	descRefillLat  = prometheus.NewDesc("idmint_client_refill_latency_seconds", "The slowest of a key's last 64 refill requests that brought IDs.", []string{"key"}, nil)
	descInFlight   = prometheus.NewDesc("idmint_client_refills_in_flight", "A key's refill requests running.", []string{"key"}, nil)
	descWait       = prometheus.NewDesc("idmint_client_wait_seconds", "How long calls of a key that found its buffer empty waited for a refill.", []string{"key"}, nil)
	descWaitMax    = prometheus.NewDesc("idmint_client_wait_max_seconds", "The longest wait of a call of a key for a refill since the client started.", []string{"key"}, nil)
	descUp         = prometheus.NewDesc("idmint_client_endpoint_up", "1 while an endpoint's circuit breaker is closed.", []string{"endpoint"}, nil)
	descRequests   = prometheus.NewDesc("idmint_client_endpoint_requests_total", "Requests sent to an endpoint.", []string{"endpoint"}, nil)
	descFailures   = prometheus.NewDesc("idmint_client_endpoint_failures_total", "Failed requests of an endpoint (errors, timeouts, lost hedges).", []string{"endpoint"}, nil)
	descFailovers  = prometheus.NewDesc("idmint_client_failovers_total", "Requests moved to another endpoint after a failure.", nil, nil)
	descHedges     = prometheus.NewDesc("idmint_client_hedges_total", "Requests also sent to a second endpoint for being slow.", nil, nil)
)

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBuffered, descBatch, descRefills, descRefillErrs, descTarget, descRate, descRefillLat, descInFlight, descWait, descWaitMax, descUp, descRequests, descFailures, descFailovers, descHedges} {
		ch <- d
	}
}

func (x collector) Collect(ch chan<- prometheus.Metric) {
	s := x.c.Stats()
	for _, k := range s.Keys {
		ch <- prometheus.MustNewConstMetric(descBuffered, prometheus.GaugeValue, float64(k.Buffered), k.Key)
		ch <- prometheus.MustNewConstMetric(descBatch, prometheus.GaugeValue, float64(k.Batch), k.Key)
		ch <- prometheus.MustNewConstMetric(descRefills, prometheus.CounterValue, float64(k.Refills), k.Key)
		ch <- prometheus.MustNewConstMetric(descRefillErrs, prometheus.CounterValue, float64(k.RefillErrors), k.Key)
		ch <- prometheus.MustNewConstMetric(descTarget, prometheus.GaugeValue, float64(k.Target), k.Key)
		ch <- prometheus.MustNewConstMetric(descRate, prometheus.GaugeValue, k.DrawRate, k.Key)
		ch <- prometheus.MustNewConstMetric(descRefillLat, prometheus.GaugeValue, k.RefillLatency.Seconds(), k.Key)
		ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(k.InFlight), k.Key)
		buckets := make(map[float64]uint64, len(k.WaitBuckets))
		for _, b := range k.WaitBuckets {
			buckets[b.UpTo.Seconds()] = uint64(b.Count)
		}
		ch <- prometheus.MustNewConstHistogram(descWait, uint64(k.Waits), k.WaitTotal.Seconds(), buckets, k.Key)
		ch <- prometheus.MustNewConstMetric(descWaitMax, prometheus.GaugeValue, k.WaitMax.Seconds(), k.Key)
	}
	for _, e := range s.Endpoints {
		up := 0.0
		if e.Available {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, up, e.URL)
		ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, float64(e.Requests), e.URL)
		ch <- prometheus.MustNewConstMetric(descFailures, prometheus.CounterValue, float64(e.Failures), e.URL)
	}
	ch <- prometheus.MustNewConstMetric(descFailovers, prometheus.CounterValue, float64(s.Failovers))
	ch <- prometheus.MustNewConstMetric(descHedges, prometheus.CounterValue, float64(s.Hedges))
}
