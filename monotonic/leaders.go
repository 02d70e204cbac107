package monotonic

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// LeaderInfo is what etcd holds about one monotonic key's election.
type LeaderInfo struct {
	// Key is the key group: the path segment under the prefix.
	Key string `json:"key"`
	// Leader is the address the leader advertises to followers; "" when
	// no candidate is campaigning.
	Leader string `json:"leader"`
	// Node names the leader's process (NodeName in its EtcdConfig); ""
	// when the leader has not published it (yet).
	Node string `json:"node,omitempty"`
	// Since is when the leader won, on its own clock; zero when unknown.
	Since time.Time `json:"since,omitempty"`
	// Revision is the create revision of the leader's election key: the
	// fence every bound write of its term is conditional on.
	Revision int64 `json:"revision,omitempty"`
	// LeaseLeft is what remains of the leader's lease in etcd.
	LeaseLeft time.Duration `json:"lease_left_ns,omitempty"`
	// Candidates counts every campaigning node, the leader included.
	Candidates int `json:"candidates"`
	// Bound is the persisted bound: no value above it has been issued.
	Bound int64 `json:"bound"`
}

// leaderRecord is the value of Prefix+"leader", written by a new leader
// under its fence, attached to its lease.
type leaderRecord struct {
	Node      string    `json:"node"`
	Advertise string    `json:"advertise"`
	Since     time.Time `json:"since"`
	Revision  int64     `json:"revision"`
}

// Leaders lists the monotonic keys under prefix (the parent of each key's
// EtcdConfig.Prefix, for example "/idmint/monotonic/") with their leader,
// since when, and bound. It reads etcd only; it needs no node.
func Leaders(ctx context.Context, cli *clientv3.Client, prefix string) ([]LeaderInfo, error) {
	if cli == nil {
		return nil, fmt.Errorf("%w: etcd client is nil", ErrBadConfig)
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("monotonic: list %s: %w", prefix, err)
	}
	type group struct {
		info   LeaderInfo
		first  int64 // lowest create revision among election keys
		lease  clientv3.LeaseID
		record *leaderRecord
	}
	groups := map[string]*group{}
	get := func(k string) *group {
		g := groups[k]
		if g == nil {
			g = &group{info: LeaderInfo{Key: k}}
			groups[k] = g
		}
		return g
	}
	for _, kv := range resp.Kvs {
		key, tail, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), prefix), "/")
		if !ok || key == "" {
			continue
		}
		switch {
		case tail == "bound":
			b, err := strconv.ParseInt(string(kv.Value), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("monotonic: bound %s is corrupt (%q)", kv.Key, trunc(string(kv.Value)))
			}
			get(key).info.Bound = b
		case tail == "leader":
			var r leaderRecord
			if json.Unmarshal(kv.Value, &r) == nil {
				get(key).record = &r
			}
		case strings.HasPrefix(tail, "election/"):
			g := get(key)
			g.info.Candidates++
			// The leader is the key with the lowest create revision (as
			// concurrency.Election.Leader reads it).
			if g.first == 0 || kv.CreateRevision < g.first {
				g.first = kv.CreateRevision
				g.info.Leader, g.info.Revision = string(kv.Value), kv.CreateRevision
				g.lease = clientv3.LeaseID(kv.Lease)
			}
		}
	}
	out := make([]LeaderInfo, 0, len(groups))
	for _, g := range groups {
		if r := g.record; r != nil && g.first != 0 && r.Revision == g.first {
			g.info.Node, g.info.Since = r.Node, r.Since
		}
		if g.lease != 0 {
			if ttl, err := cli.TimeToLive(ctx, g.lease); err == nil && ttl.TTL > 0 {
				g.info.LeaseLeft = time.Duration(ttl.TTL) * time.Second
			}
		}
		out = append(out, g.info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}
