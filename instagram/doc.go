// Package instagram renders and drives Instagram's in-database ID generator:
// a PL/pgSQL function next_id() that each PostgreSQL shard runs to stamp its
// own 64-bit primary keys, as described in Instagram Engineering's post
// "Sharding & IDs at Instagram" (2011,
// https://instagram-engineering.com/sharding-ids-at-instagram-1cf5a71e5a5c).
//
// An ID is, most significant bit first,
//
//	 63        23 22          10 9         0
//	+-----------+---------------+-----------+
//	| 41 bits   |    13 bits    |  10 bits  |
//	| ms since  |   shard ID    | nextval() |
//	| epoch     |               |  % 1024   |
//	+-----------+---------------+-----------+
//
// with the post's epoch 1314220021721 (2011-08-24T21:07:01.721Z) unless
// another is chosen. The three fields fill all 64 bits, so the top time bit
// is the sign bit of a PostgreSQL bigint: IDs stay positive for 2^40 ms,
// about 34.8 years from the epoch (until 2046-06-27T17:00:49.497Z for the
// default), and the post's function would go negative after that. The
// rendered function refuses (raises an exception) from then on, and before
// the epoch, rather than issue a negative ID.
//
// What the scheme guarantees, and what it does not:
//
//   - Two IDs from different shards never collide: the shard field differs.
//   - Two IDs from one shard collide only if they carry the same millisecond
//     and the same sequence residue. The sequence is shared by every caller of
//     the function, so that needs more than 1,024 next_id() calls on one shard
//     within one millisecond of the database server's clock (about 1 million
//     IDs per second per shard), or the server's clock stepping back to a
//     millisecond it already used while the residues come round again. Keep
//     the database host on a slewing (not stepping) NTP client.
//   - IDs are ordered by time across shards (k-sorted to the millisecond),
//     not strictly increasing: within one millisecond the order follows the
//     residue, which wraps from 1023 to 0.
//
// Render produces the SQL; Install runs it; Generator calls the installed
// function for callers that want IDs outside an INSERT. The layout matches
// the snowflake package's "instagram" layout, so IDs decode there.
package instagram
