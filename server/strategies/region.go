package strategies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/idmint/idmint/region"
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/sqldb"
	"github.com/idmint/idmint/witness"
)

// identityRecord is the record name a region's identity is kept under,
// beside the coordinator's worker IDs (and in a separate witness).
const identityRecord = "region"

// regionOpenTimeout bounds reaching a coordinator, witness or registry to
// check the region.
const regionOpenTimeout = 5 * time.Second

// regionJSON is how a region is recorded.
type regionJSON struct {
	Name  string `json:"name"`
	Index int    `json:"index"`
	Count int    `json:"count"`
}

func encodeRegion(r region.Region) string {
	b, _ := json.Marshal(regionJSON{r.Name, r.Index, r.Count})
	return string(b)
}

func decodeRegion(s string) (region.Region, error) {
	var j regionJSON
	if err := json.Unmarshal([]byte(s), &j); err != nil {
		return region.Region{}, fmt.Errorf("region: recorded identity %q does not parse: %w", s, err)
	}
	return region.Region{Name: j.Name, Index: j.Index, Count: j.Count}, nil
}

// recordPlace is one place a region's identity is recorded.
type recordPlace struct {
	rec   witness.Recorder
	what  string // "coordinator etcd://…", "witness postgres://…", "data directory /srv"
	close func() error
}

// openRecordPlace opens the records of a coordinator or witness URL: etcd,
// ZooKeeper and SQL databases keep them beside their own state; any other
// coordinator (file, static, ip, mac, k8s) keeps them in the data
// directory.
func openRecordPlace(ctx context.Context, role, u, dataDir string) (recordPlace, error) {
	scheme, _, _ := strings.Cut(u, "://")
	switch strings.ToLower(scheme) {
	case "etcd", "zk", "zookeeper", "sqlite", "sqlite3", "postgres", "postgresql", "mysql":
		w, err := witness.Open(ctx, u, regionOpenTimeout)
		if err != nil {
			return recordPlace{what: role + " " + sqldb.Redact(u)}, err
		}
		rec, ok := w.(witness.Recorder)
		if !ok {
			w.Close()
			return recordPlace{}, fmt.Errorf("region: %s %s keeps no records", role, sqldb.Redact(u))
		}
		return recordPlace{rec: rec, what: role + " " + sqldb.Redact(u), close: w.Close}, nil
	}
	return recordPlace{rec: witness.NewDir(dataDir), what: "data directory " + dataDir, close: func() error { return nil }}, nil
}

// regionStart is the check every start runs (server.Registry.OnStart):
// the configured region against what the coordinator (and a separate
// witness) records, then the registry's claim.
func regionStart(ctx context.Context, env *server.Env) error {
	cfg := env.Config
	r := cfg.RegionSpec()
	if r.Name == "" || cfg.Region.Registry == "" {
		return checkIdentity(ctx, env, r, false)
	}
	// Compare first, claim, then record: a start the registry refuses
	// leaves no identity behind, and one the identity refuses no claim.
	if err := checkIdentity(ctx, env, r, true); err != nil {
		return err
	}
	if err := claimRegion(ctx, env, r, cfg.Region.Registry); err != nil {
		return err
	}
	return checkIdentity(ctx, env, r, false)
}

// checkIdentity records the region where it runs on its first start and
// refuses a start whose configured region differs from the record. With
// compareOnly it records nothing.
func checkIdentity(ctx context.Context, env *server.Env, r region.Region, compareOnly bool) error {
	cfg := env.Config
	urls := [][2]string{{"coordinator", cfg.Coordinator}}
	if w := cfg.Witness; w != "" && w != "none" && w != cfg.Coordinator {
		urls = append(urls, [2]string{"witness", w})
	}
	cache := witness.NewDir(cfg.DataDir)
	for _, u := range urls {
		p, err := openRecordPlace(ctx, u[0], u[1], cfg.DataDir)
		if err == nil {
			err = checkPlace(ctx, p, r, compareOnly)
			p.close()
			if err == nil {
				continue
			}
			var refused *regionRefusal
			if errors.As(err, &refused) {
				return err
			}
		}
		// The place is out of reach.
		if r.Name == "" || compareOnly {
			if !compareOnly {
				env.Logger.Warn("region: cannot check that no region is recorded", "where", p.what, "err", err)
			}
			continue
		}
		cached, ok, cerr := cache.Lookup(ctx, identityRecord)
		if cerr == nil && ok && cached == encodeRegion(r) {
			env.Logger.Warn("region: cannot reach where the region is recorded; serving as the data directory's copy of it says", "where", p.what, "region", r.String(), "err", err)
			continue
		}
		return fmt.Errorf("region: cannot record or check this node's region %s in its %s (and its data directory holds no copy of it): %w", r, p.what, err)
	}
	if r.Name != "" && !compareOnly {
		// The data directory's copy, for starts while the coordinator
		// is out of reach; a node an operator moved to another region
		// (its coordinator agreed above) takes the new one.
		if v, ok, err := cache.Lookup(ctx, identityRecord); err == nil && ok && v != encodeRegion(r) {
			if old, err := decodeRegion(v); err == nil {
				env.Logger.Warn("region: this node was moved to another region", "from", old.String(), "to", r.String())
			}
			_ = cache.Forget(ctx, identityRecord)
		}
		if _, err := cache.Record(ctx, identityRecord, encodeRegion(r)); err != nil {
			return fmt.Errorf("region: keep a copy of the region in the data directory: %w", err)
		}
	}
	return nil
}

