package segment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits on keys and steps, shared by every store.
const (
	// MaxKeyLen is the longest key in bytes: Leaf's biz_tag is varchar(128).
	MaxKeyLen = 128
	// MaxStep is the largest step a key may be configured with or an
	// allocation may ask for: Leaf's step column is int(11), a 32-bit int.
	MaxStep = math.MaxInt32
	// DefaultMaxID is the max_id of a key created without one: Leaf's
	// column default, so a new key's first ID is 1.
	DefaultMaxID = 1
)

// Errors. Stores and the Allocator wrap them with the key and value at
// fault; test with errors.Is.
var (
	// ErrUnknownKey: the store has no row for the key.
	ErrUnknownKey = errors.New("segment: unknown key")
	// ErrKeyExists: Create found a row for the key already.
	ErrKeyExists = errors.New("segment: key exists")
	// ErrBadKey: a key is empty, longer than MaxKeyLen bytes, not UTF-8 or
	// holds control characters.
	ErrBadKey = errors.New("segment: bad key")
	// ErrBadStep: a step is not in [1, MaxStep].
	ErrBadStep = errors.New("segment: bad step")
	// ErrBadMaxID: a max_id given to Create is negative.
	ErrBadMaxID = errors.New("segment: bad max_id")
	// ErrOverflow: max_id + step would pass 2^63-1; the key's number line
	// is used up. Nothing changed.
	ErrOverflow = errors.New("segment: max_id would overflow int64")
	// ErrUnavailable: the key's buffers are used up and the store cannot
	// give another segment now. The error also wraps the cause: the
	// store's error, or the caller's context error when its deadline came
	// first.
	ErrUnavailable = errors.New("segment: no IDs available")
	// ErrWentBack: the store kept returning segments below the witness's
	// mark (or below one this Allocator already leased) although it was
	// raised above it each time. A store that went back once (a failover,
	// a restored backup, a hand edit, a Redis crash without appendfsync
	// always) is repaired at once and does not show this error.
	ErrWentBack = errors.New("segment: store max_id went back")
	// ErrClosed: the Allocator was closed.
	ErrClosed = errors.New("segment: allocator closed")
	// ErrBadCount: a Range or NextN asked for no IDs.
	ErrBadCount = errors.New("segment: bad count")
	// ErrBadOptions: Options failed validation.
	ErrBadOptions = errors.New("segment: bad options")
)

// Segment is one allocation: the numbers [Start, End) now belong to the
// caller alone. Step is the key's configured step at the time of the
// allocation (the row's step column), which may differ from End-Start when
// the caller asked for another size.
type Segment struct {
	Start, End int64
	Step       int64
}

// KeyInfo is one row of the store.
type KeyInfo struct {
	// Key is the key's name (Leaf's biz_tag).
	Key string
	// MaxID is the end of the last segment leased: every ID issued so far
	// is below it, and the next segment starts at it.
	MaxID int64
	// Step is the configured lease size.
	Step int64
	// Description is free text for operators.
	Description string
	// UpdateTime is when the row last changed (zero if the store does not
	// know).
	UpdateTime time.Time
}

// Witness keeps high-water marks outside the store; package witness
// implements it (File, Etcd, ZooKeeper, SQL, Multi).
type Witness interface {
	// Mark returns the space's mark, 0 when it has none.
	Mark(ctx context.Context, space string) (int64, error)
	// Claim raises the space's mark to `to` if it is at most `from`, and
	// returns (to, true) once that is durable; otherwise it changes
	// nothing and returns the mark, which is above from, and false.
	Claim(ctx context.Context, space string, from, to int64) (mark int64, ok bool, err error)
}

// Identifier is implemented by stores that can name the server behind
// them (sqlstore: system identifier and timeline, server_uuid; redisstore:
// run_id). The Allocator logs a change of identity: a failover or a
// restore happened, and the witness is what keeps the IDs unique.
type Identifier interface {
	Identity(ctx context.Context) (string, error)
}

