// Command gen writes idmint's Grafana dashboard, deploy/grafana/idmint.json:
//
//	go run ./deploy/grafana/gen -o deploy/grafana/idmint.json
//
// (or go generate ./deploy/grafana/gen). Without -o it writes to stdout.
// The committed JSON is this program's output; a test fails when the two
// differ, so change the dashboard here and run the command again.
//
// Every query is a literal PromQL string in a panel's targets[].expr, each
// series named in full, so the tests that check the names against a real
// node's /metrics read them from the JSON.
package main

//go:generate go run . -o ../idmint.json

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
)

func main() {
	if err := parseAndRun(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(2)
	}
}

// parseAndRun takes the command line (program name first) and writes the
// dashboard to -o FILE, or to stdout.
func parseAndRun(args []string) error {
	fl := flag.NewFlagSet(args[0], flag.ContinueOnError)
	out := fl.String("o", "", "write the dashboard to this file instead of stdout")
	if err := fl.Parse(args[1:]); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (the only flag is -o FILE)", fl.Arg(0))
	}
	b, err := render()
	if err != nil {
		return err
	}
	if *out == "" {
		_, err = os.Stdout.Write(b)
		return err
	}
	return os.WriteFile(*out, b, 0o644)
}

// render is the dashboard's JSON as committed: two-space indents, a final
// newline, and "<", ">" and "&" written as they are (PromQL's comparisons
// stay readable).
func render() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(dashboard()); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Label selectors of the dashboard's variables: every node series by job
// and instance, per-key series by key too.
const (
	node = `job=~"$job",instance=~"$instance"`
	key  = `job=~"$job",instance=~"$instance",key=~"$key"`
)

// UID is the dashboard's uid: fixed, so importing a new version replaces
// the old one and links to it keep working.
const UID = "idmint-overview"

