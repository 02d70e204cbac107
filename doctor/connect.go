package doctor

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/idmint/idmint/monotonic"
	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/segment/redisstore"
	"github.com/idmint/idmint/segment/sqlstore"
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/sqldb"
	"github.com/idmint/idmint/witness"
	"github.com/idmint/idmint/worker"
)

// ConnectOptions configure Connect.
type ConnectOptions struct {
	// Timeout bounds each connection and each request. Default 5 s.
	Timeout time.Duration
	// Now reads this machine's clock (clock offsets). Default time.Now.
	Now func() time.Time
}

func (o ConnectOptions) timeout() time.Duration {
	if o.Timeout <= 0 {
		return 5 * time.Second
	}
	return o.Timeout
}

func (o ConnectOptions) now() time.Time {
	if o.Now == nil {
		return time.Now()
	}
	return o.Now()
}

// Connect runs the checks that need the live servers of each site: a
// segment store or a monotonic key's etcd bound below its witness's mark, this machine's clock against a
// SQL coordinator's, the coordinator's free worker IDs, and a region's
// claims in its registry. It reads and changes nothing but what opening a
// coordinator or a SQL registry creates (its tables or directory, as
// `idmint workers` and a region's first start do). A server it cannot reach is a
// finding (connect.unreachable).
func Connect(ctx context.Context, sites []Site, o ConnectOptions) []Finding {
	var mu sync.Mutex
	var fs []Finding
	var wg sync.WaitGroup
	for _, s := range sites {
		site := ""
		if len(sites) > 1 {
			site = s.Name
		}
		for _, c := range []func(context.Context, *server.Config, ConnectOptions) []Finding{checkBelowWitness, checkMonotonicBelowWitness, checkClockOffset, checkWorkersFree, checkRegionClaims} {
			wg.Go(func() {
				got := c(ctx, s.Config, o)
				mu.Lock()
				defer mu.Unlock()
				for _, f := range got {
					f.Site = site
					fs = append(fs, f)
				}
			})
		}
	}
	wg.Wait()
	Sort(fs)
	return fs
}

// withWitness opens the witness (or region registry) at url under the
// connect deadline, runs check on it and closes it; one that cannot be
// opened is a single connect.unreachable finding naming what it is.
func withWitness(ctx context.Context, o ConnectOptions, what, url string, check func(ctx context.Context, w witness.Witness) []Finding) []Finding {
	cctx, cancel := context.WithTimeout(ctx, o.timeout())
	defer cancel()
	w, err := witness.Open(cctx, url, o.timeout())
	if err != nil {
		return []Finding{unreachable(what, url, err)}
	}
	defer w.Close()
	return check(cctx, w)
}

func unreachable(what, u string, err error) Finding {
	return Finding{Check: "connect.unreachable", Severity: Error,
		Promise: "the checks that need this server could not run, and a node needs it to serve",
		Found:   fmt.Sprintf("%s %s: %s", what, sqldb.Redact(u), strings.Join(strings.Fields(err.Error()), " ")),
		Fix:     "check the address, the credentials and the network path from this machine (idmint serve --check --connect tests each)"}
}

// checkBelowWitness: store.below_witness. Each segment key on a shared
// store with a cluster witness: the store's max_id must be at or above
// the witness's mark, which every segment served was claimed under.
func checkBelowWitness(ctx context.Context, cfg *server.Config, o ConnectOptions) []Finding {
	cw := clusterWitness(cfg)
	if cw == "" {
		return nil
	}
	byStore := map[string][]string{}
	for _, name := range keyNames(cfg) {
		k := cfg.Keys[name]
		if k.Strategy != "segment" {
			continue
		}
		if u := cfg.Stores[k.Store]; !fileStore(u) && u != "" {
			byStore[k.Store] = append(byStore[k.Store], name)
		}
	}
	if len(byStore) == 0 {
		return nil
	}
	return withWitness(ctx, o, "witness", cw, func(cctx context.Context, w witness.Witness) []Finding {
		var fs []Finding
		for _, store := range keyNamesOf(byStore) {
			u := cfg.Stores[store]
			st, err := openStore(cctx, u)
			if err != nil {
				fs = append(fs, unreachable("store "+store, u, err))
				continue
			}
			for _, name := range byStore[store] {
				mark, err := w.Mark(cctx, segment.WitnessSpace(name, 1, 0))
				if err != nil {
					fs = append(fs, unreachable("witness", cw, err))
					break
				}
				info, err := st.Get(cctx, name)
				switch {
				case errors.Is(err, segment.ErrUnknownKey):
					if mark > 0 {
						fs = append(fs, belowWitness(name, store, u, cw, "has no row", mark))
					}
				case err != nil:
					fs = append(fs, unreachable("store "+store, u, err))
				case info.MaxID < mark:
					fs = append(fs, belowWitness(name, store, u, cw, fmt.Sprintf("has max_id %d", info.MaxID), mark))
				}
			}
			st.Close()
		}
		return fs
	})
}