// regionRefusal is a start refused for a region that differs from what
// is recorded (not a place out of reach).
type regionRefusal struct{ msg string }

func (e *regionRefusal) Error() string { return e.msg }

// checkPlace compares (and on a first start records) the region at one
// place.
func checkPlace(ctx context.Context, p recordPlace, r region.Region, compareOnly bool) error {
	if r.Name != "" && compareOnly {
		v, ok, err := p.rec.Lookup(ctx, identityRecord)
		if err != nil || !ok {
			return err
		}
		return differs(p, r, v)
	}
	if r.Name == "" {
		v, ok, err := p.rec.Lookup(ctx, identityRecord)
		if err != nil || !ok {
			return err
		}
		rec, err := decodeRegion(v)
		if err != nil {
			return &regionRefusal{err.Error()}
		}
		return &regionRefusal{fmt.Sprintf("region: this node's config has no region: section, but its %s records %s; "+
			"a node of a region must say so: add region: {name: %s, index: %d, count: %d} to its config", p.what, rec, rec.Name, rec.Index, rec.Count)}
	}
	v, err := p.rec.Record(ctx, identityRecord, encodeRegion(r))
	if err != nil {
		return err
	}
	return differs(p, r, v)
}

// differs refuses a region r that differs from the record v at p.
func differs(p recordPlace, r region.Region, v string) error {
	if v == encodeRegion(r) {
		return nil
	}
	rec, err := decodeRegion(v)
	if err != nil {
		return &regionRefusal{err.Error()}
	}
	return &regionRefusal{fmt.Sprintf("region: this node is configured as %s, but its %s records %s; "+
		"a node belongs to the region whose coordinator it uses: correct region: in its config, or point it at its own region's coordinator", r, p.what, rec)}
}

// claimFile is the data directory's copy of the region's claim in the
// registry: a start while the registry is down serves on it.
const claimFile = "region-claim.json"

type claimJSON struct {
	Registry string `json:"registry"`
	regionJSON
}

// claimRegion claims the region's index in the registry (once; later
// starts find their own claim), or refuses a start whose index another
// region holds, whose name holds another index, or whose count differs.
func claimRegion(ctx context.Context, env *server.Env, r region.Region, registry string) error {
	shown := sqldb.Redact(registry)
	path := filepath.Join(env.Config.DataDir, claimFile)
	want := claimJSON{Registry: shown, regionJSON: regionJSON{r.Name, r.Index, r.Count}}
	w, err := witness.Open(ctx, registry, regionOpenTimeout)
	if err != nil {
		if b, rerr := os.ReadFile(path); rerr == nil {
			var got claimJSON
			if json.Unmarshal(b, &got) == nil && got == want {
				env.Logger.Warn("region: the registry is out of reach; serving on the claim cached in the data directory", "registry", shown, "region", r.String(), "cache", path, "err", err)
				return nil
			}
		}
		return fmt.Errorf("region.registry: cannot reach %s to claim index %d for region %s, and the data directory holds no claim of it (%s); "+
			"a region's first start needs its registry: %w", shown, r.Index, r.Name, path, err)
	}
	defer w.Close()
	rec, ok := w.(witness.Recorder)
	if !ok {
		return fmt.Errorf("region.registry: %s keeps no records", shown)
	}
	if err := ClaimIndex(ctx, rec, r); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(want, "", "  ")
	if err := writeFileSync(path, append(b, '\n')); err != nil {
		return fmt.Errorf("region: cache the registry's claim in %s: %w", path, err)
	}
	env.Logger.Info("region: index claimed in the registry", "registry", shown, "region", r.String())
	return nil
}

