package strategies

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	// The day of a date-part order number follows options.tz: embed the
	// zone database so a host without /usr/share/zoneinfo does not refuse
	// (or, worse, fall back to UTC for) a configured zone.
	_ "time/tzdata"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/ordernum"
	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/server"
)

// ordernumStrategy issues order numbers: a unique sequence from a segment
// row of the key's store, encrypted with FF1 into a fixed-length, readable
// number (design.md "order numbers"). With a date part the sequence is per
// day (row NAME:YYYYMMDD, ordernum.SequenceKey, the same row the CLI uses),
// so the format's capacity is per day. Its keys deliberately have no
// decoder: decoding reveals the sequence, i.e. the volume the format hides.
func ordernumStrategy() server.Strategy {
	return typed(server.Strategy{
		Name: "ordernum",
		Summary: "fixed-length readable order numbers: FF1 over a segment sequence, per day with a date part " +
			"(options: format, e.g. length=16 or alphabet=base32,length=12,prefix=K,date=yyMMdd,version; " +
			"key material from key_file (preferred: a file of VERSION:KEY lines, highest version issues), " +
			"key_env (an environment variable holding the same), or key (inline hex/base64, with key_version); " +
			"tz: zone of the date part, default UTC; store, step: the sequence's segment store and step)",
		// Its sequence row, ordernum.SequencePrefix + name + "/YYYYMMDD",
		// must fit a segment row name.
		MaxName: ordernum.MaxSequenceBase,
	}, parseOrdernum, newOrdernum)
}

// ordernumOptions is an order-number key's options, checked: the format,
// the date part's zone, the key ring (highest version first) and the codec
// built from them.
type ordernumOptions struct {
	f      ordernum.Format
	loc    *time.Location
	keys   []ordernum.Key
	codec  *ordernum.Codec
	source string // which of orderKeySources holds the material
}

// orderKeySources are the options that can carry key material; exactly one
// must be set.
var orderKeySources = []string{"key_file", "key_env", "key"}

// parseOrdernum checks an order-number key's options and returns them
// read, with the key ring loaded from its one source and the codec built.
func parseOrdernum(k server.KeyConfig, cfg *server.Config) (ordernumOptions, []server.Problem) {
	var o ordernumOptions
	ps := unknownOptions(k, "format", "key", "key_env", "key_file", "key_version", "tz", "description")
	ps = append(ps, checkDescription(k)...)
	ps = append(ps, nodeLocalStore(k, cfg)...)
	f, err := ordernum.ParseFormat(k.Options["format"])
	if err != nil {
		ps = append(ps, server.Problem{Field: "options.format", Value: k.Options["format"], Message: err.Error()})
	}
	loc, lerr := orderLocation(k.Options["tz"])
	if lerr != nil {
		ps = append(ps, server.Problem{Field: "options.tz", Value: k.Options["tz"], Message: lerr.Error()})
	}
	o.f, o.loc = f, loc
	o.source, _ = orderKeySource(k) // how many: orderKeys refuses all but one
	keys, p := orderKeys(k, cfg)
	if p == nil {
		// A config key finds itself among the config's keys; a key
		// created through the API is not one of them.
		limit := 2
		if k.FromAPI() {
			limit = 1
		}
		if shared := sharedMaterial(cfg, keys); len(shared) >= limit {
			p = &server.Problem{Field: "options." + o.source, Value: orderKeyValue(k, o.source), Message: fmt.Sprintf(
				"key material shared with order-number key(s) %s: keys on one material share one permutation and issue identical order numbers; give each key its own", strings.Join(shared, ", "))}
		}
	}
	if p != nil {
		ps = append(ps, *p)
	} else if err == nil {
		codec, err := ordernum.New(f, keys[0], keys[1:]...)
		if err != nil {
			ps = append(ps, server.Problem{Field: "options." + o.source, Value: orderKeyValue(k, o.source), Message: err.Error()})
		}
		o.keys, o.codec = keys, codec
	}
	if k.Step != 0 {
		if err := segment.ValidateStep(k.Step); err != nil {
			ps = append(ps, server.Problem{Field: "step", Value: fmt.Sprint(k.Step), Message: err.Error()})
		}
	}
	if r := cfg.RegionSpec(); err == nil && !r.Single() && f.Capacity()/uint64(r.Count) == 0 {
		ps = append(ps, server.Problem{Field: "options.format", Value: k.Options["format"], Message: fmt.Sprintf(
			"holds %d order numbers, fewer than region.count %d: each region takes its own block of the permuted sequence and needs one number at least", f.Capacity(), r.Count)})
	}
	return o, ps
}

