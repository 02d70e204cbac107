package strategies

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/node"
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/snowflake"
)

// DefaultLayout is the layout of a snowflake key that names none: Leaf's
// (41-bit ms since Twitter's epoch, 10-bit worker, 12-bit sequence starting
// at a random value below 100), so Leaf's /decodeSnowflakeId arithmetic
// reads idmint's IDs exactly.
const DefaultLayout = "leaf"

func snowflakeStrategy() server.Strategy {
	return typed(server.Strategy{
		Name: "snowflake",
		Summary: "64-bit time+node+sequence IDs under a worker-ID lease (layout: a built-in name or a layouts: entry, default leaf; " +
			"options: one per extra node field, e.g. datacenter: 1; worker_limit: take worker IDs 0..n-1 only)",
	}, parseSnowflake, newSnowflake)
}

// snowflakeOptions is a snowflake key's layout and options, checked.
type snowflakeOptions struct {
	layout      snowflake.Layout
	layoutName  string           // the key's layout, DefaultLayout when it names none
	worker      string           // the node field the lease fills
	node        map[string]int64 // the other node fields' values
	nodeKey     []string         // "field=value" of each, in layout order
	workerLimit int64
	workerBase  int64 // added to the leased worker ID: a region's slice of the worker field
	floor       int64 // options.floor: every ID issued is above it; -1: none
}

func resolveLayout(cfg *server.Config, name string) (snowflake.Layout, error) {
	if name == "" {
		name = DefaultLayout
	}
	if spec, ok := cfg.Layouts[name]; ok {
		return snowflake.ParseLayout(spec)
	}
	if l, ok := snowflake.Lookup(name); ok {
		return l, nil
	}
	return snowflake.Layout{}, fmt.Errorf("strategies: unknown layout %q", name)
}

// workerField is the node field the lease fills: "worker" when the layout
// has one, else its only node field.
func workerField(l snowflake.Layout) string {
	nf := l.NodeFields()
	for _, f := range nf {
		if f.Name == "worker" {
			return f.Name
		}
	}
	if len(nf) == 1 {
		return nf[0].Name
	}
	return ""
}

// parseSnowflake checks a snowflake key's layout and options and returns
// them read.
func parseSnowflake(k server.KeyConfig, cfg *server.Config) (snowflakeOptions, []server.Problem) {
	var o snowflakeOptions
	l, err := resolveLayout(cfg, k.Layout)
	if err != nil {
		return o, []server.Problem{{Field: "layout", Value: k.Layout, Message: err.Error()}}
	}
	if err := l.Check(time.Now()); err != nil {
		return o, []server.Problem{{Field: "layout", Value: k.Layout, Message: err.Error()}}
	}
	wf := workerField(l)
	if wf == "" {
		return o, []server.Problem{{Field: "layout", Value: l.String(), Message: "layout has no node field a worker lease can fill (needs one named worker, or exactly one)"}}
	}
	o = snowflakeOptions{layout: l, layoutName: cmp.Or(k.Layout, DefaultLayout), worker: wf, node: map[string]int64{}}
	allowed := []string{"worker_limit", "floor"}
	var ps []server.Problem
	floor, err := keyFloor(k)
	if err != nil {
		ps = append(ps, server.Problem{Field: "options.floor", Value: strconv.QuoteToASCII(k.Options["floor"]), Message: err.Error()})
	} else if floor >= 0 {
		if _, err := snowflake.Decode(l, floor); err != nil {
			ps = append(ps, server.Problem{Field: "options.floor", Value: strconv.FormatInt(floor, 10),
				Message: fmt.Sprintf("is wider than layout %s's %d bits: no ID of this layout is above it", l.Name(), l.Bits())})
		}
	}
	o.floor = floor
	limit, p := intOption(k, "worker_limit", 0, 0, 1<<40)
	if p != nil {
		ps = append(ps, *p)
	}
	o.workerLimit = limit
	allowed = append(allowed, "region_field")
	rf, base, size, rps := regionSlice(k, cfg, l, wf, o.workerLimit)
	ps = append(ps, rps...)
	if size > 0 {
		o.workerBase, o.workerLimit = base, size
	}
	for _, f := range l.NodeFields() {
		if f.Name == wf {
			continue
		}
		allowed = append(allowed, f.Name)
		if f.Name == rf {
			idx := int64(cfg.RegionSpec().Index)
			if v, ok := k.Options[f.Name]; ok && v != strconv.FormatInt(idx, 10) {
				ps = append(ps, server.Problem{Field: "options." + f.Name, Value: v,
					Message: fmt.Sprintf("field %q carries the region index (%d for region %s); leave options.%s unset or set it to %d", f.Name, idx, cfg.RegionSpec(), f.Name, idx)})
				continue
			}
			o.node[f.Name] = idx
			o.nodeKey = append(o.nodeKey, f.Name+"="+strconv.FormatInt(idx, 10))
			continue
		}
		if _, ok := k.Options[f.Name]; !ok {
			ps = append(ps, server.Problem{Field: "options." + f.Name, Value: "", Message: fmt.Sprintf("layout %s has node field %q: set it (0..%d)", l.Name(), f.Name, int64(1)<<f.Bits-1)})
			continue
		}
		v, p := intOption(k, f.Name, 0, 0, int64(1)<<f.Bits-1)
		if p != nil {
			ps = append(ps, *p)
			continue
		}
		o.node[f.Name] = v
		o.nodeKey = append(o.nodeKey, f.Name+"="+strconv.FormatInt(v, 10))
	}
	return o, append(ps, unknownOptions(k, allowed...)...)
}

