// Package rediscounter issues IDs with Redis INCR — one INCR (INCRBY for a
// batch) per request, strictly increasing per key — and closes the hole
// that makes plain INCR unsafe: with RDB snapshots (or AOF fsync everysec,
// or a failover to a lagging replica) a crash rolls the counter back and
// Redis hands out the same IDs again.
//
// # The protocol
//
// A durable high-water mark M per key lives in a SQL table
// (idmint_redis_marks, through sqldb: SQLite, PostgreSQL or MySQL). Its one
// invariant is:
//
//	every value ever returned for the key is <= M, and M never decreases.
//
// Three rules keep it:
//
//  1. Ceiling before use. The increment runs in a Lua script that is given
//     the ceiling C, a value of M this process has seen committed, and
//     refuses (without incrementing) when the counter would pass it. So a
//     value is <= a persisted M before it even exists. The process raises
//     M in blocks (Config.Block) with a GREATEST/max upsert, in the
//     background when fewer than half a block remain, so the SQL store is
//     off the hot path.
//  2. Recover before first use of a Redis run. Each Redis process start has
//     a fresh run_id (INFO server), and no TCP connection survives a
//     restart. Every new connection, before the client may use it, reads
//     run_id; on a run this process has not recovered yet it reads M
//     fresh from SQL and runs a script setting the counter to max(counter,
//     M). A fresh process therefore recovers on its first connection too.
//  3. Detect loss within a run. The increment script is also given a floor:
//     the largest value this process has seen on the key. A counter below
//     it means the key was deleted, flushed or overwritten without a
//     restart; the script refuses, and the process recovers as in rule 2.
//
// Why no value repeats. Every value returned before a rollback was <= M at
// the moment it was produced (rule 1), and that was before the rolled-back
// Redis run ended. Any process that uses the new run first sets the
// counter to at least M as read after the new run began (rule 2) — which
// is at least every value returned before. Recovery never lowers the
// counter (max), so within one run the values stay INCR-distinct however
// many processes recover. A lost reply or a retried script leaves a gap,
// never a repeat.
//
// What it costs: after a rollback the counter jumps past M, so up to one
// block per process is skipped (gaps). Every process sharing the key must
// use this package (a plain INCR client bypasses the ceiling). Values stay
// below 2^53 (Lua numbers are doubles): ErrExhausted past that.
//
// What it cannot fix: split brain — two Redis masters accepting writes at
// once (a partitioned old master still serving after a replica was
// promoted). Values above the M read by the new master's first user can
// then come from both. Fence the old master (min-replicas-to-write,
// Sentinel) or use the segment strategy. Redis Cluster is not supported;
// one key lives on one server anyway.
package rediscounter
