package witness

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Etcd keeps marks in etcd, one key per space under a prefix, changed only
// by transactions that compare the key's revision: a linearizable
// compare-and-swap, durable on a quorum before it returns.
type Etcd struct {
	cli    *clientv3.Client
	prefix string
	own    bool // Close closes cli
}

// NewEtcd returns a witness under prefix (for example "/idmint/app/marks/")
// using cli, which the caller keeps and closes.
func NewEtcd(cli *clientv3.Client, prefix string) *Etcd {
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return &Etcd{cli: cli, prefix: prefix}
}

func (e *Etcd) key(space string) string { return e.prefix + url.PathEscape(space) }

func (e *Etcd) get(ctx context.Context, space string) (v int64, rev int64, err error) {
	resp, err := e.cli.Get(ctx, e.key(space))
	if err != nil {
		return 0, 0, fmt.Errorf("witness: etcd: read %s: %w", e.key(space), err)
	}
	if len(resp.Kvs) == 0 {
		return 0, 0, nil
	}
	kv := resp.Kvs[0]
	v, err = strconv.ParseInt(string(kv.Value), 10, 64)
	if err != nil || v < 0 {
		return 0, 0, fmt.Errorf("%w: etcd key %s holds %q, not a mark", ErrCorrupt, e.key(space), kv.Value)
	}
	return v, kv.ModRevision, nil
}

// Mark reads the space's mark (a linearizable read).
func (e *Etcd) Mark(ctx context.Context, space string) (int64, error) {
	if err := ValidateSpace(space); err != nil {
		return 0, err
	}
	v, _, err := e.get(ctx, space)
	return v, err
}

// Claim compares and swaps until it succeeds or finds the mark above from.
func (e *Etcd) Claim(ctx context.Context, space string, from, to int64) (int64, bool, error) {
	if err := checkClaim(space, from, to); err != nil {
		return 0, false, err
	}
	k := e.key(space)
	for {
		v, rev, err := e.get(ctx, space)
		if err != nil {
			return 0, false, err
		}
		if v > from {
			return v, false, nil
		}
		if v == to {
			return to, true, nil
		}
		cmp := clientv3.Compare(clientv3.ModRevision(k), "=", rev) // rev 0: the key does not exist
		resp, err := e.cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(k, strconv.FormatInt(to, 10))).Commit()
		if err != nil {
			return 0, false, fmt.Errorf("witness: etcd: raise %s to %d: %w", k, to, err)
		}
		if resp.Succeeded {
			return to, true, nil
		}
		if err := ctx.Err(); err != nil {
			return 0, false, err
		}
	}
}

// String names the endpoints and prefix.
func (e *Etcd) String() string {
	return "etcd " + strings.Join(e.cli.Endpoints(), ",") + e.prefix
}

// Close closes the client when the witness opened it (Open).
func (e *Etcd) Close() error {
	if e.own {
		return e.cli.Close()
	}
	return nil
}