func (r *nodeResource) Stats() []server.Stat {
	id, gen, ok := r.n.WorkerID()
	held := 0.0
	if ok {
		held = 1
	}
	return append([]server.Stat{
		{Name: "lease_held", Help: "1 while the worker-ID lease is held.", Value: held},
		{Name: "worker_id", Help: "The worker ID held (-1 while none).", Value: map[bool]float64{true: float64(id), false: -1}[ok]},
		{Name: "lease_generation", Help: "The generation (fencing token) of the lease held.", Value: float64(gen)},
		{Name: "lease_valid_seconds", Help: "Seconds before the worker-ID lease's fence stops issuing unless a keepalive is confirmed; -1 for leases that cannot expire (file, static).", Value: leaseLeft(r.n)},
	}, r.poolStats()...)
}

func leaseLeft(n *node.Node) float64 {
	left, expires := n.LeaseLeft()
	if !expires {
		return -1
	}
	return left.Seconds()
}

// coordinatorFor returns the coordinator URL for a layout. A file
// coordinator holds one worker ID per file, so each layout other than the
// default gets its own file beside the configured one (the same layout
// always maps to the same file, keeping its horizon across restarts).
// static, ip, mac and k8s keep their horizon in a file as well: unless the URL
// names one (horizon=), it goes in dataDir, named the same way
// (worker-static.horizon, worker-static.<layout>.horizon, ...).
func coordinatorFor(base, dataDir, layoutName, nodeKey string) string {
	suffix := ""
	if layoutName != DefaultLayout {
		suffix = "." + sanitize(layoutName)
	}
	if nodeKey != "" {
		suffix += "." + sanitize(nodeKey)
	}
	scheme, _, _ := strings.Cut(base, "://")
	switch scheme = strings.ToLower(scheme); scheme {
	case "static", "ip", "mac", "k8s":
		_, query, hasQuery := strings.Cut(base, "?")
		if q, err := url.ParseQuery(query); err != nil || q.Has("horizon") {
			return base // worker.Open names a bad query
		}
		sep := "?"
		if hasQuery {
			sep = "&"
		}
		path := filepath.Join(dataDir, "worker-"+scheme+suffix+".horizon")
		return base + sep + "horizon=" + url.QueryEscape(path)
	}
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "file" || suffix == "" {
		return base
	}
	u.Path += suffix
	return u.String()
}

// remoteHorizon reports whether a coordinator scheme keeps the worker
// horizon outside the node's data directory.
func remoteHorizon(scheme string) bool {
	switch strings.ToLower(scheme) {
	case "etcd", "zk", "zookeeper", "postgres", "postgresql", "mysql", "sqlite", "sqlite3":
		return true
	}
	return false
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, s)
}

