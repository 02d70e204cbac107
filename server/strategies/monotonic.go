package strategies

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/monotonic"
	"github.com/idmint/idmint/region"
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/witness"
	"github.com/idmint/idmint/worker"
)

// monotonicStrategy serves keys strictly increasing across the cluster in
// real-time order (U8): package monotonic's Etcd source when the node has
// an etcd (the coordinator or options.etcd), its File source otherwise.
func monotonicStrategy() server.Strategy {
	return typed(server.Strategy{
		Name: "monotonic",
		Summary: "strictly increasing across every node in real-time order: an etcd-elected leader issues from memory under a " +
			"persisted, fenced bound; followers forward (options: form: counter (default) or timestamp (Unix ms<<18 | logical); " +
			"etcd: host:port[,host:port] (default: the coordinator's, when it is etcd://; none: single node, bound in the data directory); " +
			"ttl: leadership lease in whole seconds, default 5; window: counter headroom, default 100000; time_window: timestamp headroom, default 3s; " +
			"peer_listen: the internal forwarding listener, default 127.0.0.1:0, non-loopback only with admin_token, which authenticates forwarded requests; " +
			"advertise: the address peers reach it at, default its own)",
	}, parseMonotonic, buildMonotonic)
}

var monotonicOptions = []string{"form", "etcd", "ttl", "window", "time_window", "peer_listen", "advertise", "scope", "home_region"}

// monotonicOpts is a monotonic key's options, parsed once by
// parseMonotonic for both the check and the build.
type monotonicOpts struct {
	form       monotonic.Form
	ttl        int64
	window     int64
	timeWindow time.Duration
}

// checkMonotonic reports the problems of a monotonic key's options.
func checkMonotonic(k server.KeyConfig, cfg *server.Config) []server.Problem {
	_, ps := parseMonotonic(k, cfg)
	return ps
}

func parseMonotonic(k server.KeyConfig, cfg *server.Config) (monotonicOpts, []server.Problem) {
	ps := unknownOptions(k, monotonicOptions...)
	o := monotonicOpts{timeWindow: monotonic.DefaultTimeWindow}
	var err error
	if o.form, err = monotonic.ParseForm(k.Options["form"]); err != nil {
		ps = append(ps, server.Problem{Field: "options.form", Value: k.Options["form"], Message: "must be counter or timestamp"})
	}
	var p *server.Problem
	if o.ttl, p = intOption(k, "ttl", 5, 2, 3600); p != nil {
		ps = append(ps, *p)
	}
	if o.window, p = intOption(k, "window", monotonic.DefaultWindow, 1, 1<<40); p != nil {
		ps = append(ps, *p)
	}
	if v, ok := k.Options["time_window"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Millisecond || d > time.Hour {
			ps = append(ps, server.Problem{Field: "options.time_window", Value: v, Message: "must be a duration between 1ms and 1h"})
		}
		o.timeWindow = d
	}
	if v, ok := k.Options["etcd"]; ok && v != monotonicNoEtcd {
		if _, err := etcdHosts(v); err != nil {
			ps = append(ps, server.Problem{Field: "options.etcd", Value: v, Message: err.Error() + ` (or "none": single node, bound in the data directory)`})
		}
	}
	for _, f := range []string{"peer_listen", "advertise"} {
		if v, ok := k.Options[f]; ok {
			if _, _, err := net.SplitHostPort(v); err != nil {
				ps = append(ps, server.Problem{Field: "options." + f, Value: v, Message: "must be host:port"})
			}
		}
	}
	if v, ok := k.Options["peer_listen"]; ok {
		host, _, err := net.SplitHostPort(v)
		switch {
		case err != nil:
		case !loopbackHost(host) && cfg.AdminToken == "":
			ps = append(ps, server.Problem{Field: "options.peer_listen", Value: v,
				Message: "a non-loopback forwarding listener needs admin_token (forwarded requests are authenticated with a token derived from it)"})
		case (host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified()) && k.Options["advertise"] == "":
			ps = append(ps, server.Problem{Field: "options.advertise", Value: "",
				Message: "needed when peer_listen is a wildcard address (" + v + "): the address the other nodes reach this one at"})
		}
	}
	if k.Step != 0 {
		ps = append(ps, server.Problem{Field: "step", Value: strconv.FormatInt(k.Step, 10), Message: "monotonic keys have no segment step; the bound's headroom is options.window"})
	}
	ps = append(ps, monotonicRegionProblems(k, cfg, o.form)...)
	if hosts, _, err := monotonicEtcd(cfg, k); err == nil && len(hosts) == 0 {
		for _, p := range nodeLocalProblem(k, cfg, func() string { return "its bound file in the data directory" },
			"Give the key an etcd (options.etcd: host:port, or an etcd:// coordinator) so that one elected leader issues for every node") {
			p.Field, p.Value = "options.etcd", k.Options["etcd"]
			ps = append(ps, p)
		}
	}
	return o, ps
}

