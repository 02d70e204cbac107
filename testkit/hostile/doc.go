// Package hostile attacks a real `idmint serve` process as a hostile
// client would, and measures what the attack costs it: resident memory
// read from /proc, and whether a well-behaved client is still answered.
// It has tests only.
package hostile