// WitnessSpace names a key's space in a witness: "segment/KEY", with
// "/DELTA:REMAINDER" appended when Options.Delta is above 1 (Tinyid's
// split of one number line across stores, each a space of its own).
func WitnessSpace(key string, delta, remainder int64) string {
	if delta > 1 {
		return fmt.Sprintf("segment/%s/%d:%d", key, delta, remainder)
	}
	return "segment/" + key
}

// Store leases segments. Implementations must be safe for concurrent use
// by many processes: every Allocate is one atomic operation (one
// transaction or one command) that moves max_id up, and max_id never
// moves down (U5).
type Store interface {
	// Allocate moves key's max_id up by step (by the row's own step when
	// step is 0) and returns the range between the old and new max_id.
	// Errors: ErrUnknownKey, ErrOverflow (nothing changed), ErrBadKey,
	// ErrBadStep, or the store's own error.
	Allocate(ctx context.Context, key string, step int64) (Segment, error)
	// Create adds a key. MaxID 0 means DefaultMaxID. Errors: ErrKeyExists,
	// ErrBadKey, ErrBadStep, ErrBadMaxID.
	Create(ctx context.Context, k KeyInfo) error
	// Get describes one key. Errors: ErrUnknownKey, ErrBadKey.
	Get(ctx context.Context, key string) (KeyInfo, error)
	// List describes every key, ordered by name.
	List(ctx context.Context) ([]KeyInfo, error)
	// SetStep changes a key's configured step. Errors: ErrUnknownKey,
	// ErrBadKey, ErrBadStep.
	SetStep(ctx context.Context, key string, step int64) error
	// Delete removes a key. Re-creating it later with a MaxID below the
	// deleted row's max_id would reissue numbers: do not. Errors:
	// ErrUnknownKey, ErrBadKey.
	Delete(ctx context.Context, key string) error
	// Raise moves key's max_id up to atLeast if it is below, in one atomic
	// operation, and returns max_id as it was before. It repairs a store
	// that went back (a failover to a lagging replica, a restored backup):
	// the Allocator calls it with the mark its witness holds. It never
	// lowers max_id. Errors: ErrUnknownKey, ErrBadKey, ErrBadMaxID (a
	// negative atLeast), or the store's own error.
	Raise(ctx context.Context, key string, atLeast int64) (before int64, err error)
	// Close releases the store's connections.
	Close() error
}

// ValidateKey returns nil if key is usable: 1 to MaxKeyLen bytes of UTF-8
// without control characters. Otherwise the error wraps ErrBadKey.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: key is empty", ErrBadKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: key %q... is %d bytes, longer than %d", ErrBadKey, key[:16], len(key), MaxKeyLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: key %q is not valid UTF-8", ErrBadKey, key)
	}
	for _, r := range key {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: key %q holds control character %U", ErrBadKey, key, r)
		}
	}
	return nil
}

// ValidateStep returns nil if step is in [1, MaxStep]; otherwise an error
// wrapping ErrBadStep that names the value.
func ValidateStep(step int64) error {
	if step < 1 || step > MaxStep {
		return fmt.Errorf("%w: step %d is not in [1, %d]", ErrBadStep, step, MaxStep)
	}
	return nil
}

// ValidateAllocate checks the arguments of Store.Allocate: a valid key and
// a step of 0 (the row's step) or in [1, MaxStep].
func ValidateAllocate(key string, step int64) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if step != 0 {
		return ValidateStep(step)
	}
	return nil
}

