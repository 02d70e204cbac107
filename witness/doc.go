// Package witness keeps high-water marks of ID spaces in a failure domain
// other than the store that issues the numbers, so that a store which
// forgets writes it acknowledged (a failover to a lagging asynchronous
// replica, a restored backup or snapshot, a key's state moved to another
// store) cannot make idmint issue a number twice.
//
// A Witness holds one mark per space (a segment key, a ticket key, a Redis
// counter, a monotonic key). Marks never go down. Two operations change
// them:
//
//   - Claim(space, from, to) raises the mark to `to` only if it is at most
//     `from`, in one atomic step. A segment [s, e) leased from a store is
//     served only after Claim(space, s, e) succeeds in every witness: any
//     two segments served under one witness are then disjoint, even when
//     the store handed out the same numbers twice, because the later claim
//     finds the mark at or above the earlier segment's end.
//   - Raise(space, target) makes the mark at least target. Ticket, Redis
//     and monotonic keys keep a ceiling this way: no number at or above the
//     ceiling is served before the ceiling is raised past it.
//
// Implementations: File (the node's data directory: one append-only log,
// fsync'd, flock'ed), Etcd and ZooKeeper (the cluster coordinator,
// compare-and-swap per space), SQL (a table in a database other than the
// store: PostgreSQL, MySQL/MariaDB or SQLite) and Multi (all of several:
// a claim must succeed in each, a mark is the largest of theirs).
//
// What it guarantees: a number is issued twice only if every witness of the
// space and the store lose the same acknowledged writes. A witness restored
// from an older snapshot is caught by the store and the other witnesses;
// a store that goes back is caught by the witnesses.
package witness
