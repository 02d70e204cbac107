package witness

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idmint/idmint/sqldb"
	"github.com/idmint/idmint/worker"
)

// ErrBadURL: Open was given a URL it cannot use; the message names the part.
var ErrBadURL = fmt.Errorf("witness: bad url")

// Open opens the witness a URL names:
//
//	etcd://h1:2379,h2:2379/prefix?name=app  keys under prefix/app/marks/ (a coordinator URL works as it is)
//	zk://h1:2181/snowflake/app               znodes under /snowflake/app/idmint/marks
//	postgres://…, mysql://…, sqlite:///…     the table idmint_witness
//	file:///var/lib/idmint/marks             a File in that directory
//
// The connection is bounded by timeout (0: 5 s).
func Open(ctx context.Context, rawURL string, timeout time.Duration) (Witness, error) {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return nil, fmt.Errorf("%w: %q has no scheme (want etcd://, zk://, postgres://, mysql://, sqlite:// or file://)", ErrBadURL, sqldb.Redact(rawURL))
	}
	switch strings.ToLower(scheme) {
	case "etcd":
		eps, prefix, name, err := worker.EtcdURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
		}
		cc, err := worker.EtcdClientConfig(rawURL, timeout) // endpoints and credentials
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
		}
		cli, err := clientv3.New(cc)
		if err != nil {
			return nil, fmt.Errorf("witness: etcd %s: %w", strings.Join(eps, ","), err)
		}
		e := NewEtcd(cli, prefix+"/"+name+"/marks/")
		e.own = true
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if _, err := cli.Get(cctx, e.prefix+"probe", clientv3.WithCountOnly()); err != nil {
			cli.Close()
			return nil, fmt.Errorf("witness: etcd %s unreachable within %v: %w", strings.Join(eps, ","), timeout, err)
		}
		return e, nil
	case "zk", "zookeeper":
		servers, root, err := worker.ZooKeeperURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
		}
		conn, events, err := zk.Connect(servers, timeout, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
		if err != nil {
			return nil, fmt.Errorf("witness: zookeeper %s: %w", strings.Join(servers, ","), err)
		}
		wait, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		for {
			select {
			case ev := <-events:
				if ev.State != zk.StateHasSession {
					continue
				}
				go func() { // keep the event channel drained
					for range events {
					}
				}()
				z := NewZooKeeper(conn, root+"/idmint/marks")
				z.own = true
				return z, nil
			case <-wait.Done():
				conn.Close()
				return nil, fmt.Errorf("witness: zookeeper %s unreachable within %v: %w", strings.Join(servers, ","), timeout, wait.Err())
			}
		}
	case "file":
		dir := rest
		if !strings.HasPrefix(dir, "/") {
			return nil, fmt.Errorf("%w: file url %q: want file:///absolute/directory", ErrBadURL, rawURL)
		}
		return OpenFile(dir)
	default:
		db, err := sqldb.Open(ctx, rawURL)
		if err != nil {
			return nil, fmt.Errorf("witness: %w", err)
		}
		s, err := NewSQL(ctx, db)
		if err != nil {
			db.Close()
			return nil, err
		}
		s.own = true
		return s, nil
	}
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}
