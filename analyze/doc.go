// Package analyze examines a batch of IDs, as an operator would collect them
// from a table or a log, and reports what can be read off the IDs alone:
//
//   - the format (a snowflake layout, a plain integer, an order number, or
//     any text format package idformat knows) and, for decimal IDs, the
//     built-in layout that fits them best;
//   - duplicates, with examples;
//   - order: the fraction of IDs lower than the one before, and the largest
//     displacement — how far an ID sits from its place in sorted order,
//     which is the k of "k-sorted" — overall and per worker;
//   - the time span, the rate, and the peak number of IDs in one tick;
//   - id mod N balance for every N in 2…1024, the sharding skew
//     of a sequence that restarts at 0 on each tick;
//   - when the layout runs out, and how many years are left;
//   - whether consecutive values can be told apart from random ones (for
//     order numbers and opaque IDs, which must not be guessable).
//
// The package computes; it prints nothing. cmd/idmint renders a Report as
// text, JSON or HTML. Every pass is O(n log n) in the number of IDs: sorting
// gives duplicates, displacements and ranks at once. Memory is bounded per
// ID, with no map of IDs: 8 bytes per snowflake or integer ID and a 4-byte
// position during the analysis.
package analyze