func newSnowflake(ctx context.Context, env *server.Env, name string, k server.KeyConfig, o snowflakeOptions) (server.Issuer, error) {
	l, wf, nodeVals, nodeKey, workerLimit, layoutName := o.layout, o.worker, o.node, o.nodeKey, o.workerLimit, o.layoutName
	resName := "snowflake:" + layoutName
	if len(nodeKey) > 0 {
		resName += ":" + strings.Join(nodeKey, ",")
	}
	res, err := env.Shared(ctx, resName, func(ctx context.Context) (server.Resource, error) {
		coord := coordinatorFor(env.Config.Coordinator, env.Config.DataDir, layoutName, strings.Join(nodeKey, ","))
		// A coordinator that keeps the horizon away from this node (etcd,
		// ZooKeeper, a SQL table) could be restored from an older
		// snapshot: the data directory keeps a second copy of each worker
		// ID's horizon, never below what this node stamped.
		hdir, hfile := "", ""
		if scheme, _, _ := strings.Cut(coord, "://"); remoteHorizon(scheme) {
			hdir, hfile = env.Config.DataDir, sanitize(strings.TrimSuffix(layoutName+"."+strings.Join(nodeKey, ","), "."))
		}
		n, err := node.New(ctx, node.Config{
			Layout: l, Coordinator: coord, WorkerField: wf, Node: nodeVals, WorkerLimit: workerLimit, WorkerBase: o.workerBase,
			HorizonDir: hdir, HorizonFile: hfile,
			Clock: env.Clock, Logger: env.Logger, AcquireWait: 15 * time.Second,
			// Stamp every ID from the clock itself: a cached tick lags by its
			// refresher's scheduling delay, 40-64 ms p99 with the cores busy.
			Generator: snowflake.Settings{Coarse: -1},
		})
		if err != nil {
			return nil, err
		}
		id, gen, _ := n.WorkerID()
		env.Logger.Info("snowflake node ready", "layout", l.Name(), "worker", o.workerBase+id, "generation", gen,
			"layout_ends", l.End().Format(time.DateOnly))
		return newNodeResource(n, pooledCoordinator(coord), env.Clock, env.Logger), nil
	})
	if err != nil {
		return nil, err
	}
	r := res.(*nodeResource)
	if o.floor >= 0 {
		// The layout's IDs from now on start at the current tick: above the
		// floor once its tick has passed on this clock. Every ID is checked
		// as well, so a clock set back later cannot issue below it.
		least := snowflake.LeastID(l, env.Clock.Now())
		if least <= o.floor {
			p, _ := snowflake.Decode(l, o.floor)
			return nil, fmt.Errorf("key %q: options.floor %d is stamped %s, not yet past on this clock (%s): its IDs would start at %d, below the floor; use a layout whose IDs at this time are above it (a later epoch, more time bits), or start the key after that time",
				name, o.floor, p.Time.Format(time.RFC3339), env.Clock.Now().UTC().Format(time.RFC3339), least)
		}
	}
	return &snowflakeKey{n: r.n, res: r, layout: l, worker: wf, clk: env.Clock, floor: o.floor}, nil
}

// snowflakeKey serves one key from a node shared by every key of its
// layout and node-field values.
type snowflakeKey struct {
	n      *node.Node
	res    *nodeResource
	layout snowflake.Layout
	worker string
	clk    clock.Clock

	rollbacks atomic.Int64 // requests refused with snowflake.ErrClockBehind
	floor     int64        // options.floor; -1: none
}

func (k *snowflakeKey) NextInt64s(ctx context.Context, dst []int64) error {
	if _, err := k.n.NextN(ctx, dst); err != nil {
		if errors.Is(err, snowflake.ErrClockBehind) {
			k.rollbacks.Add(1)
		}
		return snowflakeErr(err)
	}
	if k.floor >= 0 {
		for _, id := range dst {
			if id <= k.floor {
				return &retryable{fmt.Errorf("snowflake: ID %d is not above the key's floor %d: the clock is behind the floor's time", id, k.floor), time.Second}
			}
		}
	}
	return nil
}

// Stats exposes how far the key's IDs run ahead of the wall clock, how much
// room the recorded horizon leaves, and how many requests a clock rollback
// refused. Ahead and horizon are left out while the node holds no lease
// (or has recorded no horizon): a missing series, not a misleading zero.
func (k *snowflakeKey) Stats() []server.Stat {
	st := []server.Stat{{Name: "clock_rollback_total", Help: "Requests for a snowflake key refused because the wall clock ran behind its last ID by more than the generator waits out.",
		Value: float64(k.rollbacks.Load()), Counter: true},
		{Name: "layout_end_timestamp_seconds", Help: "Unix time at which a snowflake key's layout runs out (its epoch plus the time field's capacity): no ID can be issued from then on.",
			Value: float64(k.layout.End().Unix())}}
	if _, _, ok := k.n.WorkerID(); !ok {
		return st
	}
	st = append(st, server.Stat{Name: "snowflake_ahead_seconds", Help: "How far the time stamped on a snowflake key's last ID runs ahead of the wall clock (borrowed ticks, bridged rollback).",
		Value: k.n.Ahead().Seconds()})
	if h := k.n.Horizon(); !h.IsZero() {
		st = append(st, server.Stat{Name: "snowflake_horizon_seconds", Help: "Time left until a snowflake key's generator reaches the horizon recorded in its lease. It extends the horizon before stamping past it, on demand: an idle key's value falls below zero and is harmless.",
			Value: h.Sub(k.clk.Now()).Seconds()})
	}
	return st
}

func snowflakeErr(err error) error {
	var cb *snowflake.ClockBehindError
	if errors.As(err, &cb) {
		return &retryable{err, cb.Behind}
	}
	return &retryable{err, time.Second}
}

func (k *snowflakeKey) Decode(id string) (server.Decoded, error) {
	return decodeSnowflake(k.layout, k.layout.Name(), id)
}

// Ready reports whether the key can issue now (see nodeResource.Ready).
func (k *snowflakeKey) Ready(ctx context.Context) error { return k.res.Ready(ctx) }

