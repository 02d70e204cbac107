package instagram

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Layout constants of Instagram's IDs, from "Sharding & IDs at Instagram"
// (Instagram Engineering, 2011): 41 bits of milliseconds, 13 bits of shard,
// 10 bits of sequence — 64 bits in all, so only 40 time bits stay clear of
// the sign bit (see PositiveSpan).
const (
	TimeBits  = 41
	ShardBits = 13
	SeqBits   = 10

	// ShardShift and TimeShift are the left shifts of the shard and time
	// fields: the post's "shard_id << 10" and "<< 23".
	ShardShift = SeqBits
	TimeShift  = SeqBits + ShardBits

	// PositiveSpan is how long after the epoch IDs stay positive int64s:
	// 2^40 ms, about 34.8 years.
	PositiveSpan = (1 << (TimeBits - 1)) * time.Millisecond

	// MaxShard is the largest shard ID that fits 13 bits.
	MaxShard = 1<<ShardBits - 1

	// DefaultEpochMillis is the post's custom epoch, 1314220021721 ms since
	// the Unix epoch: 2011-08-24T21:07:01.721Z.
	DefaultEpochMillis int64 = 1314220021721

	// DefaultSequence and DefaultFunction are the names the post uses.
	DefaultSequence = "table_id_seq"
	DefaultFunction = "next_id"
)

// maxEpochMillis bounds the epoch to year 9999, so the rendered SQL never
// holds a nonsense constant.
const maxEpochMillis int64 = 253402300799999

// ErrInvalid is wrapped by every *OptionError: Options that cannot be
// rendered into safe SQL.
var ErrInvalid = errors.New("instagram: invalid options")

// OptionError names the option that is wrong, its value and why.
type OptionError struct {
	Field  string
	Value  string
	Reason string
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("instagram: %s %q %s", e.Field, e.Value, e.Reason)
}

// Unwrap returns ErrInvalid, so errors.Is(err, ErrInvalid) holds.
func (e *OptionError) Unwrap() error { return ErrInvalid }

// Options describe one shard's generator. The zero values of Sequence,
// Function and Epoch select the post's names and epoch; Schema is required.
type Options struct {
	// Schema is the PostgreSQL schema the shard lives in, e.g. "shard_5".
	// It must be a plain lower-case SQL identifier: a letter or underscore,
	// then letters, digits or underscores, at most 63 bytes (PostgreSQL's
	// NAMEDATALEN-1). Upper case is refused rather than silently folded.
	Schema string
	// Shard is the logical shard ID stamped into every ID, 0..8191.
	Shard int
	// Sequence is the sequence name inside Schema; default "table_id_seq".
	Sequence string
	// Function is the function name inside Schema; default "next_id".
	Function string
	// Epoch is the custom epoch, truncated to the millisecond; the zero
	// Time selects DefaultEpochMillis. It must not precede 1970.
	Epoch time.Time
}

// withDefaults returns o with zero fields filled in, validated.
func (o Options) withDefaults() (Options, error) {
	if o.Sequence == "" {
		o.Sequence = DefaultSequence
	}
	if o.Function == "" {
		o.Function = DefaultFunction
	}
	if o.Epoch.IsZero() {
		o.Epoch = time.UnixMilli(DefaultEpochMillis).UTC()
	}
	for _, f := range []struct{ name, v string }{{"schema", o.Schema}, {"sequence", o.Sequence}, {"function", o.Function}} {
		if err := checkIdent(f.name, f.v); err != nil {
			return o, err
		}
	}
	if o.Shard < 0 || o.Shard > MaxShard {
		return o, &OptionError{Field: "shard", Value: strconv.Itoa(o.Shard), Reason: fmt.Sprintf("does not fit %d bits (0..%d)", ShardBits, MaxShard)}
	}
	if ms := o.Epoch.UnixMilli(); ms < 0 || ms > maxEpochMillis {
		return o, &OptionError{Field: "epoch", Value: o.Epoch.UTC().Format(time.RFC3339Nano), Reason: "is outside 1970-01-01..9999-12-31"}
	}
	return o, nil
}

