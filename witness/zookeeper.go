package witness

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/idmint/idmint/internal/ctxcall"
)

// ZooKeeper keeps marks in ZooKeeper, one znode per space under a root,
// changed only by version-checked writes (ZooKeeper's compare-and-swap,
// durable on a quorum before it returns).
type ZooKeeper struct {
	conn *zk.Conn
	root string
	own  bool
}

// NewZooKeeper returns a witness under root (for example
// "/snowflake/app/idmint/marks") using conn, which the caller keeps.
func NewZooKeeper(conn *zk.Conn, root string) *ZooKeeper {
	return &ZooKeeper{conn: conn, root: strings.TrimSuffix(root, "/")}
}

func (z *ZooKeeper) node(space string) string {
	// PathEscape leaves '/' alone in no case a znode name can hold it.
	return z.root + "/" + strings.ReplaceAll(url.PathEscape(space), "/", "%2F")
}

type zkData struct {
	v       int64
	version int32
	exists  bool
}

func (z *ZooKeeper) get(ctx context.Context, space string) (zkData, error) {
	n := z.node(space)
	return ctxcall.Do(ctx, func() (zkData, error) {
		b, st, err := z.conn.Get(n)
		if errors.Is(err, zk.ErrNoNode) {
			return zkData{}, nil
		}
		if err != nil {
			return zkData{}, fmt.Errorf("witness: zookeeper: read %s: %w", n, err)
		}
		v, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil || v < 0 {
			return zkData{}, fmt.Errorf("%w: znode %s holds %q, not a mark", ErrCorrupt, n, b)
		}
		return zkData{v: v, version: st.Version, exists: true}, nil
	})
}

// Mark reads the space's mark. ZooKeeper reads may lag the leader; Claim
// never trusts one without its version check.
func (z *ZooKeeper) Mark(ctx context.Context, space string) (int64, error) {
	if err := ValidateSpace(space); err != nil {
		return 0, err
	}
	d, err := z.get(ctx, space)
	return d.v, err
}

// ensureRoot creates the root's missing parents.
func (z *ZooKeeper) ensureRoot(ctx context.Context) error {
	p := ""
	for _, part := range strings.Split(strings.TrimPrefix(z.root, "/"), "/") {
		p = path.Join("/", p, part)
		_, err := ctxcall.Do(ctx, func() (string, error) { return z.conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)) })
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("witness: zookeeper: create %s: %w", p, err)
		}
	}
	return nil
}

// Claim writes with the version it read until it succeeds or finds the
// mark above from.
func (z *ZooKeeper) Claim(ctx context.Context, space string, from, to int64) (int64, bool, error) {
	if err := checkClaim(space, from, to); err != nil {
		return 0, false, err
	}
	n := z.node(space)
	val := []byte(strconv.FormatInt(to, 10))
	for {
		d, err := z.get(ctx, space)
		if err != nil {
			return 0, false, err
		}
		if d.v > from {
			return d.v, false, nil
		}
		if d.exists && d.v == to {
			return to, true, nil
		}
		if d.exists {
			_, err = ctxcall.Do(ctx, func() (*zk.Stat, error) { return z.conn.Set(n, val, d.version) })
		} else {
			_, err = ctxcall.Do(ctx, func() (string, error) { return z.conn.Create(n, val, 0, zk.WorldACL(zk.PermAll)) })
			if errors.Is(err, zk.ErrNoNode) {
				if err = z.ensureRoot(ctx); err == nil {
					continue
				}
				return 0, false, err
			}
		}
		switch {
		case err == nil:
			return to, true, nil
		case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNodeExists):
			if err := ctx.Err(); err != nil {
				return 0, false, err
			}
			continue // someone else wrote first: read again
		default:
			return 0, false, fmt.Errorf("witness: zookeeper: raise %s to %d: %w", n, to, err)
		}
	}
}

// String names the root.
func (z *ZooKeeper) String() string { return "zookeeper " + z.root }

// Close closes the connection when the witness opened it (Open).
func (z *ZooKeeper) Close() error {
	if z.own {
		z.conn.Close()
	}
	return nil
}