// orderLocation resolves options.tz; empty means UTC.
func orderLocation(tz string) (*time.Location, error) {
	if tz == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("strategies: %q is not a time zone (IANA name such as Asia/Shanghai, or UTC)", tz)
	}
	return loc, nil
}

// orderKeySource returns which of key_file, key_env and key is set; n is
// how many are.
func orderKeySource(k server.KeyConfig) (field string, n int) {
	for _, s := range orderKeySources {
		if _, ok := k.Options[s]; ok {
			if n == 0 {
				field = s
			}
			n++
		}
	}
	return field, n
}

// orderKeyValue is what a problem may show of a key source: the file's
// path or the variable's name, never material.
func orderKeyValue(k server.KeyConfig, field string) string {
	if field == "key" {
		return "(redacted)"
	}
	return k.Options[field]
}

// orderKeys loads the key ring of an ordernum key from the one source its
// options name. Highest version first, as ordernum.New takes them. A
// problem names the option and shows the path or variable name, never
// key material.
func orderKeys(k server.KeyConfig, cfg *server.Config) ([]ordernum.Key, *server.Problem) {
	field, n := orderKeySource(k)
	prob := func(format string, a ...any) *server.Problem {
		return &server.Problem{Field: "options." + field, Value: orderKeyValue(k, field), Message: fmt.Sprintf(format, a...)}
	}
	switch {
	case n == 0:
		field = "key_file"
		return nil, prob("order numbers need key material: set key_file (a file of VERSION:KEY lines, preferred), key_env (an environment variable holding them) or key")
	case n > 1:
		return nil, prob("set only one of key_file, key_env and key")
	}
	if _, ok := k.Options["key_version"]; ok && field != "key" {
		return nil, &server.Problem{Field: "options.key_version", Value: k.Options["key_version"],
			Message: "applies to an inline key only; key_file and key_env give each key's version as VERSION:KEY"}
	}
	var text, where string
	switch field {
	case "key":
		v, p := intOption(k, "key_version", 0, 0, ordernum.MaxKeyVersion)
		if p != nil {
			return nil, p
		}
		key, err := ordernum.ParseKey(int(v), k.Options["key"])
		if err != nil {
			return nil, prob("%v", err)
		}
		return []ordernum.Key{key}, nil
	case "key_env":
		name := k.Options["key_env"]
		if k.FromAPI() {
			return nil, prob("a key created through the admin API cannot read the server's environment; name a file in the config's key_dir with key_file, or give key")
		}
		if name == "" {
			return nil, prob("must name an environment variable")
		}
		text, where = cfg.Getenv(name), "environment variable "+name
		if text == "" {
			return nil, prob("environment variable %s is not set or empty", name)
		}
	case "key_file":
		path := k.Options["key_file"]
		if path == "" {
			return nil, prob("must name a file")
		}
		if k.FromAPI() {
			// A request names at most a file in the operator's key
			// directory, and learns only that it could not be used:
			// never why (missing? unreadable? not a key ring?), so the
			// admin API is no probe of the server's files.
			full, ok := keyDirPath(cfg.KeyDir, path)
			if !ok {
				return nil, prob("a key created through the admin API names a key file by its bare name in the config's key_dir (key_dir: %q)", cfg.KeyDir)
			}
			b, err := ordernum.ReadKeyFile(full)
			var keys []ordernum.Key
			if err == nil {
				keys, err = ordernum.ParseKeys(string(b))
			}
			if err != nil || len(keys) == 0 {
				return nil, prob("not a usable key file in key_dir: it must be a regular file of at most %d bytes of VERSION:KEY lines", ordernum.MaxKeyFileBytes)
			}
			return keys, nil
		}
		b, err := ordernum.ReadKeyFile(path)
		if err != nil {
			// The error names the path and the cause only, never content.
			return nil, prob("cannot read the key file: %v", err)
		}
		text, where = string(b), "file "+path
	}
	keys, err := ordernum.ParseKeys(text)
	if err != nil {
		return nil, prob("%s: %v", where, err)
	}
	if len(keys) == 0 {
		return nil, prob("%s holds no VERSION:KEY entries", where)
	}
	return keys, nil
}

// keyDirPath resolves a key file name of an API-created key inside dir:
// only a bare file name (no separator, not "." or "..") in a configured
// directory.
func keyDirPath(dir, name string) (string, bool) {
	if dir == "" || name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") || filepath.Base(name) != name {
		return "", false
	}
	return filepath.Join(dir, name), true
}

