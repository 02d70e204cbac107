// Package api holds idmint's API contracts: the OpenAPI 3.1 document of
// the HTTP API (OpenAPI, served by every node at /openapi.yaml) and, in
// idmintv1, the gRPC service.
package api

import _ "embed"

// OpenAPI is the OpenAPI 3.1 document (YAML) describing every HTTP route
// an idmint node serves, its parameters, answers and errors.
//
//go:embed openapi.yaml
var OpenAPI []byte