func etcdHosts(v string) ([]string, error) {
	var hs []string
	for _, h := range strings.Split(v, ",") {
		if _, _, err := net.SplitHostPort(h); err != nil {
			return nil, fmt.Errorf("%q is not host:port", h)
		}
		hs = append(hs, h)
	}
	return hs, nil
}

func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// monotonicNoEtcd is the options.etcd value that keeps a key's bound in
// the data directory even when the coordinator is etcd://.
const monotonicNoEtcd = "none"

// MonotonicOptionPrefix is the etcd prefix under which keys with their own
// options.etcd keep their state (monotonic.Leaders lists it).
const MonotonicOptionPrefix = "/idmint/monotonic/"

// monotonicEtcd returns the etcd endpoints and key prefix for a key: its
// own etcd option under MonotonicOptionPrefix, or the coordinator's
// (etcd://h1,h2/prefix?name=N: under prefix/N/monotonic/). No hosts: the
// key's bound lives in the data directory (options.etcd: none, or no
// etcd:// coordinator).
func monotonicEtcd(cfg *server.Config, k server.KeyConfig) (hosts []string, prefix string, err error) {
	if v, ok := k.Options["etcd"]; ok {
		if v == monotonicNoEtcd {
			return nil, "", nil
		}
		hs, err := etcdHosts(v)
		return hs, MonotonicOptionPrefix, err
	}
	hosts, prefix = MonotonicCoordinatorPrefix(cfg.Coordinator)
	return hosts, prefix, nil
}

// MonotonicCoordinatorPrefix returns the etcd endpoints and the prefix
// under which monotonic keys of a node whose coordinator is the etcd:// URL
// coordinator keep their state (etcd://h1,h2/prefix?name=N:
// prefix/N/monotonic/), or nothing when it is not an etcd:// URL.
func MonotonicCoordinatorPrefix(coordinator string) (hosts []string, prefix string) {
	hosts, p, name, err := worker.EtcdURL(coordinator)
	if err != nil {
		return nil, ""
	}
	return hosts, p + "/" + name + "/monotonic/"
}

// monotonicCluster is the etcd client and peer listener every monotonic
// key of a node shares.
type monotonicCluster struct {
	cli   *clientv3.Client
	peers *monotonic.Peers
	addr  string // advertised
}

func (c *monotonicCluster) Close(ctx context.Context) error {
	err := c.peers.Close()
	if cerr := c.cli.Close(); err == nil {
		err = cerr
	}
	return err
}

func buildMonotonic(ctx context.Context, env *server.Env, name string, k server.KeyConfig, o monotonicOpts) (server.Issuer, error) {
	if home, ok := k.Options["home_region"]; ok && home != env.Config.RegionSpec().Name {
		env.Logger.Info("monotonic key served by its home region only", "key", name, "home_region", home, "region", env.Config.RegionSpec().String())
		return &awayKey{name: name, home: home, here: env.Config.RegionSpec()}, nil
	}
	is, err := buildMonotonicKey(ctx, env, name, k, o)
	if err != nil {
		return nil, err
	}
	if k.Options["scope"] == "region" {
		is.line = newRegionLine(env.Config, name)
	}
	return is, nil
}

