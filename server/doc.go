// Package server serves idmint's ID strategies over HTTP and gRPC: the
// native ID routes under `/v1`, the listeners (the gRPC one with its
// connection limits), and the operational endpoints (`/healthz`,
// `/readyz`, `/metrics`, pprof on the admin listener only). It holds the
// key table and its lifecycle (CreateKey, DeleteKey, SetStep). Surfaces
// sit beside it in packages that consume its Surface API (surface.go) and
// are added through Options.Surfaces: Leaf's API (server/leaf), the gRPC
// service (server/grpcapi), key administration (server/admin) and the
// dashboard (server/dashboard).
//
// The package knows no strategy. Each key's issuer is built by a factory
// looked up by strategy name in a Registry, and handlers only consume the
// small capability interfaces declared in issuer.go (Int64s, Strings,
// Ranger, Decoder, Stepper, Monitor, Readier, StatsReporter). A strategy
// that lands later plugs in by registering a Strategy; no handler changes.
//
// Guarantees:
//   - Every malformed request gets a 4xx JSON body
//     {"error":{"code":...,"message":...,"field":...}} naming the field and
//     the value, and changes no state (design.md U7). A surface may answer
//     in its own format instead (Leaf's: a bare ID as text, HTTP 500 on
//     failure, as Leaf's controller does).
//   - Tokens are compared in constant time (on their SHA-256) and never
//     logged.
//   - IDs in JSON are strings, never numbers (JavaScript loses precision
//     above 2^53).
//   - Shutdown stops accepting, finishes in-flight requests, then closes
//     issuers and shared resources (leases record their horizon on Close).
package server
