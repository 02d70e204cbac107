package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdAssigner grants worker IDs from etcd. Under prefix P it keeps
//
//	P/claim/{id}    {"holder","since"}, attached to the holder's etcd lease:
//	                it vanishes when the lease expires or is revoked
//	P/horizon/{id}  {"horizon_ns","generation"}, persistent
//
// A holder claims the lowest ID without a claim key in one transaction
// (If CreateRevision(claim)==0 Then Put claim, Get horizon); the claim's
// create revision is the fencing generation (etcd revisions only grow), and
// every horizon write is a transaction conditional on it, so a holder whose
// lease expired cannot move the horizon.
type etcdAssigner struct {
	s      settings
	cli    *clientv3.Client
	prefix string
}

type etcdClaim struct {
	Holder string    `json:"holder"`
	Since  time.Time `json:"since"`
}

type etcdHorizon struct {
	HorizonNS  int64 `json:"horizon_ns"`
	Generation int64 `json:"generation"`
}

// NewEtcd connects to the etcd cluster at endpoints (host:port) and returns
// an Assigner keeping its keys under prefix (for example "/idmint/app/").
// It fails within the configured timeout when no endpoint answers.
func NewEtcd(ctx context.Context, endpoints []string, prefix string, opts ...Option) (Assigner, error) {
	s, err := newSettings(opts)
	if err != nil {
		return nil, err
	}
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("%w: etcd endpoints are empty", ErrBadURL)
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: s.timeout,
		Logger:      zap.NewNop(),
		Context:     context.Background(),
		Username:    s.etcdUser,
		Password:    s.etcdPassword,
	})
	if err != nil {
		return nil, fmt.Errorf("worker: etcd %s: %w", strings.Join(endpoints, ","), err)
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if _, err := cli.Get(cctx, prefix+"probe", clientv3.WithCountOnly()); err != nil {
		cli.Close()
		return nil, fmt.Errorf("worker: etcd %s unreachable within %v: %w", strings.Join(endpoints, ","), s.timeout, err)
	}
	return &etcdAssigner{s: s, cli: cli, prefix: prefix}, nil
}

func (a *etcdAssigner) claimKey(id int64) string {
	return a.prefix + "claim/" + strconv.FormatInt(id, 10)
}
func (a *etcdAssigner) horizonKey(id int64) string {
	return a.prefix + "horizon/" + strconv.FormatInt(id, 10)
}

func (a *etcdAssigner) Acquire(ctx context.Context, max int64) (*Lease, error) {
	if max < 0 {
		return nil, fmt.Errorf("%w: max worker id %d is negative", ErrBadOption, max)
	}
	ctx, cancel := context.WithTimeout(ctx, a.s.timeout)
	defer cancel()
	sent := a.s.clock.Mono()
	ttl := int64(math.Ceil(a.s.ttl.Seconds()))
	grant, err := a.cli.Grant(ctx, ttl)
	if err != nil {
		return nil, fmt.Errorf("worker: etcd grant lease: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			rctx, rcancel := context.WithTimeout(context.Background(), a.s.timeout)
			_, _ = a.cli.Revoke(rctx, grant.ID)
			rcancel()
		}
	}()
	claim, _ := json.Marshal(etcdClaim{Holder: a.s.holder, Since: a.s.clock.Now().UTC()})
	for {
		used, err := a.used(ctx, max)
		if err != nil {
			return nil, err
		}
		id := int64(0)
		for ; id <= max && used[id]; id++ {
		}
		if id > max {
			return nil, &NoFreeIDError{InUse: int64(len(used)), Max: max}
		}
		ck := a.claimKey(id)
		resp, err := a.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(ck), "=", 0)).
			Then(clientv3.OpPut(ck, string(claim), clientv3.WithLease(grant.ID)), clientv3.OpGet(a.horizonKey(id))).
			Commit()
		if err != nil {
			return nil, fmt.Errorf("worker: etcd claim worker id %d: %w", id, err)
		}
		if !resp.Succeeded {
			continue // someone claimed it between our read and our write
		}
		var h etcdHorizon
		if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 1 {
			if err := json.Unmarshal(kvs[0].Value, &h); err != nil {
				return nil, fmt.Errorf("worker: etcd %s is corrupt: %v", a.horizonKey(id), err)
			}
		}
		var horizon time.Time
		if h.HorizonNS != 0 {
			horizon = time.Unix(0, h.HorizonNS).UTC()
		}
		ok = true
		b := &etcdBackend{a: a, id: id, gen: resp.Header.Revision, lease: grant.ID}
		return newLease(a.s, id, resp.Header.Revision, horizon, b, sent, true), nil
	}
}

