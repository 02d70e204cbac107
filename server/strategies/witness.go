package strategies

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/sqldb"
	"github.com/idmint/idmint/witness"
)

// nodeWitness is the witness every key of a node shares: the marks log in
// the data directory, and the cluster's marks (the coordinator when it is
// etcd:// or zk://, or the config's witness: URL) when there is one. A
// number is served only once both hold a mark at or above it.
type nodeWitness struct {
	w       witness.Witness // local, or Multi{local, cluster}
	local   *witness.File
	cluster witness.Witness // nil without one
	warned  sync.Once
}

func (n *nodeWitness) Close(ctx context.Context) error { return n.w.Close() }

// openWitness returns the node's witness, opening it on first use.
func openWitness(ctx context.Context, env *server.Env) (*nodeWitness, error) {
	res, err := env.Shared(ctx, "witness", func(ctx context.Context) (server.Resource, error) {
		local, err := witness.OpenFile(env.Config.DataDir)
		if err != nil {
			return nil, err
		}
		n := &nodeWitness{w: local, local: local}
		src := env.Config.Witness
		if src == "" {
			if kind, _ := env.Config.ClusterCoordinator(); kind == "etcd" || kind == "zk" || kind == "zookeeper" {
				src = env.Config.Coordinator
			}
		}
		if src != "" && src != "none" {
			cl, err := witness.Open(ctx, src, 0)
			if err != nil {
				local.Close()
				return nil, fmt.Errorf("witness %s: %w", sqldb.Redact(src), err)
			}
			n.cluster = cl
			n.w = witness.Multi{local, cl}
		}
		where := []any{"local", local.String()}
		if n.cluster != nil {
			where = append(where, "cluster", n.cluster.String())
		}
		if r := env.Config.RegionSpec(); r.Name != "" {
			n.w = regionWitness{n.w, r.Name + ":", r.Index == 0}
			where = append(where, "spaces", r.Name+":…")
		}
		env.Logger.Info("witness: high-water marks of store-backed keys are kept outside their stores", where...)
		return n, nil
	})
	if err != nil {
		return nil, err
	}
	return res.(*nodeWitness), nil
}

// warnShared logs once per node when a key's numbers come from a store
// other nodes may share but no cluster witness is configured: after a
// failover to a lagging replica, this node repeats nothing it issued
// itself, but could issue what another node issued. shown is the store as
// the log may show it (redacted by the caller: a ticket key's servers and
// a Redis address are no URLs Redact parses).
func (n *nodeWitness) warnShared(env *server.Env, key, shown string) {
	if n.cluster != nil {
		return
	}
	n.warned.Do(func() {
		env.Logger.Warn("witness: no cluster witness; if other nodes share this key's store, a failover of the store to a "+
			"lagging replica can make this node issue numbers another node issued (this node never repeats its own). "+
			"Set witness: to etcd://, zk:// or a database other than the store, or use an etcd/ZooKeeper coordinator",
			"key", key, "store", shown)
	})
}

// sharedStore reports whether a store URL can be shared by several nodes
// (anything but a SQLite file).
func sharedStore(u string) bool {
	scheme, _, _ := strings.Cut(u, "://")
	s := strings.ToLower(scheme)
	return s != "sqlite" && s != "sqlite3" && s != "file" && u != ""
}

// nodeLocalProblem refuses a key whose numbers live only on this node when
// the coordinator implies several nodes, unless the key opts in. what
// names that place; it is called only for a refusal (a configuration is
// checked key by key, 100,000 keys in a second).
func nodeLocalProblem(k server.KeyConfig, cfg *server.Config, what func() string, fix string) []server.Problem {
	kind, cluster := cfg.ClusterCoordinator()
	if !cluster || k.NodeLocal {
		return nil
	}
	return []server.Problem{{Field: "store", Value: k.Store,
		Message: fmt.Sprintf("the coordinator (%s) implies several nodes, but %s lives on this node only: every node would issue "+
			"the same numbers. %s, or set node_local: true on the key if each node is meant to number on its own", kind, what(), fix)}}
}

// nodeLocalStore is nodeLocalProblem for a key whose store is a SQLite
// file (segment and order-number keys).
func nodeLocalStore(k server.KeyConfig, cfg *server.Config) []server.Problem {
	u := cfg.Stores[k.Store]
	if u == "" || sharedStore(u) {
		return nil
	}
	return nodeLocalProblem(k, cfg, func() string { return fmt.Sprintf("store %q (%s)", k.Store, sqldb.Redact(u)) },
		"Name a shared database in stores: and set store: on the key (or point stores.default at it)")
}

// regionWitness keys a region's marks by the region's name ("eu-west:" +
// space), so that two regions sharing a witness by mistake never mix
// their marks, which count each region's own store. A node without a
// region keeps the spaces it always had. Region 0 adopts a space's mark
// from before it had a region (its numbers did not move when the single
// region became region 0), so a store failover right after the change
// is still caught.
type regionWitness struct {
	witness.Witness
	prefix string
	adopt  bool
}

func (r regionWitness) Mark(ctx context.Context, space string) (int64, error) {
	m, err := r.Witness.Mark(ctx, r.prefix+space)
	if err != nil || m != 0 || !r.adopt {
		return m, err
	}
	return r.Witness.Mark(ctx, space)
}

func (r regionWitness) Claim(ctx context.Context, space string, from, to int64) (int64, bool, error) {
	return r.Witness.Claim(ctx, r.prefix+space, from, to)
}