// sharedMaterial returns the names of the config's order-number keys whose
// key rings share material with keys (sorted; unreadable rings are the
// problem of their own key's check).
func sharedMaterial(cfg *server.Config, keys []ordernum.Key) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(cfg.Keys)) {
		other := cfg.Keys[name]
		if other.Strategy != "ordernum" {
			continue
		}
		ring, p := orderKeys(other, cfg)
		if p == nil && ringsShare(ring, keys) {
			out = append(out, name)
		}
	}
	return out
}

func ringsShare(a, b []ordernum.Key) bool {
	for _, x := range a {
		for _, y := range b {
			if ordernum.SameMaterial(x, y) {
				return true
			}
		}
	}
	return false
}

// materialRing is the shared resource through which the order-number keys
// of one server make sure no two of them share key material (whatever
// created them: config, admin API, key store). Two keys on one material
// share one permutation and would issue identical order numbers.
type materialRing struct {
	mu   sync.Mutex
	keys map[*ordernumKey][]ordernum.Key
}

func (m *materialRing) Close(ctx context.Context) error { return nil }

// claim registers o's ring, or returns the name of a key already holding
// some of its material.
func (m *materialRing) claim(o *ordernumKey, ring []ordernum.Key) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for other, r := range m.keys {
		if ringsShare(r, ring) {
			return other.name, false
		}
	}
	m.keys[o] = ring
	return "", true
}

func (m *materialRing) release(o *ordernumKey) {
	m.mu.Lock()
	delete(m.keys, o)
	m.mu.Unlock()
}

func newOrdernum(ctx context.Context, env *server.Env, name string, k server.KeyConfig, opts ordernumOptions) (server.Issuer, error) {
	f, loc, keys, codec := opts.f, opts.loc, opts.keys, opts.codec
	log := env.Logger.With("key", name)
	if field := opts.source; field == "key" {
		log.Warn("order-number key material is written in the config (options.key); prefer options.key_file or options.key_env")
	} else if field == "key_file" {
		if st, err := os.Stat(k.Options["key_file"]); err == nil && st.Mode().Perm()&0o077 != 0 {
			log.Warn("order-number key file is readable by other users; chmod 600 it", "path", k.Options["key_file"], "mode", st.Mode().Perm().String())
		}
	}
	a, err := openAllocator(ctx, env, k.Store)
	if err != nil {
		return nil, err
	}
	o := &ordernumKey{
		name: name, a: a, step: k.Step, desc: k.Options["description"],
		codec: codec, f: f, loc: loc, clk: env.Clock, log: log, rcount: 1, share: f.Capacity(),
	}
	if r := env.Config.RegionSpec(); !r.Single() {
		o.rcount, o.share = uint64(r.Count), f.Capacity()/uint64(r.Count)
		o.base = uint64(r.Index) * o.share
	}
	// Open today's sequence now: a bad store fails at start, not on the
	// first request.
	if _, err := o.sequence(ctx, o.clk.Now().In(loc)); err != nil {
		return nil, err
	}
	res, err := env.Shared(ctx, "ordernum key material", func(context.Context) (server.Resource, error) {
		return &materialRing{keys: map[*ordernumKey][]ordernum.Key{}}, nil
	})
	if err != nil {
		return nil, err
	}
	ring := res.(*materialRing)
	if other, ok := ring.claim(o, keys); !ok {
		return nil, &server.InputError{Field: "options." + opts.source, Err: fmt.Errorf(
			"strategies: key %q: its key material is already used by order-number key %q; two keys on one material share one permutation and issue identical order numbers: give each key its own", name, other)}
	}
	o.ring = ring
	return o, nil
}

// ordernumKey serves one order-number key: sequence numbers from the
// segment row ordernum.SequenceKey names for the day, encrypted by codec.
type ordernumKey struct {
	name  string
	a     *segment.Allocator
	step  int64
	desc  string
	codec *ordernum.Codec
	f     ordernum.Format
	loc   *time.Location
	clk   clock.Clock
	log   *slog.Logger
	ring  *materialRing
	// The region's block of the permuted sequence: the store's number s
	// (below share = capacity/rcount) is encrypted as base+s, with base
	// = index*share (0 without regions, and for region 0). The
	// permutation hides which block a number came from, so a number
	// shows neither its region nor any volume; and region 0 encrypts the
	// very values a single region did, so one region grows into two
	// without a repeat: region 1's block starts above every value region
	// 0 issued while it had the whole capacity, as long as it had used
	// less than its new share (past it, region 0 refuses).
	rcount, share, base uint64

	cur    atomic.Pointer[daySequence] // the latest day's sequence
	openMu sync.Mutex                  // serialises creating a day's row (once a day)
	last   atomic.Int64                // largest sequence number issued on cur's day
	warned atomic.Pointer[string]      // the sequence already warned about at 80 %
}