func buildMonotonicKey(ctx context.Context, env *server.Env, name string, k server.KeyConfig, o monotonicOpts) (*monotonicKey, error) {
	form, window, twindow := o.form, o.window, o.timeWindow
	hosts, prefix, err := monotonicEtcd(env.Config, k)
	if err != nil {
		return nil, err
	}
	// The key's bound is also kept in the node's witness (the data
	// directory's marks, and the cluster's when there is one), and every
	// source starts above it: a key moved from its bound file to etcd, to
	// another etcd prefix, or an etcd restored from an older snapshot
	// repeats nothing.
	nw, err := openWitness(ctx, env)
	if err != nil {
		return nil, err
	}
	space := monotonic.WitnessSpace(name)
	path := monotonicBoundPath(env.Config.DataDir, name)
	if len(hosts) == 0 {
		f, err := monotonic.OpenFile(monotonic.FileConfig{Path: path, Form: form, Window: window, TimeWindow: twindow, Clock: env.Clock,
			Witness: nw.w, Space: space, Name: name, Logger: env.Logger})
		if err != nil {
			return nil, err
		}
		if kind, cluster := env.Config.ClusterCoordinator(); cluster {
			env.Logger.Warn("monotonic: key served from this node's own bound file although the coordinator implies several nodes: "+
				"every node serving it issues its own values, the same ones, and their order across nodes means nothing. "+
				"Give the key an etcd (options.etcd: host:port, or an etcd:// coordinator) so that one elected leader issues for every node",
				"key", name, "coordinator", kind, "bound_file", path)
		}
		env.Logger.Info("monotonic key ready (single node: bound in the data directory)", "key", name, "form", form, "bound_file", path, "witness", nw.w.String())
		return &monotonicKey{src: f, form: form, file: f, clk: env.Clock}, nil
	}
	// A bound file left by this key's single-node days is a floor: the
	// witness holds it too, unless the file predates the witness.
	floor, err := monotonic.ReadBoundFile(path)
	if err != nil {
		return nil, err
	}
	ttl := o.ttl
	peerListen := k.Options["peer_listen"]
	if peerListen == "" {
		peerListen = "127.0.0.1:0"
	}
	res, err := env.Shared(ctx, "monotonic cluster "+strings.Join(hosts, ",")+" "+peerListen, func(ctx context.Context) (server.Resource, error) {
		cc := clientv3.Config{Endpoints: hosts, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), Context: context.Background()}
		if _, own := k.Options["etcd"]; !own {
			// The coordinator's etcd: with its credentials.
			if cc.Username, cc.Password, err = worker.EtcdAuth(env.Config.Coordinator); err != nil {
				return nil, fmt.Errorf("monotonic: %w", err)
			}
		}
		cli, err := clientv3.New(cc)
		if err != nil {
			return nil, fmt.Errorf("monotonic: etcd %s: %w", strings.Join(hosts, ","), err)
		}
		// Forwarded requests carry a token derived from admin_token, when
		// set (every node of a cluster shares it).
		p, err := monotonic.ListenPeers(peerListen, monotonic.WithSecret([]byte(env.Config.AdminToken)))
		if err != nil {
			cli.Close()
			return nil, err
		}
		addr := k.Options["advertise"]
		if addr == "" {
			addr = p.Addr()
		}
		return &monotonicCluster{cli: cli, peers: p, addr: addr}, nil
	})
	if err != nil {
		return nil, err
	}
	mc := res.(*monotonicCluster)
	e, err := monotonic.NewEtcd(monotonic.EtcdConfig{
		Client: mc.cli, Prefix: prefix + sanitize(name) + "/", Name: name, Form: form, Window: window, TimeWindow: twindow,
		TTL: time.Duration(ttl) * time.Second, Advertise: mc.addr, Forward: mc.peers, NodeName: cmp.Or(env.NodeName, server.NodeName()), Clock: env.Clock,
		Logger: env.Logger.With("key", name), Witness: nw.w, Space: space, Floor: floor,
	})
	if err != nil {
		return nil, err
	}
	// Without admin_token a key with tokens is still never served to a
	// peer that cannot prove it knows them: its forwarding secret is
	// derived from them.
	mc.peers.Add(name, e, tokensSecret(k.Tokens))
	env.Logger.Info("monotonic key ready (cluster)", "key", name, "form", form, "etcd", strings.Join(hosts, ","), "prefix", prefix, "peer", mc.addr,
		"witness", nw.w.String(), "floor", floor)
	return &monotonicKey{src: e, form: form, etcd: e, peers: mc.peers, name: name, clk: env.Clock}, nil
}

