// Package strategies plugs idmint's ID strategies into a server.Registry:
// each one adapts a strategy package (snowflake via node, the UUID family,
// ObjectID, xid, segment, ...) to the server's capability interfaces. The
// server package itself knows none of them; cmd/idmint calls Register.
//
// Key options per strategy are documented on each Strategy's Summary and
// validated by its Check, so `idmint serve --check` names every bad field.
package strategies
