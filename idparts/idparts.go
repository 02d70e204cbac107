// Package idparts is the one shape of a decoded ID: the JSON object the
// server's /v1/decode answers and `idmint decode --json` prints. Both build
// it here, from the same Parts, so the two agree field by field.
//
// The decoders that fill Parts (a snowflake layout, the timestamp form of a
// monotonic ID, the UUID family and other text formats) are the server's
// decode layouts, registered by server/strategies, which exports them for
// the CLI. This package imports nothing of idmint, so the server core can
// use it without depending on any strategy.
package idparts

import (
	"strconv"
	"time"
)

// Parts is an ID taken apart. Its fields are those of server.Decoded, in
// the same order, so a value of one type converts to the other.
type Parts struct {
	// Layout names the layout or format the ID was read with: a snowflake
	// layout's name ("leaf", "twitter"), "monotonic", or a text format
	// ("uuid", "ulid"...).
	Layout string
	// Time is the moment stamped in the ID; zero when it has none.
	Time time.Time
	// Node is the worker, machine or node field; 0 when the format has
	// none.
	Node int64
	// Sequence is the sequence field (a monotonic ID's logical counter);
	// 0 when the format has none.
	Sequence int64
	// Extra holds the other fields by name: snowflake node fields other
	// than Node ("datacenter"), a UUID's version and variant, random bits.
	Extra map[string]string
}

// Answer is the JSON object of a decoded ID:
//
//	{"id":"…","layout":"leaf","time":"2026-12-02T20:28:58.405Z","unix_ms":"1796243338405","node":0,"sequence":8}
//
// time (RFC 3339 in UTC, with as many fractional digits as it needs) and
// unix_ms (a string: JavaScript loses precision above 2^53) are left out
// when the ID has no time, extra when it is empty. node and sequence are
// numbers and always present.
type Answer struct {
	ID       string            `json:"id"`
	Layout   string            `json:"layout"`
	Time     string            `json:"time,omitempty"`
	UnixMs   string            `json:"unix_ms,omitempty"`
	Node     int64             `json:"node"`
	Sequence int64             `json:"sequence"`
	Extra    map[string]string `json:"extra,omitempty"`
}

// Answer is p as the JSON object for id, the ID's text as it was given.
func (p Parts) Answer(id string) Answer {
	a := Answer{ID: id, Layout: p.Layout, Node: p.Node, Sequence: p.Sequence, Extra: p.Extra}
	if !p.Time.IsZero() {
		a.Time = p.Time.UTC().Format(time.RFC3339Nano)
		a.UnixMs = strconv.FormatInt(p.Time.UnixMilli(), 10)
	}
	return a
}
