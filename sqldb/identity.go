package sqldb

import (
	"context"
	"database/sql"
	"fmt"
)

// Queryer is what Identity needs of a database or one connection of it.
type Queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Identity names the database server behind a connection, so that a
// failover or a restore shows as a change: for PostgreSQL the cluster's
// system identifier and the timeline of its current WAL (a promoted
// replica keeps the system identifier but starts a new timeline; a
// restore with recovery does too); for MySQL @@server_uuid, for MariaDB
// (which has none) @@server_id with @@hostname and @@port, since a
// replica needs a server_id of its own; for SQLite "" (one file). A part
// the server refuses to tell (a missing privilege) is left out rather than
// failing: the identity is a hint that makes callers check harder, never
// the only protection.
func Identity(ctx context.Context, d Dialect, q Queryer) (string, error) {
	switch d {
	case Postgres:
		var wal string
		if err := q.QueryRowContext(ctx, "SELECT pg_walfile_name(pg_current_wal_lsn())").Scan(&wal); err != nil {
			return "", fmt.Errorf("sqldb: identity: %w", err)
		}
		id := "timeline=" + wal[:min(8, len(wal))]
		var sys string
		if err := q.QueryRowContext(ctx, "SELECT system_identifier::text FROM pg_control_system()").Scan(&sys); err == nil {
			id = "system=" + sys + " " + id
		}
		return id, nil
	case MySQL:
		var uuid string
		if err := q.QueryRowContext(ctx, "SELECT @@server_uuid").Scan(&uuid); err == nil && uuid != "" {
			return "server_uuid=" + uuid, nil
		}
		var sid, port int64
		var host string
		if err := q.QueryRowContext(ctx, "SELECT @@server_id, @@hostname, @@port").Scan(&sid, &host, &port); err != nil {
			return "", fmt.Errorf("sqldb: identity: %w", err)
		}
		return fmt.Sprintf("server_id=%d host=%s:%d", sid, host, port), nil
	}
	return "", nil
}
