package ordernum

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error this package returns for bad configuration or
// bad input is a *FieldError wrapping one of these, so callers can test the
// kind with errors.Is and read the field and value with errors.As.
var (
	// ErrConfig means a format Config or spec is invalid (unknown alphabet,
	// check or date layout, a prefix outside the alphabet, a length whose
	// domain is below FF1's minimum or above 64 bits, ...).
	ErrConfig = errors.New("ordernum: invalid format")
	// ErrKey means key material is unusable: not 16, 24 or 32 bytes, not
	// hex or base64, a version the format cannot carry, or a duplicate
	// version.
	ErrKey = errors.New("ordernum: invalid key")
	// ErrLength means an order number has the wrong number of characters
	// (after removing hyphens and spaces).
	ErrLength = errors.New("ordernum: wrong length")
	// ErrCharacter means an order number contains a character outside its
	// alphabet at some position.
	ErrCharacter = errors.New("ordernum: invalid character")
	// ErrCheck means an order number's check character does not match: it
	// was mistyped or is not one of ours.
	ErrCheck = errors.New("ordernum: check character mismatch")
	// ErrPrefix means an order number does not start with the format's
	// prefix.
	ErrPrefix = errors.New("ordernum: wrong prefix")
	// ErrDate means a date is outside the date layout's range, or an order
	// number's date part is not a calendar date.
	ErrDate = errors.New("ordernum: invalid date")
	// ErrVersion means an order number names a key version the Codec has
	// no key for.
	ErrVersion = errors.New("ordernum: unknown key version")
	// ErrCapacity means a sequence number is at or beyond the format's
	// capacity. Order numbers never wrap around: issuing stops instead.
	ErrCapacity = errors.New("ordernum: sequence beyond capacity")
	// ErrRange means an opaque ID is outside the Opaque's domain.
	ErrRange = errors.New("ordernum: id out of range")
)

// FieldError reports which field (or input) was wrong, its value and why.
// Field names match Config's spec keys ("alphabet", "length", "prefix",
// "date", "version", "check") for configuration errors, and are
// "number", "seq", "date", "key" or "id" for runtime input. Value never
// contains key material.
type FieldError struct {
	Field  string
	Value  string
	Reason string
	Err    error // one of the package's sentinel errors
}

// Error returns "ordernum: <field> <value>: <reason>".
func (e *FieldError) Error() string {
	return fmt.Sprintf("ordernum: %s %q: %s", e.Field, e.Value, e.Reason)
}

// Unwrap returns the sentinel error.
func (e *FieldError) Unwrap() error { return e.Err }

func fieldErr(sentinel error, field, value, format string, args ...any) error {
	return &FieldError{Field: field, Value: value, Reason: fmt.Sprintf(format, args...), Err: sentinel}
}

// clip shortens untrusted input quoted in an error.
func clip(s string) string {
	const max = 64
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
