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
// idmint_client_refill_errors_total, idmint_client_endpoint_up,
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
	descUp         = prometheus.NewDesc("idmint_client_endpoint_up", "1 while an endpoint's circuit breaker is closed.", []string{"endpoint"}, nil)
	descRequests   = prometheus.NewDesc("idmint_client_endpoint_requests_total", "Requests sent to an endpoint.", []string{"endpoint"}, nil)
	descFailures   = prometheus.NewDesc("idmint_client_endpoint_failures_total", "Failed requests of an endpoint (errors, timeouts, lost hedges).", []string{"endpoint"}, nil)
	descFailovers  = prometheus.NewDesc("idmint_client_failovers_total", "Requests moved to another endpoint after a failure.", nil, nil)
	descHedges     = prometheus.NewDesc("idmint_client_hedges_total", "Requests also sent to a second endpoint for being slow.", nil, nil)
)

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBuffered, descBatch, descRefills, descRefillErrs, descUp, descRequests, descFailures, descFailovers, descHedges} {
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
