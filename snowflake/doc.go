// Package snowflake issues 64-bit, time-ordered IDs in any Snowflake-style bit
// layout: Twitter, Meituan Leaf, Sonyflake, Instagram, Baidu uid-generator,
// Discord, Simpleflake, the seed survey's CustomUUID, or a custom layout parsed
// from a one-line spec.
//
// An ID is a non-negative int64 whose top field is time; the fields below it
// are node fields (datacenter, worker, shard, ...) and a sequence, in the order
// the Layout lists them. Twitter's layout, for example:
//
//	 0 |      41 bits: ms since 2010-11-04T01:42:54.657Z       | 5 dc | 5 worker | 12 seq
//	+--+---------------------------------------------------------+------+----------+--------+
//	63 62                                                      22 21  17 16      12 11     0
//
// A Layout is a validated value (NewLayout, ParseLayout, Lookup); Decode and
// Compose convert between IDs and typed Parts without any clock. A Generator
// (New) issues IDs for one node of a layout. Its guarantees:
//
//   - Unique and strictly increasing: every ID a Generator returns is greater
//     than every ID it returned before, across goroutines (design.md U1, U2).
//   - Never stamped before the last persisted horizon: with a Horizon, no ID is
//     stamped past the recorded horizon, and a restarted generator starts
//     strictly after it whatever its clock says (U3, U6).
//   - Fenced: with a Fence, no ID is issued once the lease is not provably
//     valid on the monotonic clock (U4).
//   - Clock rollback is waited out when small, reported as *ClockBehindError
//     when large, or (by policy) bridged with a bounded logical clock (U6).
//   - No sleep and no I/O while holding a lock; the hot path is one atomic
//     compare-and-swap.
package snowflake
