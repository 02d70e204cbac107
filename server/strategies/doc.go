// Package strategies plugs idmint's ID strategies into a server.Registry:
// each one adapts a strategy package (snowflake via node, segment, ticket,
// rediscounter, ordernum, the UUID family, ObjectID, xid, ...) to the
// server's capability interfaces. The server package itself knows none of
// them; cmd/idmint calls Register.
//
// Key options per strategy are documented on each Strategy's Summary and
// validated by its Check, so `idmint serve --check` names every bad field.
// Options that point at a server (ticket servers, a redis endpoint) take a
// name from the config's stores: section or a URL; secrets (order-number
// keys) come from a file or an environment variable named in the options,
// never printed in a problem or a log.
package strategies