// tokensSecret derives a key's forwarding secret from its tokens (every
// node configures the same): nil when it has none.
func tokensSecret(tokens []string) []byte {
	if len(tokens) == 0 {
		return nil
	}
	ts := append([]string(nil), tokens...)
	sort.Strings(ts)
	return []byte(strings.Join(ts, "\x00"))
}

// monotonicBoundPath is the bound file of a single-node monotonic key.
func monotonicBoundPath(dataDir, key string) string {
	return filepath.Join(dataDir, "monotonic-"+sanitize(key)+".bound")
}

// SeededMark is one witness's mark of a key after SeedMonotonic.
type SeededMark struct {
	Witness string `json:"witness"` // "data directory /srv/idmint", "etcd 10.0.0.1:2379/idmint/app/marks/"
	Before  int64  `json:"before"`
	After   int64  `json:"after"` // at least the seed; more when the mark was above it
}

// SeedMonotonic raises the mark of the monotonic key in every witness a
// node with cfg keeps (its data directory's, and the cluster's: cfg.Witness,
// or the coordinator when it is etcd:// or zk://) to at least value: the
// key's next source (a File opened, an Etcd leader elected) serves above
// value. It never lowers a mark. It fails while a process (a running
// idmint serve) holds the data directory's marks. logger may be nil.
func SeedMonotonic(ctx context.Context, cfg *server.Config, logger *slog.Logger, key string, value int64) ([]SeededMark, error) {
	if err := server.CheckName(key); err != nil {
		return nil, err
	}
	if value < 0 {
		return nil, fmt.Errorf("monotonic: seed %d is negative", value)
	}
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	env := &server.Env{Config: cfg, Logger: logger, Clock: clock.NewReal()}
	nw, err := openWitness(ctx, env)
	if err != nil {
		return nil, err
	}
	defer nw.Close(ctx)
	ws := []witness.Witness{nw.local}
	if nw.cluster != nil {
		ws = append(ws, nw.cluster)
	}
	space := monotonic.WitnessSpace(key)
	var out []SeededMark
	for _, w := range ws {
		before, err := w.Mark(ctx, space)
		if err != nil {
			return out, fmt.Errorf("%s: %w", w, err)
		}
		after, err := witness.Raise(ctx, w, space, value)
		if err != nil {
			return out, fmt.Errorf("%s: %w", w, err)
		}
		out = append(out, SeededMark{Witness: w.String(), Before: before, After: after})
	}
	return out, nil
}

// monotonicKey serves one monotonic key.
type monotonicKey struct {
	src   monotonic.Source
	form  monotonic.Form
	file  *monotonic.File // single node
	etcd  *monotonic.Etcd // cluster
	peers *monotonic.Peers
	name  string
	clk   clock.Clock
	line  regionLine // scope: region: the region's share of the number line
}