// checkIdent accepts [a-z_][a-z0-9_]{0,62}.
func checkIdent(field, s string) error {
	bad := func(reason string) error { return &OptionError{Field: field, Value: s, Reason: reason} }
	switch {
	case s == "":
		return bad("is empty")
	case len(s) > 63:
		return bad("is longer than 63 bytes, PostgreSQL's identifier limit")
	case s[0] >= '0' && s[0] <= '9':
		return bad("starts with a digit; a SQL identifier starts with a letter or underscore")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return bad(fmt.Sprintf("has %q at byte %d; use lower-case letters, digits and underscores", c, i))
		}
	}
	return nil
}

// quote double-quotes a validated identifier, so keywords ("user",
// "order") are safe too; for the lower-case names accepted it is the same
// name PostgreSQL would use unquoted.
func quote(ident string) string { return `"` + ident + `"` }

// FunctionName returns the schema-qualified, quoted function name the SQL
// of o defines, e.g. "shard_5"."next_id".
func (o Options) FunctionName() (string, error) {
	o, err := o.withDefaults()
	if err != nil {
		return "", err
	}
	return quote(o.Schema) + "." + quote(o.Function), nil
}

// statements returns the DDL, one statement per element.
func statements(o Options) ([]string, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	schema := quote(o.Schema)
	seq := schema + "." + quote(o.Sequence)
	fn := schema + "." + quote(o.Function)
	epoch := o.Epoch.UnixMilli()
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE OR REPLACE FUNCTION %s(OUT result bigint) AS $idmint$\n", fn)
	fmt.Fprintf(&b, `DECLARE
    our_epoch bigint := %d;
    seq_id bigint;
    now_millis bigint;
    shard_id int := %d;
BEGIN
    SELECT nextval('%s') %% 1024 INTO seq_id;
    SELECT FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) INTO now_millis;
    -- idmint: the 41-bit time field's top bit is the bigint sign bit;
    -- refuse a time that would make the ID negative or precede the epoch.
    IF now_millis < our_epoch OR now_millis - our_epoch >= (1::bigint << 40) THEN
        RAISE EXCEPTION 'next_id: clock %% ms is outside [epoch %%, epoch + 2^40)', now_millis, our_epoch;
    END IF;
    result := (now_millis - our_epoch) << 23;
    result := result | (shard_id << 10);
    result := result | (seq_id);
END;
$idmint$ LANGUAGE plpgsql VOLATILE`, epoch, o.Shard, seq)
	return []string{
		"CREATE SCHEMA IF NOT EXISTS " + schema,
		"CREATE SEQUENCE IF NOT EXISTS " + seq,
		b.String(),
	}, nil
}

// Render returns a PostgreSQL script that creates o's schema and sequence if
// they are missing and (re)defines the function next_id() returning
// Instagram-layout IDs for o's shard — the function of the post, with the
// identifiers quoted and a guard that raises an exception instead of
// issuing an ID whose time does not fit 41 bits. Use it as a column
// default: id bigint NOT NULL DEFAULT "shard_5"."next_id"(). Render is a
// pure function; invalid options return an *OptionError wrapping ErrInvalid.
func Render(o Options) (string, error) {
	stmts, err := statements(o)
	if err != nil {
		return "", err
	}
	o, _ = o.withDefaults()
	var b strings.Builder
	fmt.Fprintf(&b, "-- Instagram-style IDs for shard %d in schema %s, rendered by idmint.\n", o.Shard, o.Schema)
	fmt.Fprintf(&b, "-- Layout: 41-bit ms since %s (%d) | 13-bit shard | 10-bit nextval %% 1024.\n",
		o.Epoch.UTC().Format("2006-01-02T15:04:05.000Z"), o.Epoch.UnixMilli())
	b.WriteString("-- After \"Sharding & IDs at Instagram\", Instagram Engineering, 2011.\n")
	b.WriteString("-- Unique while the shard issues at most 1024 IDs per millisecond and the\n")
	b.WriteString("-- server clock does not step back; ordered by millisecond, not strictly.\n")
	fmt.Fprintf(&b, "-- IDs stay positive until %s; next_id() raises from then on.\n",
		o.Epoch.Add(PositiveSpan).UTC().Format("2006-01-02T15:04:05.000Z"))
	for _, s := range stmts {
		b.WriteString(s)
		b.WriteString(";\n")
	}
	return b.String(), nil
}