func belowWitness(name, store, u, cw, has string, mark int64) Finding {
	return Finding{Check: "store.below_witness", Severity: Error, Key: name,
		Promise: fmt.Sprintf("IDs of key %q below %d were issued already: the store went back (a failover to a lagging replica, a restored backup, a hand edit), and only the witness remembers", name, mark),
		Found:   fmt.Sprintf("store %q (%s) %s for key %q, below the witness's mark %d (%s)", store, sqldb.Redact(u), has, name, mark, sqldb.Redact(cw)),
		Fix:     "nodes raise the store above the mark at their next segment (idmint_segment_store_went_back_total counts it); find out why the store went back, and never serve the key from a store without its witness"}
}

// checkMonotonicBelowWitness: store.below_witness for monotonic keys
// whose bound lives in etcd. A leader persists the bound in etcd before it
// raises the witness's mark to it, so a bound below the mark is an etcd
// that went back (restored from a snapshot).
func checkMonotonicBelowWitness(ctx context.Context, cfg *server.Config, o ConnectOptions) []Finding {
	cw := clusterWitness(cfg)
	if cw == "" {
		return nil
	}
	type place struct {
		hosts  []string
		prefix string
		own    bool // options.etcd, not the coordinator's
		keys   []string
	}
	places := map[string]*place{}
	for _, name := range keyNames(cfg) {
		k := cfg.Keys[name]
		if k.Strategy != "monotonic" {
			continue
		}
		hosts, prefix, err := monotonicEtcd(cfg, k)
		if err != nil || len(hosts) == 0 {
			continue
		}
		_, own := k.Options["etcd"]
		id := strings.Join(hosts, ",") + prefix
		if places[id] == nil {
			places[id] = &place{hosts: hosts, prefix: prefix, own: own}
		}
		places[id].keys = append(places[id].keys, name)
	}
	if len(places) == 0 {
		return nil
	}
	return withWitness(ctx, o, "witness", cw, func(cctx context.Context, w witness.Witness) []Finding {
		var fs []Finding
		for _, id := range keyNamesOf(places) {
			p := places[id]
			shown := "etcd://" + strings.Join(p.hosts, ",") + p.prefix
			cc := clientv3.Config{Endpoints: p.hosts, DialTimeout: o.timeout(), Logger: zap.NewNop()}
			if !p.own {
				var err error
				if cc, err = worker.EtcdClientConfig(cfg.Coordinator, o.timeout()); err != nil {
					fs = append(fs, unreachable("etcd", shown, err))
					continue
				}
			}
			cli, err := clientv3.New(cc)
			if err != nil {
				fs = append(fs, unreachable("etcd", shown, err))
				continue
			}
			ls, err := monotonic.Leaders(cctx, cli, p.prefix)
			cli.Close()
			if err != nil {
				fs = append(fs, unreachable("etcd", shown, err))
				continue
			}
			bounds := map[string]int64{}
			seen := map[string]bool{}
			for _, l := range ls {
				bounds[l.Key], seen[l.Key] = l.Bound, true
			}
			for _, name := range p.keys {
				mark, err := w.Mark(cctx, monotonic.WitnessSpace(name))
				if err != nil {
					fs = append(fs, unreachable("witness", cw, err))
					break
				}
				if b := bounds[name]; b < mark {
					has := fmt.Sprintf("has the bound %d", b)
					if !seen[name] {
						has = "has no bound"
					}
					fs = append(fs, Finding{Check: "store.below_witness", Severity: Error, Key: name,
						Promise: fmt.Sprintf("IDs of monotonic key %q up to %d were issued already: etcd went back (restored from a snapshot), and only the witness remembers", name, mark),
						Found:   fmt.Sprintf("etcd %s %s for key %q, below the witness's mark %d (%s)", shown, has, name, mark, sqldb.Redact(cw)),
						Fix:     "the next leader starts above the mark (it reads the witness); find out why etcd went back, and keep the witness outside that etcd"})
				}
			}
		}
		return fs
	})
}

// segmentReader is what the check reads of a store.
type segmentReader interface {
	Get(ctx context.Context, key string) (segment.KeyInfo, error)
	Close() error
}

