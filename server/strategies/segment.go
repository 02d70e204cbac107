package strategies

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/segment/stores"
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/sqldb"
)

// DefaultStep is the step of a segment key that names none (Leaf's example
// rows use 2000; Tinyid 100000; 1000 keeps a restart's gap small).
const DefaultStep = 1000

func segmentStrategy() server.Strategy {
	return server.Strategy{
		Name:    "segment",
		Summary: "Leaf-style number segments leased from a store (store: a stores: name, default sqlite in the data directory; step: lease size, default 1000; options.floor: the largest ID that exists already, every ID issued is above it)",
		Check: func(k server.KeyConfig, cfg *server.Config) []server.Problem {
			ps := unknownOptions(k, "description", "floor")
			ps = append(ps, checkDescription(k)...)
			if _, err := keyFloor(k); err != nil {
				ps = append(ps, server.Problem{Field: "options.floor", Value: strconv.QuoteToASCII(k.Options["floor"]), Message: err.Error()})
			}
			ps = append(ps, nodeLocalStore(k, cfg)...)
			if k.Step != 0 {
				if err := segment.ValidateStep(k.Step); err != nil {
					ps = append(ps, server.Problem{Field: "step", Value: fmt.Sprint(k.Step), Message: err.Error()})
				}
			}
			return ps
		},
		New:     newSegment,
		Prepare: prepareSegments,
	}
}

// maxDescription is the longest store row description (segment.KeyInfo,
// Leaf's varchar(256)).
const maxDescription = 256

// checkDescription validates options.description before it reaches a
// store: at most 256 bytes of UTF-8 without control characters
// (PostgreSQL refuses NUL in text, and the refusal used to come back as a
// 503 quoting the database's error).
func checkDescription(k server.KeyConfig) []server.Problem {
	d, ok := k.Options["description"]
	if !ok {
		return nil
	}
	show := d
	if len(show) > 32 {
		show = show[:32] + "..."
	}
	switch {
	case len(d) > maxDescription:
		return []server.Problem{{Field: "options.description", Value: strconv.QuoteToASCII(show), Message: fmt.Sprintf("is %d bytes, at most %d", len(d), maxDescription)}}
	case !utf8.ValidString(d):
		return []server.Problem{{Field: "options.description", Value: strconv.QuoteToASCII(show), Message: "is not valid UTF-8"}}
	case strings.IndexFunc(d, unicode.IsControl) >= 0:
		return []server.Problem{{Field: "options.description", Value: strconv.QuoteToASCII(show), Message: "must not hold control characters (NUL, newline, ...)"}}
	}
	return nil
}

// allocatorResource is one Allocator over one store, shared by every segment
// key on that store.
type allocatorResource struct {
	a   *segment.Allocator
	url string
}

func (r *allocatorResource) Close(ctx context.Context) error { return r.a.Close() }

// openAllocator returns the Allocator shared by every key on the named store.
func openAllocator(ctx context.Context, env *server.Env, store string) (*segment.Allocator, error) {
	url := env.Config.Stores[store]
	w, err := openWitness(ctx, env)
	if err != nil {
		return nil, err
	}
	res, err := env.Shared(ctx, "segment store "+store, func(ctx context.Context) (server.Resource, error) {
		if sharedStore(url) {
			w.warnShared(env, "segment store "+store, sqldb.Redact(url))
		}
		a, err := stores.OpenAllocator(ctx, url, segment.Options{Clock: env.Clock, CloseStore: true, Logger: env.Logger, Witness: w.w})
		if err != nil {
			return nil, fmt.Errorf("open segment store %q: %w", store, err)
		}
		return &allocatorResource{a: a, url: url}, nil
	})
	if err != nil {
		return nil, err
	}
	return res.(*allocatorResource).a, nil
}

// ensureRow creates the key's store row if missing. The row survives
// restarts and deletions (its max_id only grows); a step set in the config
// wins over the row's.
func ensureRow(ctx context.Context, a *segment.Allocator, name string, step int64, desc string) error {
	if info, ok := a.Known(name); ok { // prepared with the other keys
		if step != 0 && info.Step != step {
			return a.SetStep(ctx, name, step)
		}
		return nil
	}
	err := a.CreateKey(ctx, rowInfo(name, step, desc))
	switch {
	case errors.Is(err, segment.ErrKeyExists):
		if step != 0 {
			info, err := a.Describe(ctx, name)
			if err != nil {
				return err
			}
			if info.Step != step {
				return a.SetStep(ctx, name, step)
			}
		}
		return nil
	default:
		return err
	}
}

