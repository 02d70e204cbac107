package server

import (
	"context"
	"time"
)

// Issuer is what a Strategy's factory builds for one key. Close releases
// what the issuer holds; the server calls it once, after the last request
// that could use it has finished. An Issuer must implement at least one of
// Int64s or Strings to be useful; every other capability is optional and
// discovered with a type assertion, like http.Flusher.
type Issuer interface {
	Close(ctx context.Context) error
}

// Int64s is an issuer of numeric IDs. NextInt64s fills every element of dst
// with an ID unique within the key, or returns an error and no IDs. It must
// be safe for concurrent use.
type Int64s interface {
	NextInt64s(ctx context.Context, dst []int64) error
}

// Strings is an issuer of textual IDs (UUID family, order numbers).
// NextStrings fills every element of dst, or returns an error. It must be
// safe for concurrent use.
type Strings interface {
	NextStrings(ctx context.Context, dst []string) error
}

// Ranger is an issuer that hands out a contiguous block of numeric IDs
// [first, first+count) in one call (segment keys). count is between 1 and n:
// a block may be cut short where the issuer's current segment ends, and the
// caller asks again for the rest. The whole block belongs to the caller; no
// other caller ever receives a number in it.
type Ranger interface {
	NextRange(ctx context.Context, n int64) (first, count int64, err error)
}

// Decoded is an ID taken apart. Zero fields were not present in the ID.
type Decoded struct {
	// Layout names the layout the ID was read with.
	Layout string
	// Time is the moment stamped in the ID, if any.
	Time time.Time
	// Node is the worker, machine or node field, if any.
	Node int64
	// Sequence is the sequence field, if any.
	Sequence int64
	// Extra holds layout-specific fields (UUID version, random part...).
	Extra map[string]string
}

// Decoder takes apart an ID of its issuer's format. It returns an error
// naming the value when id is not one of its IDs' textual form.
type Decoder interface {
	Decode(id string) (Decoded, error)
}

// Stepper is an issuer whose block size can be changed at run time
// (segment keys). SetStep takes effect at the next store round trip.
type Stepper interface {
	Step() int64
	SetStep(ctx context.Context, step int64) error
}

// CacheView is one key's in-memory state in the shape of Leaf's
// SegmentBufferView (the /cache page): both buffers' current value, step and
// max, the buffer in use, whether the next one is loaded, and whether the
// key has been initialised.
type CacheView struct {
	Key       string `json:"key"`
	Value0    int64  `json:"value0"`
	Step0     int64  `json:"step0"`
	Max0      int64  `json:"max0"`
	Value1    int64  `json:"value1"`
	Step1     int64  `json:"step1"`
	Max1      int64  `json:"max1"`
	Pos       int    `json:"pos"`
	NextReady bool   `json:"nextReady"`
	InitOk    bool   `json:"initOk"`
}

// StoreRow is one key's row in its store, in the shape of Leaf's LeafAlloc
// (the /db page).
type StoreRow struct {
	Key         string    `json:"key"`
	MaxID       int64     `json:"maxId"`
	Step        int64     `json:"step"`
	UpdateTime  time.Time `json:"updateTime"`
	Description string    `json:"description,omitempty"`
}

// Monitor is an issuer with buffers worth showing on /cache and a store row
// worth showing on /db.
type Monitor interface {
	CacheView() CacheView
	StoreRow(ctx context.Context) (StoreRow, error)
}

// VolumeHider is an issuer whose IDs exist to hide how many were issued
// (order numbers). The server then keeps its count out of /metrics, which
// anyone who can reach the listener may read: idmint_ids_issued_total would
// otherwise publish the order volume the format hides.
type VolumeHider interface {
	HidesVolume() bool
}

// Readier is an issuer or shared resource that can say whether it can serve
// now (lease held, store reachable). /readyz fails while any returns an
// error.
type Readier interface {
	Ready(ctx context.Context) error
}

// Stat is one gauge or counter an issuer or resource exposes on /metrics as
// idmint_<Name>{key,strategy} (resources: {resource}).
type Stat struct {
	Name    string // snake_case, without the idmint_ prefix
	Help    string
	Value   float64
	Counter bool // a monotonically increasing count, not a gauge
	// Volume marks a figure from which a client could work out how many
	// IDs a key that hides its volume (order numbers) has issued, such as
	// the share of its capacity used: /metrics leaves it out when the
	// public listener serves /metrics (Config.MetricsPublic).
	Volume bool
}

// StatsReporter is an issuer or shared resource with figures for /metrics:
// segment remaining and step, clock-rollback events, lease state, horizon
// distance. Stats is called on every scrape and must be cheap.
type StatsReporter interface {
	Stats() []Stat
}

// RetryAfter is implemented by errors after which a client should retry
// later (clock rollback, lease being renewed, store failover). The server
// answers 503 with a Retry-After header of at least one second.
type RetryAfter interface {
	RetryAfter() time.Duration
}

// InputError marks an issuer error caused by the request (for example a
// count a strategy cannot serve in one call). The server answers 400 naming
// Field instead of 503.
type InputError struct {
	Field string
	Err   error
}

// Error returns the wrapped error's message.
func (e *InputError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *InputError) Unwrap() error { return e.Err }

// LeafTableOption, set to "true" in the KeyConfig a server passes to the
// "segment" strategy's New, asks for the store's whole table as a
// LeafTable instead of one key's issuer. A key written in a config or
// created through the API cannot set it (the strategy's Check refuses
// unknown options).
const LeafTableOption = "leaf_table"

// LeafTable is a segment store's table served by tag, as Leaf's
// SegmentIDGenImpl serves every biz_tag of leaf_alloc.
type LeafTable interface {
	Issuer
	// Rows lists every row of the table, ordered by key.
	Rows(ctx context.Context) ([]StoreRow, error)
	// Open returns the issuer of the row called tag (an Int64s and a
	// Monitor). It does no I/O and never creates a row: a row that does
	// not exist shows as an error on first use.
	Open(tag string) (Issuer, error)
}
