// Package ticket issues IDs the way Flickr's ticket servers do: one database
// round trip per ID, from N databases whose counters step by N from
// distinct offsets, used round-robin.
//
// On MySQL/MariaDB each server holds the table of Flickr's post "Ticket
// Servers: Distributed Unique Primary Keys on the Cheap" (code.flickr.net,
// 2010-02-08):
//
//	CREATE TABLE Tickets64 (
//	  id   BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
//	  stub CHAR(1) NOT NULL DEFAULT '',
//	  PRIMARY KEY (id),
//	  UNIQUE KEY stub (stub)
//	) ENGINE=InnoDB
//
// and an ID is "REPLACE INTO Tickets64 (stub) VALUES ('a')" followed by
// LAST_INSERT_ID() of the same connection. REPLACE deletes the one row and
// inserts it again with the next auto-increment value, so the table never
// grows. (Flickr used MyISAM; InnoDB is crash-safe and, since MariaDB
// 10.2.4 / MySQL 8.0, persists the counter; the single row holds the
// largest ID either way, so even older servers restart past it.)
//
// On PostgreSQL each server holds a sequence, CREATE SEQUENCE ... INCREMENT
// BY N START WITH k, and an ID is nextval().
//
// N servers: server k (offset k, 1 <= k <= N) issues k, k+N, k+2N, ...
// idmint sets auto_increment_increment = N and auto_increment_offset = k on
// every connection it pins (SET SESSION), instead of trusting the server's
// my.cnf, and reads them back; it checks on PostgreSQL that an existing
// sequence has the configured INCREMENT BY and START WITH. Whatever the
// configuration, every ID is checked to lie in its server's residue class
// (id mod N = k mod N) and above the last ID that server gave this
// process, before it is returned: an ID that fails is an error, never an
// ID. Residue classes are disjoint, so the servers never collide, and a
// server never repeats itself while its counter only grows — which needs a
// durable commit: idmint refuses a MySQL server with
// innodb_flush_log_at_trx_commit other than 1 and a PostgreSQL server with
// fsync off, and sets synchronous_commit = on for its sessions. Plain
// auto-increment is N = 1.
//
// What ordering is lost: each server's IDs increase, but the servers
// advance independently. IDs from different servers interleave in no
// particular order; a server that was down or slower hands out IDs below
// ones its peers issued long ago, so IDs are unique but neither monotonic
// nor even time-ordered across servers. Callers that need order should use
// one server (N = 1) or the snowflake or segment strategies.
//
// Availability: a server that fails a request is skipped for a back-off
// that doubles with each consecutive failure (Config.BackoffMin to
// BackoffMax, on the injected clock), and tried again after it; when every
// server is backing off, each is tried anyway before Next gives up with
// ErrUnavailable. A request stuck on a hung server gives up after
// Config.AttemptTimeout and moves on.
package ticket