// openStore opens a store to read its rows, creating nothing (no
// migration).
func openStore(ctx context.Context, u string) (segmentReader, error) {
	if strings.HasPrefix(u, "redis://") || strings.HasPrefix(u, "rediss://") {
		return redisstore.Open(ctx, u)
	}
	db, err := sqldb.Open(ctx, u)
	if err != nil {
		return nil, err
	}
	return sqlstore.New(db), nil
}

func keyNamesOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// leaseMargin is how long before its lease's end a node stops issuing,
// as a coordinator URL sets it (margin=, or ttl/5 of ttl=, default
// worker.DefaultTTL/5).
func leaseMargin(coord string) time.Duration {
	ttl := worker.DefaultTTL
	_, query, _ := strings.Cut(coord, "?")
	q, _ := url.ParseQuery(query)
	if d, err := time.ParseDuration(q.Get("ttl")); err == nil && d > 0 {
		ttl = d
	}
	if d, err := time.ParseDuration(q.Get("margin")); err == nil && d > 0 {
		return d
	}
	return ttl / 5
}

// clockQuery reads a database's clock in ms since the Unix epoch.
func clockQuery(d sqldb.Dialect) string {
	if d == sqldb.MySQL {
		return "SELECT CAST(FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) AS SIGNED)"
	}
	return "SELECT CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT)"
}

// Offset is a clock's offset from this machine's as measured over one
// round trip: the true offset lies within Offset ± RTT/2.
type Offset struct {
	Offset, RTT time.Duration
}

// MeasureSQL reads a PostgreSQL or MySQL server's clock a few times and
// returns the offset of the reading with the shortest round trip.
func MeasureSQL(ctx context.Context, db *sqldb.DB, now func() time.Time) (Offset, error) {
	best := Offset{RTT: -1}
	for i := 0; i < 5; i++ {
		var ms int64
		t0 := now()
		if err := db.QueryRowContext(ctx, clockQuery(db.Dialect)).Scan(&ms); err != nil {
			return Offset{}, err
		}
		t1 := now()
		rtt := t1.Sub(t0)
		mid := t0.Add(rtt / 2)
		off := time.UnixMilli(ms).Sub(mid)
		if best.RTT < 0 || rtt < best.RTT {
			best = Offset{Offset: off, RTT: rtt}
		}
	}
	return best, nil
}

// checkClockOffset: clock.offset, for a PostgreSQL or MySQL coordinator
// (its clock times the leases: a node whose clock is off by more than the
// lease margin misjudges how long its lease lasts).
func checkClockOffset(ctx context.Context, cfg *server.Config, o ConnectOptions) []Finding {
	kind, _ := cfg.ClusterCoordinator()
	switch kind {
	case "postgres", "postgresql", "mysql":
	default:
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, o.timeout())
	defer cancel()
	db, err := sqldb.Open(cctx, coordinatorDB(cfg.Coordinator))
	if err != nil {
		return []Finding{unreachable("coordinator", cfg.Coordinator, err)}
	}
	defer db.Close()
	m, err := MeasureSQL(cctx, db, o.now)
	if err != nil {
		return []Finding{unreachable("coordinator", cfg.Coordinator, err)}
	}
	return offsetFinding(m, leaseMargin(cfg.Coordinator), cfg.Coordinator)
}

// offsetFinding judges a measured offset against the lease margin: an
// error when the offset surely exceeds it (beyond the round trip's
// uncertainty), a warning when it may.
func offsetFinding(m Offset, margin time.Duration, coord string) []Finding {
	abs := m.Offset.Abs()
	half := m.RTT / 2
	var sev Severity
	switch {
	case abs-half > margin:
		sev = Error
	case abs+half > margin:
		sev = Warning
	default:
		return nil
	}
	return []Finding{{Check: "clock.offset", Severity: sev,
		Promise: "a node stops issuing before its worker-ID lease ends, by the lease margin: with its clock off by more than that, it may issue after another node took its worker ID",
		Found:   fmt.Sprintf("this machine's clock is %v from the coordinator's (%s), ± %v (half the round trip); the lease margin is %v", m.Offset.Round(time.Millisecond), sqldb.Redact(coord), half.Round(time.Microsecond), margin),
		Fix:     "run NTP or chrony on every node and the database server; or raise margin= (and ttl=) on the coordinator URL above the offset you cannot avoid"}}
}

// coordinatorDB is the database URL of a SQL coordinator, without the
// query parameters the worker package reads (ttl, margin, timeout, holder).
func coordinatorDB(coord string) string {
	base, query, ok := strings.Cut(coord, "?")
	if !ok {
		return coord
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return coord
	}
	for _, p := range []string{"ttl", "margin", "timeout", "holder"} {
		q.Del(p)
	}
	if len(q) == 0 {
		return base
	}
	return base + "?" + q.Encode()
}