// Close does nothing: the node is shared and closed with the server.
func (k *snowflakeKey) Close(ctx context.Context) error { return nil }

func snowflakeLayout(name string, l snowflake.Layout) server.Layout {
	return server.Layout{Name: name, Decode: func(id string) (server.Decoded, error) { return decodeSnowflake(l, name, id) }}
}

func decodeSnowflake(l snowflake.Layout, name, id string) (server.Decoded, error) {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return server.Decoded{}, fmt.Errorf("strategies: id %q is not a decimal 64-bit integer", id)
	}
	p, err := snowflake.Decode(l, n)
	if err != nil {
		return server.Decoded{}, err
	}
	d := server.Decoded{Layout: name, Time: p.Time, Sequence: p.Sequence}
	wf := workerField(l)
	for f, v := range p.Node {
		if f == wf {
			d.Node = v
			continue
		}
		if d.Extra == nil {
			d.Extra = map[string]string{}
		}
		d.Extra[f] = strconv.FormatInt(v, 10)
	}
	return d, nil
}

// regionSlice gives a snowflake key its region's part of the layout when
// regions split the ID space: the region index in a node field (the
// layout's "datacenter" field, or the one options.region_field names), or
// else a slice of the worker IDs: region i of n takes worker IDs
// [i*W/n, (i+1)*W/n) of the W the key may use (workerLimit, or the whole
// field). It returns the field that carries the region ("" for a worker
// slice, or without regions), the slice (size 0: none) and refuses a
// layout without room for region.count regions.
func regionSlice(k server.KeyConfig, cfg *server.Config, l snowflake.Layout, wf string, workerLimit int64) (field string, base, size int64, ps []server.Problem) {
	r := cfg.RegionSpec()
	name, explicit := k.Options["region_field"]
	var rf *snowflake.Field
	for _, f := range l.NodeFields() {
		if f.Name == wf {
			continue
		}
		if (explicit && f.Name == name) || (!explicit && f.Name == "datacenter") {
			rf = &f
		}
	}
	if explicit && rf == nil {
		var names []string
		for _, f := range l.NodeFields() {
			if f.Name != wf {
				names = append(names, f.Name)
			}
		}
		return "", 0, 0, []server.Problem{{Field: "options.region_field", Value: name,
			Message: fmt.Sprintf("layout %s has no node field %q besides the worker field %q to carry the region (its other node fields: %v)", l.Name(), name, wf, names)}}
	}
	if r.Single() {
		return "", 0, 0, nil
	}
	if rf != nil {
		if values := int64(1) << rf.Bits; values < int64(r.Count) {
			return "", 0, 0, []server.Problem{{Field: "layout", Value: l.String(),
				Message: fmt.Sprintf("layout %s's field %q has %d values, fewer than region.count %d: give the region a wider field, or set options.region_field", l.Name(), rf.Name, values, r.Count)}}
		}
		return rf.Name, 0, 0, nil
	}
	var wbits int
	for _, f := range l.NodeFields() {
		if f.Name == wf {
			wbits = f.Bits
		}
	}
	w := int64(1) << wbits
	if workerLimit > 0 && workerLimit < w {
		w = workerLimit
	}
	lo, hi := int64(r.Index)*w/int64(r.Count), int64(r.Index+1)*w/int64(r.Count)
	if w/int64(r.Count) < 1 {
		return "", 0, 0, []server.Problem{{Field: "layout", Value: l.String(),
			Message: fmt.Sprintf("layout %s has no datacenter field and %d worker IDs, fewer than region.count %d: regions split the worker IDs, and each needs one at least (give the layout a datacenter field, or set options.region_field)", l.Name(), w, r.Count)}}
	}
	return "", lo, hi - lo, nil
}

// SnowflakeRegion says how a snowflake key of cfg on layout l carries its
// region, exactly as the server builds the key: in the node field it
// returns (the region index is that field's value), or, with split, as
// the region's slice [base, base+size) of the worker IDs (the coordinator
// leases 0..size-1 and the node adds base). Neither without regions; ok
// is false when the key is refused (no room for the regions, a bad
// region_field or worker_limit).
func SnowflakeRegion(k server.KeyConfig, cfg *server.Config, l snowflake.Layout) (field string, base, size int64, split, ok bool) {
	wf := workerField(l)
	limit, p := intOption(k, "worker_limit", 0, 0, 1<<40)
	if wf == "" || p != nil {
		return "", 0, 0, false, false
	}
	field, base, size, ps := regionSlice(k, cfg, l, wf, limit)
	return field, base, size, size > 0, len(ps) == 0
}

// WorkerField is the node field of layout l that a worker lease fills:
// "worker" when the layout has one, else its only node field; "" when
// neither (such a layout is refused for snowflake keys).
func WorkerField(l snowflake.Layout) string { return workerField(l) }
