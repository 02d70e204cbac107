// Package ordernum issues order numbers: fixed-length, readable,
// unguessable and never repeating. An order number is a keyed
// format-preserving permutation (FF1, NIST SP 800-38G, package ff1) of a
// unique sequence number, dressed in a Format:
//
//	prefix | version | date   | body (FF1 of seq) | check
//	88     | 3       | 250817 | 53637579          | 2      → 883250817536375792
//
// The pieces:
//
//   - Format (NewFormat from a Config, or ParseFormat from a spec such as
//     "alphabet=base32,length=13,date=yyMMdd,version") fixes the alphabet
//     (Decimal or Crockford Base32), length, prefix, date part, key-version
//     character and check character, and says its Capacity. It validates
//     and normalises order numbers without any key.
//   - Key is AES key material with a version; it never prints its bytes.
//   - Codec maps a sequence number (and day) to an order number and back,
//     with one key for issuing and older key versions for decoding.
//   - Opaque is the same idea for 64-bit IDs: a keyed permutation of
//     [0, 2^bits) that hides volume and order.
//
// What ordernum does not do: it does not keep the sequence. The caller takes
// unique sequence numbers from a segment or ticket generator (per day for a
// date format), stops on ErrCapacity, and surfaces Format.NearCapacity (80 %
// used) in metrics and logs. Loading key text from files or the environment
// is the caller's job too; ParseKey only parses it.
package ordernum