func (k *monotonicKey) refusal(err error) error {
	switch {
	case errors.Is(err, monotonic.ErrBadCount):
		return &server.InputError{Field: "count", Err: err}
	case errors.Is(err, monotonic.ErrFenced):
		return &retryable{err, time.Second}
	}
	return &retryable{err, time.Second}
}

// NextInt64s fills dst with consecutive values, all above every value
// answered before this request was sent.
func (k *monotonicKey) NextInt64s(ctx context.Context, dst []int64) error {
	first, err := k.src.Next(ctx, int64(len(dst)))
	if err != nil {
		return k.refusal(err)
	}
	for i := range dst {
		dst[i] = first + int64(i)
	}
	return k.line.apply(dst)
}

// NextRange hands out [first, first+n) whole.
func (k *monotonicKey) NextRange(ctx context.Context, n int64) (int64, int64, error) {
	first, err := k.src.Next(ctx, n)
	if err != nil {
		return 0, 0, k.refusal(err)
	}
	if first, err = k.line.applyRange(first, n); err != nil {
		return 0, 0, err
	}
	return first, n, nil
}

// Decode reads a timestamp-form ID; counter IDs have no parts.
func (k *monotonicKey) Decode(id string) (server.Decoded, error) {
	if k.form != monotonic.Timestamp {
		return server.Decoded{}, errors.New("a counter-form monotonic ID has no parts to decode")
	}
	return decodeMonotonic(id)
}

func decodeMonotonic(id string) (server.Decoded, error) {
	v, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return server.Decoded{}, fmt.Errorf("id %q is not a decimal int64", id)
	}
	p, err := monotonic.Decode(v)
	if err != nil {
		return server.Decoded{}, err
	}
	return server.Decoded{Layout: "monotonic", Time: p.Time, Sequence: p.Logical}, nil
}

// LeaderNode names the leader this node knows for a cluster key: the node
// name it published (what `idmint leaders` prints), this node's own when
// it leads. "" while no leader is known, and for a single-node key (its
// bound file: every node serving it issues on its own).
func (k *monotonicKey) LeaderNode() string {
	if k.etcd == nil {
		return ""
	}
	node, _ := k.etcd.LeaderNode()
	return node
}

// Ready fails while a cluster key knows no leader.
func (k *monotonicKey) Ready(ctx context.Context) error {
	if k.etcd == nil {
		return nil
	}
	if addr, self := k.etcd.Leader(); !self && addr == "" {
		return errors.New("monotonic: no leader known yet")
	}
	return nil
}

// Stats reports leadership, the bound's headroom, failovers, forwarded
// requests and bounds found below the witness's mark.
func (k *monotonicKey) Stats() []server.Stat {
	var last, bound int64
	leader := 1.0
	var st monotonic.Status
	if k.file != nil {
		last, bound = k.file.Bounds()
		if k.file.WentBack() {
			st.WentBack = 1
		}
	} else {
		st = k.etcd.Status()
		last, bound = st.Last, st.Bound
		if !st.Leader {
			leader = 0
		}
	}
	head := float64(bound - last)
	if k.form == monotonic.Timestamp {
		head = float64((bound>>monotonic.LogicalBits)-k.clk.Now().UnixMilli()) / 1000 // seconds ahead of the wall clock
	}
	if leader == 0 {
		head = 0
	}
	var runway []server.Stat
	if k.form == monotonic.Counter && leader == 1 {
		// The persisted bound claims every value below it; a follower
		// knows no bound.
		runway = k.line.runway(int64Ceiling, bound)
	}
	return append([]server.Stat{
		{Name: "monotonic_leader", Help: "1 while this node is the proven leader of a monotonic key.", Value: leader},
		{Name: "monotonic_bound_headroom", Help: "Persisted bound minus the last issued value (timestamp form: seconds ahead of the wall clock); 0 on followers.", Value: head},
		{Name: "monotonic_failovers_total", Help: "Leadership terms this node won for a monotonic key.", Value: float64(st.Failovers), Counter: true},
		{Name: "monotonic_forwarded_total", Help: "Requests this node forwarded to a monotonic key's leader.", Value: float64(st.Forwarded), Counter: true},
		{Name: "monotonic_forwarded_served_total", Help: "Forwarded requests this node served as leader.", Value: float64(st.Served), Counter: true},
		{Name: "monotonic_went_back_total", Help: "Times a monotonic key's bound (in etcd, or its bound file) was found below the witness's mark when this node took the key on (etcd restored or emptied, the file deleted or restored, the key moved to another prefix) and the key started above the mark.",
			Value: float64(st.WentBack), Counter: true},
	}, runway...)
}

