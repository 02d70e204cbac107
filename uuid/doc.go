// Package uuid issues and parses RFC 9562 UUIDs: versions 1, 4, 6 and 7,
// plus MySQL's UUID_TO_BIN(uuid, 1) swap-ordered binary form.
//
// Each version has its own generator (V1, V4, V6, V7). All take a
// clock.Clock and an io.Reader for randomness, so tests are deterministic;
// by default they read a ChaCha8 CSPRNG seeded from crypto/rand (V4 keeps
// one per P in a sync.Pool), and V7 reads the wall clock through a shared
// 1 ms cache, which is what keeps V4 and V7 under 50 ns per ID.
//
// What each generator guarantees:
//
//   - V4: 122 random bits; two IDs collide with probability 2^-122 per pair.
//   - V7: strictly increasing per generator (RFC 9562 §6.2 Method 1: a 42-bit
//     counter in rand_a and the top of rand_b, reseeded randomly each
//     millisecond with its top bit clear), 32 fresh random bits per ID. It
//     never stamps a millisecond the clock has not reached because of load;
//     after the wall clock steps back it keeps the last millisecond (the
//     lead is reported by Ahead).
//   - V1, V6: unique per generator: the 100-ns timestamp never repeats with
//     the same clock sequence; it may lead the clock by at most MaxAhead
//     under load, and a larger step back bumps the clock sequence (RFC 9562
//     §5.1, §6.3). The node is random with the multicast bit set (§6.10)
//     unless you pass one, so no MAC address leaks.
//
// The UUID type is a [16]byte that converts directly to and from
// github.com/google/uuid's UUID.
package uuid
