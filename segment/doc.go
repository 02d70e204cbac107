// Package segment issues IDs from number ranges ("segments") leased from a
// store, the way Meituan Leaf's segment mode and Didi Tinyid do, and serves
// them from memory.
//
// Each key (Leaf's biz_tag) is one row in the store: max_id is the highest
// number ever leased, step the configured lease size. An allocation moves
// max_id up by step in one atomic store operation and hands the caller the
// range [old max_id, new max_id). The Allocator keeps two buffers per key:
// it serves the current segment from memory with one atomic compare-and-swap
// per ID and, when a configurable share of it is used (Leaf: 10 %, Tinyid:
// 20 %), loads the next segment in the background, so no caller waits on
// the store while the store is healthy.
//
//	Allocator ── Key("order") ── current buffer [1000, 2000)  ← Next
//	                          └─ next buffer    [5000, 7000)  ← loaded at 10 %
//	Store  leaf_alloc: biz_tag=order max_id=7000 step=1000
//
// Guarantees: IDs of one key are never repeated, by one Allocator or by
// many sharing a store, across restarts and crashes — the store's max_id
// only grows, and numbers leased but not issued become gaps (design U1, U5).
// One Allocator returns strictly increasing IDs per key to each caller
// (U2). When the store fails, buffered IDs keep flowing; once they are gone
// calls fail at once with ErrUnavailable while loading retries with backoff
// and recovers by itself.
//
// Loads of different keys that wait at the same time go to the store
// together when it is a BatchAllocator (every SQL store and Redis): one
// round trip and one commit for all of them, with one identity check
// (group commit). Allocator.Warm loads many keys' first segments that way
// in the background, so a server starting with thousands of keys serves
// their first requests from memory.
//
// Stores live in subpackages that import this one: sqlstore (SQLite,
// PostgreSQL, MySQL/MariaDB on Leaf's own leaf_alloc table) and redisstore.
// Package stores picks one from a URL. segmenttest holds the contract suite
// every store passes.
package segment