// Close stops issuing and resigns leadership.
func (k *monotonicKey) Close(ctx context.Context) error {
	if k.peers != nil {
		k.peers.Remove(k.name)
	}
	return k.src.Close()
}

// monotonicRegionProblems: with several regions a monotonic key must say
// what it promises, since no key is strictly increasing across regions
// that share nothing. options.scope: region makes it increasing within
// the region only, its counter on the region's share of the number line
// (counter form only: a timestamp form's value is the clock, which two
// regions share). options.home_region: NAME serves it from one region
// only (its leader there; other regions' nodes refuse its requests and
// name that region).
func monotonicRegionProblems(k server.KeyConfig, cfg *server.Config, form monotonic.Form) []server.Problem {
	r := cfg.RegionSpec()
	scope, hasScope := k.Options["scope"]
	home, hasHome := k.Options["home_region"]
	var ps []server.Problem
	if hasScope && scope != "region" {
		ps = append(ps, server.Problem{Field: "options.scope", Value: scope, Message: `must be "region" (strictly increasing within this region only)`})
	}
	if hasHome {
		switch {
		case r.Name == "":
			ps = append(ps, server.Problem{Field: "options.home_region", Value: home, Message: "names a region, but this config has no region: section"})
		case (region.Region{Name: home, Count: 1}).Validate() != nil:
			ps = append(ps, server.Problem{Field: "options.home_region", Value: home, Message: "is not a region name (lower-case letters, digits and '-')"})
		}
	}
	if hasScope && hasHome {
		ps = append(ps, server.Problem{Field: "options.scope", Value: scope, Message: "and options.home_region both given: a key is either increasing per region (scope: region) or served by one region (home_region), not both"})
	}
	if r.Single() {
		return ps
	}
	if !hasScope && !hasHome {
		ps = append(ps, server.Problem{Field: "options", Value: "",
			Message: fmt.Sprintf("a monotonic key cannot be strictly increasing across %d regions that share no store: "+
				"set options.scope: region (increasing within each region, regions never issue the same value) "+
				"or options.home_region: NAME (one region serves it; the others refuse its requests)", r.Count)})
	}
	if scope == "region" && form == monotonic.Timestamp {
		ps = append(ps, server.Problem{Field: "options.form", Value: "timestamp",
			Message: "scope: region needs form: counter (a timestamp-form value is the clock, the same in every region); use form: counter, or options.home_region"})
	}
	return ps
}

// awayKey is a monotonic key whose home region is another: every request
// is refused with the region that serves it.
type awayKey struct {
	name, home string
	here       region.Region
}

// ErrOtherRegion: a key is served by another region (options.home_region).
var ErrOtherRegion = errors.New("region: key served by another region")

func (a *awayKey) err() error {
	return fmt.Errorf("%w: key %q is served by region %s only (options.home_region); this node is in region %s: send its requests to a node of %s",
		ErrOtherRegion, a.name, a.home, a.here.Name, a.home)
}

func (a *awayKey) NextInt64s(ctx context.Context, dst []int64) error { return a.err() }

func (a *awayKey) NextRange(ctx context.Context, n int64) (int64, int64, error) {
	return 0, 0, a.err()
}

func (a *awayKey) Close(ctx context.Context) error { return nil }