func dashboard() *Dashboard {
	var l layout

	l.row("Nodes and builds")
	l.add(12, 7, table("Build per node",
		"idmint_build_info: the version, commit and Go version each node runs. During a rolling upgrade the nodes on the old build and the new are listed side by side.",
		[]string{"Time", "Value", "__name__", "job"},
		map[string]string{"instance": "node", "goversion": "Go"},
		instant(`idmint_build_info{`+node+`}`)))
	l.add(6, 7, timeseries("Nodes per build",
		"How many nodes run each version and commit: a rolling upgrade moves the count from one line to the other.",
		"short",
		q(`count by (version, commit) (idmint_build_info{`+node+`})`, "{{version}} {{commit}}")))
	l.add(6, 7, stat("Nodes ready",
		"Nodes whose /readyz answers 200 (every key and shared resource ready), of the nodes scraped.",
		"short", base("blue"),
		q(`sum(idmint_ready{`+node+`})`, "ready"),
		q(`count(idmint_ready{`+node+`})`, "scraped")))
	l.add(16, 6, timeline("Readiness per node",
		"idmint_ready: 1 while the node is ready (what /readyz says), 0 while a lease, a store or a drain holds it back; a gap: not scraped.",
		"not ready", "ready",
		q(`idmint_ready{`+node+`}`, "{{instance}}")))
	l.add(8, 6, timeseries("Keys served per node",
		"idmint_keys: the keys each node serves (from its config and the key API).",
		"short",
		q(`idmint_keys{`+node+`}`, "{{instance}}")))
	l.add(12, 6, table("Start-up findings per node",
		"idmint_doctor_findings: what the checks a node runs at start found in its config, by check and severity (the count in Value). Run idmint doctor --connect against the config for the checks that need the stores and the coordinator; docs/operations.md says what each check means. Empty: nothing found.",
		[]string{"Time", "__name__", "job"},
		map[string]string{"instance": "node", "Value": "findings"},
		instant(`idmint_doctor_findings{`+node+`} > 0`)))
	l.add(12, 6, table("Region per node",
		"idmint_region_info: the region each node serves (name, index of count). Nodes of one region share its part of every key's ID space; two nodes of different regions with the same index would issue the same IDs. Empty: no node is configured with a region.",
		[]string{"Time", "Value", "__name__", "job"},
		map[string]string{"instance": "node"},
		instant(`idmint_region_info{`+node+`}`)))

	l.row("Traffic and latency")
	l.add(12, 8, timeseries("IDs issued per second, by key",
		"idmint_ids_issued_total per key and strategy, summed over the nodes selected. Order-number keys are never counted (the count is the volume they hide).",
		"ops",
		q(`sum by (key, strategy) (rate(idmint_ids_issued_total{`+key+`}[$__rate_interval]))`, "{{key}} ({{strategy}})")))
	l.add(12, 8, timeseries("IDs issued per second, by node",
		"idmint_ids_issued_total of the keys selected, per node: an uneven split shows a load balancer that favours a node, or a monotonic key's leader.",
		"ops",
		q(`sum by (instance) (rate(idmint_ids_issued_total{`+key+`}[$__rate_interval]))`, "{{instance}}")))
	l.add(8, 8, timeseries("Requests per second, by route",
		"idmint_http_requests_total of every status, per route (HTTP and gRPC; requests for order-number keys are not counted).",
		"reqps",
		q(`sum by (route) (rate(idmint_http_requests_total{`+node+`}[$__rate_interval]))`, "{{route}}")))
	l.add(8, 8, timeseries("Latency p99, by route",
		"99th percentile of idmint_http_request_duration_seconds per route, from the histogram's buckets (the largest bucket ends at 1 s). Routes without requests in the interval draw no line.",
		"s",
		q(`histogram_quantile(0.99, sum by (route, le) (rate(idmint_http_request_duration_seconds_bucket{`+node+`}[$__rate_interval])))`, "{{route}}")))
	l.add(8, 8, timeseries("Latency quantiles, all routes",
		"Median, 99th and 99.9th percentile of every request's time from routing to the answer written, all routes together.",
		"s",
		q(`histogram_quantile(0.5, sum by (le) (rate(idmint_http_request_duration_seconds_bucket{`+node+`}[$__rate_interval])))`, "p50"),
		q(`histogram_quantile(0.99, sum by (le) (rate(idmint_http_request_duration_seconds_bucket{`+node+`}[$__rate_interval])))`, "p99"),
		q(`histogram_quantile(0.999, sum by (le) (rate(idmint_http_request_duration_seconds_bucket{`+node+`}[$__rate_interval])))`, "p99.9")))

	l.row("Process")
	l.add(6, 7, timeseries("CPU",
		"process_cpu_seconds_total: CPU cores each node's process uses.",
		"short",
		q(`rate(process_cpu_seconds_total{`+node+`}[$__rate_interval])`, "{{instance}}")))
	l.add(6, 7, timeseries("Memory",
		"Resident memory of each process, the Go heap in use, and the soft memory limit the runtime keeps the heap under (memory_limit, or GOMEMLIMIT).",
		"bytes",
		q(`process_resident_memory_bytes{`+node+`}`, "{{instance}} resident"),
		q(`go_memstats_heap_inuse_bytes{`+node+`}`, "{{instance}} heap in use"),
		q(`go_gc_gomemlimit_bytes{`+node+`} < 2^62`, "{{instance}} memory limit")))
	l.add(6, 7, timeseries("Goroutines and file descriptors",
		"Goroutines, and open file descriptors as a share of the process's limit (connections count against it).",
		"short",
		q(`go_goroutines{`+node+`}`, "{{instance}} goroutines"),
		q(`100 * process_open_fds{`+node+`} / process_max_fds{`+node+`}`, "{{instance}} % of fds open")))
	l.add(6, 7, timeseries("Restarts",
		"Process starts per interval (process_start_time_seconds changed): a node that restarts again and again, for example killed for memory.",
		"short",
		q(`changes(process_start_time_seconds{`+node+`}[$__rate_interval])`, "{{instance}}")))

	l.row("Refusals")
	l.add(8, 8, timeseries("5xx answers per second, by route",
		"The server's refusals: 503 while a clock, a lease or a store holds a key back (with Retry-After), 500 otherwise.",
		"reqps",
		q(`sum by (route) (rate(idmint_http_requests_total{code="5xx",`+node+`}[$__rate_interval]))`, "{{route}}")))
	l.add(8, 8, timeseries("Refusals by cause",
		"Answer budget: 503s because answer_budget bytes of answers waited for slow readers. Clock rollback: snowflake requests refused because the clock ran behind the last ID by more than the generator waits out. Stalled: connections closed for reading none of an answer in answer_timeout. Abandoned: clients that gave up (499, gRPC CANCELLED; no refusal of the server's).",
		"ops",
		q(`sum(rate(idmint_answer_budget_refused_total{`+node+`}[$__rate_interval]))`, "answer budget spent (503)"),
		q(`sum(rate(idmint_clock_rollback_total{`+key+`}[$__rate_interval]))`, "clock rollback (503)"),
		q(`sum(rate(idmint_answer_stalled_connections_total{`+node+`}[$__rate_interval]))`, "stalled connections closed"),
		q(`sum(rate(idmint_requests_abandoned_total{`+node+`}[$__rate_interval]))`, "abandoned by the client (499)")))
	l.add(8, 8, timeseries("4xx answers per second, by route",
		"Requests refused for the client's fault: bad count or key (400), tokens (401, 403), unknown key (404), rate limit (429).",
		"reqps",
		q(`sum by (route) (rate(idmint_http_requests_total{code="4xx",`+node+`}[$__rate_interval]))`, "{{route}}")))
	l.add(12, 7, timeseries("Clock rollback refusals, by key and node",
		"idmint_clock_rollback_total per snowflake key and node: a node whose clock was set back further than its generator waits out.",
		"ops",
		q(`sum by (key, instance) (rate(idmint_clock_rollback_total{`+key+`}[$__rate_interval]))`, "{{key}} {{instance}}")))
	l.add(12, 7, timeseries("Refusals by cause, by node",
		"The answer-budget refusals and abandoned requests of each node.",
		"ops",
		q(`sum by (instance) (rate(idmint_answer_budget_refused_total{`+node+`}[$__rate_interval]))`, "{{instance}} answer budget"),
		q(`sum by (instance) (rate(idmint_requests_abandoned_total{`+node+`}[$__rate_interval]))`, "{{instance}} abandoned")))

	l.row("Segment keys: buffers and refills")
	l.add(8, 8, timeseries("IDs left in the double buffer",
		"idmint_segment_remaining: IDs a segment key can still hand out from memory on each node (current and next segment). Near zero under load: raise step, or the store is slow.",
		"short",
		q(`idmint_segment_remaining{`+key+`}`, "{{key}} {{instance}}")))
	l.add(8, 8, timeseries("Segment step",
		"idmint_segment_step: the length of the last segment leased; it grows with demand as Leaf's dynamic step does.",
		"short",
		q(`idmint_segment_step{`+key+`}`, "{{key}} {{instance}}")))
	l.add(8, 8, timeseries("Segment refills per second",
		"Segments leased from the store, and leases that failed (load errors) or that the store failed although the double buffer still served (store errors).",
		"ops",
		q(`sum by (key) (rate(idmint_segment_loads_total{`+key+`}[$__rate_interval]))`, "{{key}} loads"),
		q(`sum by (key) (rate(idmint_segment_load_errors_total{`+key+`}[$__rate_interval]))`, "{{key}} load errors"),
		q(`sum by (key) (rate(idmint_segment_store_errors_total{`+key+`}[$__rate_interval]))`, "{{key}} store errors")))
	l.add(24, 6, timeline("Segment store failing",
		"idmint_segment_store_failing: 1 while a key's last lease failed and it retries; the key serves what its buffer holds and then answers 503.",
		"ok", "failing",
		q(`idmint_segment_store_failing{`+key+`}`, "{{key}} {{instance}}")))

	l.row("Snowflake keys: worker-ID leases and horizons")
	l.add(12, 6, timeline("Worker-ID lease held",
		"idmint_lease_held: 1 while the node holds its worker-ID lease; without it, its snowflake keys refuse (503) rather than risk an ID another node issues.",
		"lost", "held",
		q(`idmint_lease_held{`+node+`}`, "{{instance}} {{resource}}")))
	l.add(12, 6, table("Worker ID and lease generation per node",
		"idmint_worker_id (-1 while none is held) and idmint_lease_generation, the fencing token: it rises with every new lease of the ID.",
		[]string{"Time"},
		map[string]string{"instance": "node", "Value #A": "worker ID", "Value #B": "generation"},
		// Aggregated by the labels the two share, so the table's merge
		// joins them into one row per node and resource (the series' own
		// names differ).
		instant(`max by (instance, resource) (idmint_worker_id{`+node+`})`),
		instant(`max by (instance, resource) (idmint_lease_generation{`+node+`})`)))
	l.add(8, 8, withThresholds(timeseries("Lease valid for",
		"idmint_lease_valid_seconds: time until the lease's fence stops issuing unless a keepalive is confirmed. -1: a lease that cannot expire (file, static).",
		"s",
		q(`idmint_lease_valid_seconds{`+node+`}`, "{{instance}} {{resource}}")), above(0)))
	l.add(8, 8, timeseries("Horizon left",
		"idmint_snowflake_horizon_seconds: time until a key's generator reaches the horizon recorded in its lease It is extended before an ID is stamped past it, on demand, so an idle key's value falls below zero: harmless. No series while no lease is held.",
		"s",
		q(`idmint_snowflake_horizon_seconds{`+key+`}`, "{{key}} {{instance}}")))
	l.add(8, 8, timeseries("IDs stamped ahead of the clock",
		"idmint_snowflake_ahead_seconds: how far the time in a key's last ID runs ahead of the wall clock (borrowed ticks under load, a clock set back and bridged).",
		"s",
		q(`idmint_snowflake_ahead_seconds{`+key+`}`, "{{key}} {{instance}}")))

	l.row("Monotonic keys: leaders and forwards")
	l.add(12, 7, timeline("Leader per key",
		"idmint_monotonic_leader: 1 on the node that is the proven leader of a monotonic key; exactly one per key while it serves.",
		"follower", "leader",
		q(`idmint_monotonic_leader{`+key+`}`, "{{key}} {{instance}}")))
	l.add(12, 7, timeseries("Forwarded to the leader per second",
		"Requests a follower forwarded to the key's leader, and forwarded requests the leader served.",
		"ops",
		q(`sum by (key, instance) (rate(idmint_monotonic_forwarded_total{`+key+`}[$__rate_interval]))`, "{{key}} {{instance}} forwarded"),
		q(`sum by (key, instance) (rate(idmint_monotonic_forwarded_served_total{`+key+`}[$__rate_interval]))`, "{{key}} {{instance}} served for others")))
	l.add(12, 7, timeseries("Leadership terms won",
		"idmint_monotonic_failovers_total: terms each node won per interval; more than one now and then means leaders change (a kill, a lost etcd session).",
		"short",
		q(`sum by (key, instance) (increase(idmint_monotonic_failovers_total{`+key+`}[$__rate_interval]))`, "{{key}} {{instance}}")))
	l.add(12, 7, timeseries("Bound headroom",
		"idmint_monotonic_bound_headroom: the persisted bound minus the last value issued (timestamp form: seconds ahead of the wall clock); 0 on followers.",
		"short",
		q(`idmint_monotonic_bound_headroom{`+key+`}`, "{{key}} {{instance}}")))

	l.row("Witness: claims and repairs")
	l.add(8, 8, timeseries("Repairs: stores that went back",
		"A store that answered below the witness's mark (a failover to a lagging replica, a restored backup) and was raised above it before any ID was served: segment stores, ticket servers, Redis counters, and monotonic keys' bounds (in etcd, or the bound file). Every one is an incident the witness turned into a gap instead of repeated IDs.",
		"short",
		q(`sum by (key, instance) (increase(idmint_segment_store_went_back_total{`+key+`}[$__rate_interval]))`, "{{key}} {{instance}} segment store"),
		q(`sum by (key, instance) (increase(idmint_ticket_went_back_total{`+key+`}[$__rate_interval]))`, "{{key}} {{instance}} ticket server"),
		q(`sum by (key, instance) (increase(idmint_redis_went_back_total{`+key+`}[$__rate_interval]))`, "{{key}} {{instance}} redis counter"),
		q(`sum by (key, instance) (increase(idmint_monotonic_went_back_total{`+key+`}[$__rate_interval]))`, "{{key}} {{instance}} monotonic bound")))
	l.add(8, 8, timeseries("Claims in the witness",
		"A segment key claims each segment in the witness before serving it, a Redis key raises its high-water mark before handing out values above it: these count the claims per interval.",
		"short",
		q(`sum by (key) (increase(idmint_segment_loads_total{`+key+`}[$__rate_interval]))`, "{{key}} segments claimed"),
		q(`sum by (key) (changes(idmint_redis_counter_ceiling{`+key+`}[$__rate_interval]))`, "{{key}} redis mark raised")))
	l.add(8, 8, timeseries("Ticket servers",
		"Ticket servers up (not backing off after a failure) of those configured, and changes of the database behind a server's URL (a failover or a restore).",
		"short",
		q(`min by (key) (idmint_ticket_servers_up{`+key+`})`, "{{key}} up"),
		q(`max by (key) (idmint_ticket_servers{`+key+`})`, "{{key}} configured"),
		q(`sum by (key) (increase(idmint_ticket_server_changes_total{`+key+`}[$__rate_interval]))`, "{{key}} server identity changed")))
	l.add(24, 7, timeseries("Redis keys: high-water mark and last value",
		"idmint_redis_counter_ceiling: the persisted mark a Redis key works under; idmint_redis_counter_last: the largest value this node handed out. No value above the mark is ever returned, so a Redis that loses writes cannot repeat one.",
		"short",
		q(`max by (key) (idmint_redis_counter_ceiling{`+key+`})`, "{{key}} mark"),
		q(`max by (key) (idmint_redis_counter_last{`+key+`})`, "{{key}} last issued")))

	l.row("Runway")
	l.add(8, 7, stat("Layout: days left",
		"idmint_layout_end_timestamp_seconds: when a snowflake key's bit layout runs out of time, as days from now (the earliest over the nodes). Red under 90 days, orange under a year.",
		"d", below(90, 365),
		q(`min by (key) ((idmint_layout_end_timestamp_seconds{`+key+`} - time()) / 86400)`, "{{key}}")))
	l.add(8, 7, stat("Worker IDs free",
		"idmint_worker_ids_free of idmint_worker_ids: the worker IDs of each pool not held in the coordinator. A node that cannot lease one serves no snowflake key. Red under 10 %.",
		"percent", below(10, 25),
		q(`min by (resource) (100 * idmint_worker_ids_free{`+node+`} / idmint_worker_ids{`+node+`})`, "{{resource}}")))
	l.add(8, 7, stat("Counter headroom",
		"idmint_counter_headroom of idmint_counter_ceiling: the share of a counter's IDs still to issue (segment, ticket, Redis, monotonic counter), up to 2^63-1, or 2^53-1 for a JavaScript-safe key.",
		"percent", below(1, 10),
		q(`min by (key) (100 * idmint_counter_headroom{`+key+`} / idmint_counter_ceiling{`+key+`})`, "{{key}}")))
	l.add(12, 8, withThresholds(timeseries("Counter: days left at the recent rate",
		"idmint_counter_headroom divided by how fast it shrank over the last 6 hours, in days. Keys whose headroom did not shrink draw no line. Red under 30 days.",
		"d",
		q(`min by (key) ((idmint_counter_headroom{`+key+`} / -deriv(idmint_counter_headroom{`+key+`}[6h])) > 0) / 86400`, "{{key}}")), below(30, 90)))
	l.add(12, 8, withThresholds(timeseries("Order-number capacity used",
		"idmint_ordernum_capacity_used_ratio: the share of an order-number format's capacity used (per day with a date part). Only the admin listener serves it (the public /metrics never does: with the capacity it gives the volume order numbers hide), so scrape the admin listener to see it. Not filtered by the Key variable (order-number keys issue no counted IDs).",
		"percentunit",
		q(`max by (key) (idmint_ordernum_capacity_used_ratio{`+node+`})`, "{{key}}")), above(0.8)))
	l.newline()

	return &Dashboard{
		Annotations: Annotations{List: []Annotation{{
			BuiltIn: 1, Datasource: &Datasource{Type: "grafana", UID: "-- Grafana --"}, Enable: true, Hide: true,
			IconColor: "rgba(0, 211, 255, 1)", Name: "Annotations & Alerts", Type: "dashboard",
		}}},
		Description:   "idmint: builds, traffic, refusals, segment buffers, worker-ID leases, monotonic leaders, the witness and the runway of every key. Generated by deploy/grafana/gen.",
		Editable:      true,
		GraphTooltip:  1,
		Links:         []Link{},
		Panels:        l.panels,
		Refresh:       "30s",
		SchemaVersion: 39,
		Tags:          []string{"idmint"},
		Templating:    Templating{List: variables()},
		Time:          TimeRange{From: "now-6h", To: "now"},
		Title:         "idmint",
		UID:           UID,
		Version:       1,
	}
}