// FreeWarn: a pool with fewer free worker IDs than this fraction is a
// warning.
const FreeWarn = 0.10

// HorizonLead is how far past its clock a node records its horizon (the
// snowflake generator's default lead, which serve uses).
const HorizonLead = 3 * time.Second

// checkWorkersFree: workers.exhausted and clock.node_ahead. The
// coordinator's live leases against each snowflake key's pool, and their
// horizons against this machine's clock: a node records its horizon
// HorizonLead past its own clock, so a horizon further ahead of this
// machine's clock than that, by more than the lease margin, was recorded
// by a clock that far ahead (etcd and ZooKeeper keep no clock of their
// own to compare with).
func checkWorkersFree(ctx context.Context, cfg *server.Config, o ConnectOptions) []Finding {
	kind, cluster := cfg.ClusterCoordinator()
	if !cluster || kind == "k8s" {
		return nil
	}
	type pool struct {
		lo, hi int64
		keys   []string
	}
	pools := map[[2]int64]*pool{}
	for _, sk := range snowflakeKeys(cfg) {
		name, k, l := sk.name, sk.k, sk.l
		if lo, hi, ok := workerPool(cfg, k, l); ok {
			p := pools[[2]int64{lo, hi}]
			if p == nil {
				p = &pool{lo: lo, hi: hi}
				pools[[2]int64{lo, hi}] = p
			}
			p.keys = append(p.keys, name)
		}
	}
	if len(pools) == 0 {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, o.timeout())
	defer cancel()
	a, err := worker.Open(cctx, cfg.Coordinator, worker.WithTimeout(o.timeout()))
	if err != nil {
		return []Finding{unreachable("coordinator", cfg.Coordinator, err)}
	}
	defer a.Close()
	hs, err := a.List(cctx)
	if err != nil {
		return []Finding{unreachable("coordinator", cfg.Coordinator, err)}
	}
	now := o.now()
	var fs []Finding
	margin := leaseMargin(cfg.Coordinator)
	for _, h := range hs {
		if !h.Live || h.Horizon.IsZero() {
			continue
		}
		if ahead := h.Horizon.Sub(now) - HorizonLead; ahead > margin {
			fs = append(fs, Finding{Check: "clock.node_ahead", Severity: Error,
				Promise: "a node stops issuing before its worker-ID lease ends, by the lease margin: a node whose clock runs ahead by more than that stamps IDs another node may stamp again once its clock gets there",
				Found: fmt.Sprintf("worker ID %d's live holder %s recorded a horizon of %s, %v ahead of this machine's clock beyond the %v lead; the lease margin is %v",
					h.ID, h.Holder, h.Horizon.UTC().Format(time.RFC3339Nano), ahead.Round(time.Millisecond), HorizonLead, margin),
				Fix: "run NTP or chrony on every node (and on this machine: the comparison is with its clock); idmint workers lists the holders"})
		}
	}
	for _, p := range sortedPools(pools) {
		size := p.hi - p.lo + 1
		live := int64(0)
		for _, h := range hs {
			if h.Live && h.ID >= p.lo && h.ID <= p.hi {
				live++
			}
		}
		free := size - live
		var sev Severity
		switch {
		case free <= 0:
			sev = Error
		case float64(free) < FreeWarn*float64(size):
			sev = Warning
		default:
			continue
		}
		fs = append(fs, Finding{Check: "workers.exhausted", Severity: sev, Key: p.keys[0],
			Promise: fmt.Sprintf("a node starting (or replacing one) gets a worker ID for key(s) %s: with none free it serves no snowflake IDs", shownList(p.keys, 5)),
			Found:   fmt.Sprintf("%d of %d worker IDs (%d..%d) are held by live leases in %s; %d free", live, size, p.lo, p.hi, sqldb.Redact(cfg.Coordinator), free),
			Fix:     "stop nodes that should not run (idmint workers lists the holders), raise options.worker_limit, or move to a layout with more worker bits"})
	}
	return fs
}

// sortedPools orders pools by their first worker ID.
func sortedPools[P interface{ *T }, T any](m map[[2]int64]P) []P {
	ks := make([][2]int64, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i][0] < ks[j][0] || ks[i][0] == ks[j][0] && ks[i][1] < ks[j][1] })
	out := make([]P, 0, len(ks))
	for _, k := range ks {
		out = append(out, m[k])
	}
	return out
}