// daySequence is the segment key of one day (or the only one, without a
// date part).
type daySequence struct {
	name string
	k    *segment.Key
}

// sequence returns the segment key for day (already in the key's zone),
// creating its store row the first time the day is seen.
func (o *ordernumKey) sequence(ctx context.Context, day time.Time) (*daySequence, error) {
	name, err := ordernum.SequenceRow(o.name, o.f, day)
	if err != nil {
		return nil, err
	}
	if c := o.cur.Load(); c != nil && c.name == name {
		return c, nil
	}
	o.openMu.Lock()
	defer o.openMu.Unlock()
	c := o.cur.Load()
	if c != nil && c.name == name {
		return c, nil
	}
	if err := o.ensureSequence(ctx, name, ordernum.SequenceKey(o.name, o.f, day)); err != nil {
		return nil, segmentErr(err)
	}
	k, err := o.a.Key(name)
	if err != nil {
		return nil, segmentErr(err)
	}
	d := &daySequence{name: name, k: k}
	// A request that read the clock just before midnight may arrive after
	// one that read it just after: only move cur forward (names of one key
	// differ only in their YYYYMMDD suffix, so they sort by day).
	if c == nil || name > c.name {
		o.cur.Store(d)
		o.last.Store(0)
	}
	return d, nil
}

// ensureSequence creates the key's sequence row for a day if missing (see
// EnsureOrderSequence).
func (o *ordernumKey) ensureSequence(ctx context.Context, name, legacy string) error {
	moved, from, err := ensureOrderRow(ctx, o.a, name, legacy, o.step, o.desc)
	if moved {
		o.log.Info("order-number sequence moved to a row no segment key can name; it continues after the legacy row",
			"from", legacy, "to", name, "max_id", from)
	}
	return err
}

// EnsureOrderSequence returns the segment row of order-number key base's
// sequence for day (ordernum.SequenceRow), creating it in a if missing.
// The server's ordernum keys and `idmint ordernum` both draw through it, so
// they share one sequence and one migration.
//
// Sequences used to live in rows a segment key could name (legacy,
// ordernum.SequenceKey); when such a row exists, the new row starts at its
// max_id, so the numbers issued before the move are never issued again
// (U1: same key, same permutation, disjoint sequence numbers). Every
// process must run this version before any issues from the new row: an
// older one would go on leasing from the legacy row. step 0 keeps an
// existing row's step (DefaultStep for a new one).
func EnsureOrderSequence(ctx context.Context, a *segment.Allocator, base string, f ordernum.Format, day time.Time, step int64, desc string) (string, error) {
	name, err := ordernum.SequenceRow(base, f, day)
	if err != nil {
		return "", err
	}
	_, _, err = ensureOrderRow(ctx, a, name, ordernum.SequenceKey(base, f, day), step, desc)
	return name, err
}

// ensureOrderRow creates row name if missing, continuing after the legacy
// row when that exists; moved reports that it did, from its max_id.
func ensureOrderRow(ctx context.Context, a *segment.Allocator, name, legacy string, step int64, desc string) (moved bool, from int64, err error) {
	if _, err := a.Describe(ctx, name); err == nil {
		return false, 0, ensureRow(ctx, a, name, step, desc)
	} else if !errors.Is(err, segment.ErrUnknownKey) {
		return false, 0, err
	}
	old, err := a.Describe(ctx, legacy)
	switch {
	case errors.Is(err, segment.ErrUnknownKey), errors.Is(err, segment.ErrBadKey):
		return false, 0, ensureRow(ctx, a, name, step, desc)
	case err != nil:
		return false, 0, err
	}
	newStep := step
	if newStep == 0 {
		newStep = DefaultStep
	}
	err = a.CreateKey(ctx, segment.KeyInfo{Key: name, MaxID: old.MaxID, Step: newStep, Description: desc})
	if errors.Is(err, segment.ErrKeyExists) { // another process moved it first
		return false, 0, ensureRow(ctx, a, name, step, desc)
	}
	return err == nil, old.MaxID, err
}