// ValidateKeyInfo checks a KeyInfo for Store.Create and returns it with
// defaults applied (MaxID 0 becomes DefaultMaxID).
func ValidateKeyInfo(k KeyInfo) (KeyInfo, error) {
	if err := ValidateKey(k.Key); err != nil {
		return k, err
	}
	if err := ValidateStep(k.Step); err != nil {
		return k, fmt.Errorf("key %q: %w", k.Key, err)
	}
	if k.MaxID < 0 {
		return k, fmt.Errorf("%w: key %q: max_id %d is negative", ErrBadMaxID, k.Key, k.MaxID)
	}
	if k.MaxID == 0 {
		k.MaxID = DefaultMaxID
	}
	if len(k.Description) > 256 {
		return k, fmt.Errorf("%w: key %q: description is %d bytes, longer than 256", ErrBadKey, k.Key, len(k.Description))
	}
	return k, nil
}

// ValidateKeyInfos checks every KeyInfo as ValidateKeyInfo does, for a
// batch (BatchCreator.CreateMissing, Allocator.EnsureKeys), and returns
// them with defaults applied; the first bad one refuses the batch.
func ValidateKeyInfos(keys []KeyInfo) ([]KeyInfo, error) {
	valid := make([]KeyInfo, len(keys))
	for i, k := range keys {
		var err error
		if valid[i], err = ValidateKeyInfo(k); err != nil {
			return nil, err
		}
	}
	return valid, nil
}

// CanAdvance reports whether max_id can move up by step without passing
// 2^63-1; stores use it to return ErrOverflow before changing anything.
func CanAdvance(maxID, step int64) bool { return step >= 0 && maxID <= math.MaxInt64-step }

// OverflowError returns the ErrOverflow error stores report for key.
func OverflowError(key string, maxID, step int64) error {
	return fmt.Errorf("%w: key %q: max_id %d + step %d > %d", ErrOverflow, key, maxID, step, int64(math.MaxInt64))
}

// BatchCreator is a Store that can add many keys at once, skipping those
// that exist (their rows are left as they are). Allocator.EnsureKeys uses
// it: a server starting with 10,000 keys on a fresh SQLite store spent
// 9 s in one committed INSERT per key.
type BatchCreator interface {
	CreateMissing(ctx context.Context, keys []KeyInfo) error
}

// AllocateRequest is one key's part of a batch: Store.Allocate's
// arguments.
type AllocateRequest struct {
	Key string
	// Step as in Store.Allocate: 0 is the row's own step.
	Step int64
}

// Allocation answers one AllocateRequest: the segment, or the error of
// that key alone (ErrUnknownKey, ErrOverflow, ErrBadKey, ErrBadStep, or
// the store's error for it), in which case its max_id did not move.
type Allocation struct {
	Segment
	Err error
}

// BatchAllocator is a Store that leases segments of many keys in one
// round trip (one statement, one transaction or one pipeline). The
// Allocator gathers the loads that wait at the same time (the first
// requests of thousands of keys after a start, and their later
// preloads) into one AllocateMany, so a store with a commit per call
// costs one commit for all of them.
//
// AllocateMany returns one Allocation per request, in order. Each
// allocation is atomic on its own, exactly as Store.Allocate, and the
// segments are disjoint from every segment any other call returns. A
// key may appear once per call; a second time fails the whole call
// (ErrBadKey) before anything changes. An error (the store failing, ctx
// ending) means the outcome is unknown: any of the keys may have moved
// (gaps, never repeats).
type BatchAllocator interface {
	AllocateMany(ctx context.Context, reqs []AllocateRequest) ([]Allocation, error)
}

// CheckBatch validates the requests of an AllocateMany: it returns one
// Allocation per request with Err set for those whose key or step is bad
// (the store skips them), and an error wrapping ErrBadKey when a key
// appears twice.
func CheckBatch(reqs []AllocateRequest) ([]Allocation, error) {
	out := make([]Allocation, len(reqs))
	at := make(map[string]int, len(reqs))
	for i, r := range reqs {
		if j, ok := at[r.Key]; ok {
			return nil, fmt.Errorf("%w: key %q is asked for twice in one batch (requests %d and %d)", ErrBadKey, r.Key, j, i)
		}
		at[r.Key] = i
		out[i].Err = ValidateAllocate(r.Key, r.Step)
	}
	return out, nil
}
