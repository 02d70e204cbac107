package uuid

import "encoding/binary"

// FromV1 builds a version 1 UUID from its fields (RFC 9562 §5.1): a 60-bit
// count of 100-ns intervals since 1582-10-15, a 14-bit clock sequence and a
// 48-bit node. Bits beyond each field's width are dropped. It is the pure
// core of V1.Next and reads no clock.
func FromV1(ticks uint64, seq uint16, node [6]byte) UUID {
	var u UUID
	binary.BigEndian.PutUint32(u[0:4], uint32(ticks))
	binary.BigEndian.PutUint16(u[4:6], uint16(ticks>>32))
	binary.BigEndian.PutUint16(u[6:8], uint16(ticks>>48)&0x0fff|0x1000)
	binary.BigEndian.PutUint16(u[8:10], seq&0x3fff|0x8000)
	copy(u[10:], node[:])
	return u
}

// FromV6 builds a version 6 UUID from the same fields as FromV1, timestamp
// most significant first (RFC 9562 §5.6).
func FromV6(ticks uint64, seq uint16, node [6]byte) UUID {
	var u UUID
	ticks &= 1<<60 - 1
	binary.BigEndian.PutUint64(u[0:8], (ticks>>12)<<16|0x6000|ticks&0x0fff)
	binary.BigEndian.PutUint16(u[8:10], seq&0x3fff|0x8000)
	copy(u[10:], node[:])
	return u
}

// FromV7 builds a version 7 UUID from its fields (RFC 9562 §5.7): a 48-bit
// Unix millisecond timestamp, the 12-bit rand_a and the 62-bit rand_b. Bits
// beyond each field's width are dropped.
func FromV7(ms int64, randA uint16, randB uint64) UUID {
	var u UUID
	binary.BigEndian.PutUint64(u[0:8], uint64(ms)<<16|0x7000|uint64(randA&0x0fff))
	binary.BigEndian.PutUint64(u[8:16], 0x8000_0000_0000_0000|randB&(1<<62-1))
	return u
}

// Ticks returns the 60-bit timestamp of a v1 or v6 UUID in 100-ns
// intervals since 1582-10-15, and false for other versions.
func (u UUID) Ticks() (uint64, bool) {
	if v := u.Version(); u.Variant() != VariantRFC9562 || (v != 1 && v != 6) {
		return 0, false
	}
	return u.ticks(), true
}
