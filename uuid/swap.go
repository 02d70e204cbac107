package uuid

// ToSwapped returns MySQL's UUID_TO_BIN(u, 1): the binary UUID with the
// time-low and time-high groups (the first and third groups of the text
// form) exchanged, so the slowly changing part of a v1 timestamp comes first
// and rows insert at the right edge of an InnoDB index. For example
// 6ccd780c-baba-1026-9564-5b8c656024db becomes
// 1026baba6ccd780c95645b8c656024db (MySQL 8.0 Reference Manual,
// "Miscellaneous Functions", UUID_TO_BIN). MySQL applies the swap to any
// UUID; it is only useful for v1, whose time-low changes fastest.
//
// The result is a 16-byte value, not a UUID: store it in BINARY(16) and
// turn it back with FromSwapped.
func ToSwapped(u UUID) [16]byte {
	var b [16]byte
	copy(b[0:2], u[6:8])   // time_hi_and_version
	copy(b[2:4], u[4:6])   // time_mid
	copy(b[4:8], u[0:4])   // time_low
	copy(b[8:16], u[8:16]) // clock sequence and node
	return b
}

// FromSwapped is MySQL's BIN_TO_UUID(b, 1), the inverse of ToSwapped.
func FromSwapped(b [16]byte) UUID {
	var u UUID
	copy(u[0:4], b[4:8])
	copy(u[4:6], b[2:4])
	copy(u[6:8], b[0:2])
	copy(u[8:16], b[8:16])
	return u
}