func (o *ordernumKey) NextStrings(ctx context.Context, dst []string) error {
	day := o.clk.Now().In(o.loc) // read once: the sequence and the date part agree
	seq, err := o.sequence(ctx, day)
	if err != nil {
		return err
	}
	seqs := make([]int64, len(dst))
	if _, err := seq.k.NextN(ctx, seqs); err != nil {
		return segmentErr(err)
	}
	buf := make([]byte, 0, len(dst)*o.f.Length())
	for i, s := range seqs {
		start := len(buf)
		v := o.base + uint64(s)
		if uint64(s) >= o.share {
			v = math.MaxUint64 // past the region's block: AppendEncode refuses it
		}
		buf, err = o.codec.AppendEncode(buf, v, day)
		if err != nil {
			// The format's capacity is used up (for the day, with a
			// date part): refuse rather than wrap.
			o.log.Error("order-number capacity exhausted", "sequence", seq.name, "capacity", o.f.Capacity())
			return &retryable{fmt.Errorf("strategies: key %q: sequence %s: %w", o.name, seq.name, err), o.untilTomorrow(day)}
		}
		dst[i] = string(buf[start:])
	}
	// Usage is the share of the region's block used, scaled to the
	// format's capacity the Usage helpers divide by.
	o.noteUsage(seq.name, int64(uint64(seqs[len(seqs)-1])*o.rcount))
	return nil
}

// untilTomorrow is how long a client should wait after a date format's
// day ran out (the next day has a fresh sequence); a format without a date
// part never recovers, so one second (the client will see the same error).
func (o *ordernumKey) untilTomorrow(day time.Time) time.Duration {
	if !o.f.HasDate() {
		return time.Second
	}
	y, m, d := day.Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, day.Location()).Sub(day)
}

// noteUsage records the largest sequence number issued today and warns in
// the log once per sequence when 80 % of the capacity is used.
func (o *ordernumKey) noteUsage(seqName string, s int64) {
	if c := o.cur.Load(); c == nil || c.name != seqName {
		return
	}
	for {
		old := o.last.Load()
		if s <= old || o.last.CompareAndSwap(old, s) {
			break
		}
	}
	if !o.f.NearCapacity(uint64(s)) {
		return
	}
	if w := o.warned.Load(); w != nil && *w == seqName {
		return
	}
	o.warned.Store(&seqName)
	o.log.Warn("order-number format nearing capacity", "sequence", seqName,
		"used", fmt.Sprintf("%.1f%%", 100*o.f.Usage(uint64(s))), "capacity", o.f.Capacity(), "per_day", o.f.HasDate())
}

// Ready checks the current sequence's row can be read from the store.
// HidesVolume keeps order numbers out of idmint_ids_issued_total: the
// count would reveal the volume the format exists to hide.
func (o *ordernumKey) HidesVolume() bool { return true }

func (o *ordernumKey) Ready(ctx context.Context) error {
	c := o.cur.Load()
	_, err := o.a.Describe(ctx, c.name)
	return err
}

// Stats says whether the format nears its capacity, and how much of it is
// used only as a Volume stat: the share used times the capacity is the
// volume order numbers exist to hide, so /metrics leaves it out whenever
// the public listener serves /metrics.
func (o *ordernumKey) Stats() []server.Stat {
	near, used := 0.0, 0.0
	if last := o.last.Load(); last > 0 {
		used = o.f.Usage(uint64(last))
		if o.f.NearCapacity(uint64(last)) {
			near = 1
		}
	}
	return []server.Stat{
		{Name: "ordernum_near_capacity", Help: "1 once an order-number key has used 80 % of its format's capacity (today's, with a date part).", Value: near},
		{Name: "ordernum_capacity", Help: "Order numbers an order-number format can issue (per day with a date part).", Value: float64(o.f.Capacity())},
		{Name: "ordernum_capacity_used_ratio", Help: "Share of an order-number format's capacity (today's, with a date part) used by the largest sequence number this node issued; only where /metrics is served on the admin listener alone, as it reveals the volume.",
			Value: used, Volume: true},
	}
}

// An order-number key is deliberately no server.Monitor: /cache, /db and
// the admin key views would show its sequence position, i.e. its volume.

// Close releases the key's material for another key (the Allocator is
// shared and closed with the server).
func (o *ordernumKey) Close(ctx context.Context) error {
	if o.ring != nil {
		o.ring.release(o)
	}
	return nil
}