// used returns the claimed IDs in 0..max.
func (a *etcdAssigner) used(ctx context.Context, max int64) (map[int64]bool, error) {
	resp, err := a.cli.Get(ctx, a.prefix+"claim/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("worker: etcd list claims: %w", err)
	}
	used := make(map[int64]bool, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		id, err := strconv.ParseInt(strings.TrimPrefix(string(kv.Key), a.prefix+"claim/"), 10, 64)
		if err == nil && id >= 0 && id <= max {
			used[id] = true
		}
	}
	return used, nil
}

func (a *etcdAssigner) List(ctx context.Context) ([]Holder, error) {
	ctx, cancel := context.WithTimeout(ctx, a.s.timeout)
	defer cancel()
	claims, err := a.cli.Get(ctx, a.prefix+"claim/", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("worker: etcd list claims: %w", err)
	}
	horizons, err := a.cli.Get(ctx, a.prefix+"horizon/", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("worker: etcd list horizons: %w", err)
	}
	byID := map[int64]*Holder{}
	get := func(key, sub string) *Holder {
		id, err := strconv.ParseInt(strings.TrimPrefix(key, a.prefix+sub), 10, 64)
		if err != nil {
			return nil
		}
		if byID[id] == nil {
			byID[id] = &Holder{ID: id}
		}
		return byID[id]
	}
	for _, kv := range claims.Kvs {
		if h := get(string(kv.Key), "claim/"); h != nil {
			var c etcdClaim
			if err := json.Unmarshal(kv.Value, &c); err != nil {
				// Still live: the claim key exists. Say what is wrong with it.
				c.Holder = fmt.Sprintf("(claim unreadable: %v)", err)
			}
			h.Holder, h.Since, h.Live, h.Generation = c.Holder, c.Since, true, kv.CreateRevision
		}
	}
	for _, kv := range horizons.Kvs {
		if h := get(string(kv.Key), "horizon/"); h != nil {
			var v etcdHorizon
			if json.Unmarshal(kv.Value, &v) == nil && v.HorizonNS != 0 {
				h.Horizon = time.Unix(0, v.HorizonNS).UTC()
				if !h.Live {
					h.Generation = v.Generation
				}
			}
		}
	}
	return sortHolders(byID), nil
}

func sortHolders(byID map[int64]*Holder) []Holder {
	out := make([]Holder, 0, len(byID))
	for _, h := range byID {
		out = append(out, *h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (a *etcdAssigner) Close() error { return a.cli.Close() }

type etcdBackend struct {
	a     *etcdAssigner
	id    int64
	gen   int64
	lease clientv3.LeaseID
}

func (b *etcdBackend) keepalive(ctx context.Context) error {
	_, err := b.a.cli.KeepAliveOnce(ctx, b.lease)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("%w: etcd lease %x of worker id %d expired", ErrLeaseLost, int64(b.lease), b.id)
	}
	return err
}

func (b *etcdBackend) store(ctx context.Context, until time.Time) (time.Time, error) {
	v, _ := json.Marshal(etcdHorizon{HorizonNS: until.UnixNano(), Generation: b.gen})
	resp, err := b.a.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(b.a.claimKey(b.id)), "=", b.gen)).
		Then(clientv3.OpPut(b.a.horizonKey(b.id), string(v))).
		Commit()
	if err != nil {
		return time.Time{}, fmt.Errorf("worker: etcd extend horizon of worker id %d: %w", b.id, err)
	}
	if !resp.Succeeded {
		return time.Time{}, fmt.Errorf("%w: etcd claim on worker id %d (generation %d) is gone; horizon not moved", ErrLeaseLost, b.id, b.gen)
	}
	return time.Unix(0, until.UnixNano()).UTC(), nil
}

func (b *etcdBackend) lower(ctx context.Context, last time.Time) (time.Time, error) {
	return b.store(ctx, last) // store writes exactly what it is given
}

func (b *etcdBackend) release(ctx context.Context) error {
	_, err := b.a.cli.Revoke(ctx, b.lease)
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("worker: etcd revoke lease of worker id %d: %w", b.id, err)
	}
	return nil
}