// rowInfo is the row a key's config asks for.
func rowInfo(name string, step int64, desc string) segment.KeyInfo {
	if step == 0 {
		step = DefaultStep
	}
	return segment.KeyInfo{Key: name, Step: step, Description: desc}
}

// prepareSegments creates the rows of every segment key of a starting
// server at once, one batch per store, instead of one committed INSERT per
// key (10,000 keys on a fresh SQLite store took 9 s); each key's build
// then finds its row known and asks the store nothing. It then loads every
// key's first segment in the background, in batches (Allocator.Warm), so
// the first requests after a start are served from memory instead of
// each waiting for its key's load; a step the config changes is set
// first, so the first segment has it.
func prepareSegments(ctx context.Context, env *server.Env, keys map[string]server.KeyConfig) error {
	byStore := map[string][]segment.KeyInfo{}
	for name, k := range keys {
		byStore[k.Store] = append(byStore[k.Store], rowInfo(name, k.Step, k.Options["description"]))
	}
	for store, infos := range byStore {
		a, err := openAllocator(ctx, env, store)
		if err != nil {
			return err
		}
		rows, err := a.EnsureKeys(ctx, infos)
		if err != nil {
			return fmt.Errorf("segment store %q: create the rows of %d keys: %w", store, len(infos), err)
		}
		names := make([]string, 0, len(infos))
		for _, k := range infos {
			if keys[k.Key].Step != 0 && rows[k.Key].Step != k.Step {
				if err := a.SetStep(ctx, k.Key, k.Step); err != nil {
					return err
				}
			}
			names = append(names, k.Key)
		}
		// Floors are raised before the first segments load.
		for _, name := range names {
			if err := applyFloor(ctx, a, name, keys[name]); err != nil {
				return err
			}
		}
		sort.Strings(names)
		a.Warm(names)
	}
	return nil
}

func newSegment(ctx context.Context, env *server.Env, name string, k server.KeyConfig) (server.Issuer, error) {
	a, err := openAllocator(ctx, env, k.Store)
	if err != nil {
		return nil, err
	}
	if err := ensureRow(ctx, a, name, k.Step, k.Options["description"]); err != nil {
		return nil, err
	}
	if err := applyFloor(ctx, a, name, k); err != nil {
		return nil, err
	}
	key, err := a.Key(name)
	if err != nil {
		return nil, err
	}
	return &segmentKey{a: a, k: key, name: name, line: newRegionLine(env.Config, name)}, nil
}

// segmentKey serves one key from the shared Allocator.
type segmentKey struct {
	a    *segment.Allocator
	k    *segment.Key
	name string
	line regionLine // the region's share of the number line
}

func segmentErr(err error) error {
	if errors.Is(err, segment.ErrBadCount) {
		return &server.InputError{Field: "count", Err: err}
	}
	return &retryable{err, time.Second}
}

func (s *segmentKey) NextInt64s(ctx context.Context, dst []int64) error {
	if _, err := s.k.NextN(ctx, dst); err != nil {
		return segmentErr(err)
	}
	return s.line.apply(dst)
}

func (s *segmentKey) NextRange(ctx context.Context, n int64) (int64, int64, error) {
	b, err := s.k.Range(ctx, n)
	if err != nil {
		return 0, 0, segmentErr(err)
	}
	if b.Step != 1 {
		return 0, 0, fmt.Errorf("strategies: key %q issues every %dth number; it has no contiguous ranges", s.name, b.Step)
	}
	first, err := s.line.applyRange(b.Start, b.Len())
	if err != nil {
		return 0, 0, err
	}
	return first, b.Len(), nil
}

func (s *segmentKey) Step() int64 { return s.k.Stats().MinStep }

func (s *segmentKey) SetStep(ctx context.Context, step int64) error {
	err := s.a.SetStep(ctx, s.name, step)
	if errors.Is(err, segment.ErrBadStep) {
		return &server.InputError{Field: "step", Err: err}
	}
	return err
}

