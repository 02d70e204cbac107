package strategies

import (
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/snowflake"
)

// The decoders behind /v1/decode's layouts, exported for `idmint decode`,
// so the CLI takes an ID apart with the very function the server answers
// with (and idparts.Parts.Answer turns the result into the same object).

// DecodeSnowflake decodes id, a decimal int64, with layout l, reporting the
// layout as name: NodeField(l) goes to Node, every other node field to
// Extra. It is what /v1/decode?layout=NAME does for a snowflake layout.
func DecodeSnowflake(l snowflake.Layout, name, id string) (server.Decoded, error) {
	return decodeSnowflake(l, name, id)
}

// DecodeText decodes id as the idformat format named (uuid, ulid, ksuid,
// xid, objectid, flake128, timeid-…), as /v1/decode?layout=FORMAT does.
func DecodeText(format, id string) (server.Decoded, error) { return decodeText(format, id) }

// DecodeMonotonic decodes a timestamp-form monotonic ID (its logical
// counter is the Sequence), as /v1/decode?layout=monotonic does.
func DecodeMonotonic(id string) (server.Decoded, error) { return decodeMonotonic(id) }

// NodeField names the node field of l that a decoded ID's Node holds (the
// one a worker lease fills): "worker" when l has one, else its only node
// field, else "" (every node field is then in Extra).
func NodeField(l snowflake.Layout) string { return workerField(l) }