// variables are the data source and the job, instance and key filters;
// job, instance and key each take several values or All.
func variables() []Variable {
	labels := func(name, label, desc, query string) Variable {
		return Variable{
			Current:    Current{Text: []string{"All"}, Value: []string{"$__all"}},
			Datasource: prometheus, Definition: query, Description: desc,
			IncludeAll: true, AllValue: ".*", Label: label, Multi: true, Name: name, Options: []struct{}{},
			Query:   VariableQuery{QryType: 1, Query: query, RefID: "PrometheusVariableQueryEditor-VariableQuery"},
			Refresh: 2, // on every time range change: nodes come and go
			Sort:    1, Type: "query",
		}
	}
	return []Variable{
		{Current: Current{Text: "default", Value: "default"}, // Grafana's default data source until one is picked
			Description: "The Prometheus that scrapes idmint's /metrics (the admin listener, or the public one with metrics: public).",
			Label:       "Data source", Name: "datasource", Options: []struct{}{}, Query: "prometheus", Refresh: 1, Type: "datasource"},
		labels("job", "Job", "The scrape jobs of idmint nodes.", `label_values(idmint_ready, job)`),
		labels("instance", "Node", "The nodes (scrape targets) of the jobs selected.", `label_values(idmint_ready{job=~"$job"}, instance)`),
		labels("key", "Key", "The keys that issued IDs on the nodes selected; panels of shared resources (worker-ID leases) ignore it.",
			`label_values(idmint_ids_issued_total{job=~"$job",instance=~"$instance"}, key)`),
	}
}