func (s *segmentKey) CacheView() server.CacheView {
	st := s.k.Stats()
	return server.CacheView{
		Key:    s.name,
		Value0: st.Buffers[0].Pos, Step0: st.Buffers[0].Step, Max0: st.Buffers[0].Max,
		Value1: st.Buffers[1].Pos, Step1: st.Buffers[1].Step, Max1: st.Buffers[1].Max,
		Pos: st.Slot, NextReady: st.NextReady, InitOk: st.InitOK,
	}
}

func (s *segmentKey) StoreRow(ctx context.Context) (server.StoreRow, error) {
	info, err := s.a.Describe(ctx, s.name)
	if err != nil {
		return server.StoreRow{}, segmentErr(err)
	}
	return server.StoreRow{Key: info.Key, MaxID: info.MaxID, Step: info.Step, UpdateTime: info.UpdateTime, Description: info.Description}, nil
}

// Ready checks the key's row can be read from the store (one listing for
// all the store's keys, at most once a second).
func (s *segmentKey) Ready(ctx context.Context) error {
	return s.a.RowReady(ctx, s.name)
}

// Stats are the key's buffer and store figures and, once a segment was
// leased, its runway above the largest ID claimed from the store.
func (s *segmentKey) Stats() []server.Stat {
	st := s.k.Stats()
	out := segmentStats(st)
	if st.InitOK {
		out = append(out, s.line.runway(int64Ceiling, segmentClaimed(st))...)
	}
	return out
}

// segmentClaimed is the largest ID the key's buffers claimed from the
// store (their ends are exclusive).
func segmentClaimed(st segment.Stats) int64 {
	return max(st.Buffers[0].Max, st.Buffers[1].Max) - 1
}

// segmentStats are a segment key's figures: one Help text per metric
// name, as Prometheus requires.
func segmentStats(st segment.Stats) []server.Stat {
	return []server.Stat{
		{Name: "segment_remaining", Help: "IDs left in a segment key's two buffers.", Value: float64(st.Remaining)},
		{Name: "segment_step", Help: "Length of the last segment leased.", Value: float64(st.Step)},
		{Name: "segment_loads_total", Help: "Segments leased from the store.", Value: float64(st.Loads), Counter: true},
		{Name: "segment_load_errors_total", Help: "Failed segment leases.", Value: float64(st.LoadErrors), Counter: true},
		{Name: "segment_store_errors_total", Help: "Segment leases the store failed (down, slow, unreachable), counted even while the double buffer still serves.",
			Value: float64(st.StoreErrors), Counter: true},
		{Name: "segment_store_failing", Help: "1 while a segment key's last lease failed and it retries.", Value: b2f(st.StoreFailing)},
		{Name: "segment_store_went_back_total", Help: "Times a segment key's store answered below the witness's mark (a failover to a lagging replica, a restore) and was raised above it.",
			Value: float64(st.WentBack), Counter: true},
	}
}

// Close does nothing: the Allocator is shared and closed with the server;
// the store row stays, so a key created again continues above it.
func (s *segmentKey) Close(ctx context.Context) error { return nil }

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// keyFloor reads options.floor: the largest ID that exists already (from
// database auto-increment, Leaf, another ID service), every ID the key
// issues is above it. -1 when the key has none.
func keyFloor(k server.KeyConfig) (int64, error) {
	v, ok := k.Options["floor"]
	if !ok {
		return -1, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(strings.ReplaceAll(v, "_", "")), 10, 64)
	if err != nil || n < 0 || n == math.MaxInt64 {
		return -1, fmt.Errorf("must be a whole number from 0 to %d (the largest ID that exists already; idmint migrate --floor finds it)", int64(math.MaxInt64-1))
	}
	return n, nil
}

// applyFloor raises the key's witness mark and store above its floor
// before it serves. A floor it cannot raise to (store or witness out of
// reach, a refusal) fails the key: serving below a floor would repeat IDs
// that exist already.
func applyFloor(ctx context.Context, a *segment.Allocator, name string, k server.KeyConfig) error {
	floor, err := keyFloor(k)
	if err != nil || floor < 0 {
		return err
	}
	if _, err := a.RaiseFloor(ctx, name, floor); err != nil {
		return fmt.Errorf("key %q: options.floor %d: not served until its store and witness hold it: %w", name, floor, err)
	}
	return nil
}