// ClaimIndex claims r's index and name in a registry's records, or says
// which region holds them. It is idempotent for the same region.
func ClaimIndex(ctx context.Context, rec witness.Recorder, r region.Region) error {
	where := rec.String()
	c, err := rec.Record(ctx, region.CountRecord, strconv.Itoa(r.Count))
	if err != nil {
		return fmt.Errorf("region.registry: %w", err)
	}
	if c != strconv.Itoa(r.Count) {
		return fmt.Errorf("region.count: this region (%s) says %d regions, but the registry %s records %s: every region must give the same count", r, r.Count, where, c)
	}
	holder, err := rec.Record(ctx, region.IndexRecord(r.Index), r.Name)
	if err != nil {
		return fmt.Errorf("region.registry: %w", err)
	}
	if holder != r.Name {
		return fmt.Errorf("region.index: index %d is held by region %s in the registry %s, so region %s cannot take it: "+
			"give %s a free index, or retire %s first (idmint region release)", r.Index, holder, where, r.Name, r.Name, holder)
	}
	idx, err := rec.Record(ctx, region.NameRecord(r.Name), strconv.Itoa(r.Index))
	if err != nil {
		return fmt.Errorf("region.registry: %w", err)
	}
	if idx != strconv.Itoa(r.Index) {
		// The index was free and this name holds another one: give the
		// index back so that its rightful region can claim it.
		_ = rec.Forget(ctx, region.IndexRecord(r.Index))
		return fmt.Errorf("region.index: region %s holds index %s in the registry %s, not %d: a region keeps its index for the life of the keys",
			r.Name, idx, where, r.Index)
	}
	return nil
}

// ReleaseRegion retires a region from a registry's records: its index and
// name become free. It fails when the registry does not know the name.
func ReleaseRegion(ctx context.Context, rec witness.Recorder, name string) (index int, err error) {
	v, ok, err := rec.Lookup(ctx, region.NameRecord(name))
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("region: the registry %s holds no region called %q", rec.String(), name)
	}
	index, err = strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("region: the registry %s records index %q for region %q", rec.String(), v, name)
	}
	if holder, ok, err := rec.Lookup(ctx, region.IndexRecord(index)); err != nil {
		return 0, err
	} else if ok && holder == name {
		if err := rec.Forget(ctx, region.IndexRecord(index)); err != nil {
			return 0, err
		}
	}
	return index, rec.Forget(ctx, region.NameRecord(name))
}

func writeFileSync(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// regionLine maps the counter values of a region's own store (segment,
// ticket, redis and monotonic counter keys) into the region's share of
// the number line (region.Line): an ID is Base|n, and a counter past the
// share's Limit is refused rather than let into another region's share.
// Without a region (or with one region) it is off and changes nothing.
type regionLine struct {
	on   bool
	line region.Line
	r    region.Region
	key  string
}

func newRegionLine(cfg *server.Config, key string) regionLine {
	r := cfg.RegionSpec()
	if r.Single() {
		return regionLine{}
	}
	return regionLine{on: true, line: r.Line(math.MaxInt64), r: r, key: key}
}

// ErrRegionExhausted: a region's store counted past the region's share.
var ErrRegionExhausted = errors.New("region: the region's share of the ID space is used up")

func (l regionLine) exhausted(n int64) error {
	return fmt.Errorf("%w: key %q: region %s issues counter values 0 to %d only (its store is at %d); "+
		"a larger one would be another region's ID", ErrRegionExhausted, l.key, l.r, l.line.Limit, n)
}

// apply maps dst in place: one compare and one OR per ID.
func (l regionLine) apply(dst []int64) error {
	if !l.on {
		return nil
	}
	base, limit := l.line.Base, l.line.Limit
	for i, n := range dst {
		if uint64(n) > uint64(limit) {
			return l.exhausted(n)
		}
		dst[i] = base | n
	}
	return nil
}

// applyRange maps a contiguous range [first, first+n).
func (l regionLine) applyRange(first, n int64) (int64, error) {
	if !l.on {
		return first, nil
	}
	if first < 0 || first > l.line.Limit || n > l.line.Limit-first+1 {
		return 0, l.exhausted(first + n - 1)
	}
	return l.line.Base | first, nil
}
