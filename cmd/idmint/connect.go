package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idmint/idmint/segment/redisstore"
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/sqldb"
	"github.com/idmint/idmint/worker"
)

// connectTimeout bounds each connection `serve --check --connect` opens.
const connectTimeout = 5 * time.Second

// endpoint is one server a config depends on: where it is named and its URL.
type endpoint struct{ field, url string }

// endpoints lists what a config connects to: the stores, the coordinator,
// the witness and the etcd of a monotonic key that names its own.
func endpoints(cfg *server.Config) []endpoint {
	var out []endpoint
	for _, name := range sortedNames(cfg.Stores) {
		out = append(out, endpoint{"stores." + name, cfg.Stores[name]})
	}
	if cfg.Coordinator != "" {
		out = append(out, endpoint{"coordinator", cfg.Coordinator})
	}
	if w := cfg.Witness; w != "" && w != "none" {
		out = append(out, endpoint{"witness", w})
	}
	for _, name := range sortedNames(cfg.Keys) {
		k := cfg.Keys[name]
		if v := k.Options["etcd"]; v != "" {
			out = append(out, endpoint{"keys." + name + ".options.etcd", "etcd://" + v})
		}
		if v := k.Options["redis"]; v != "" {
			out = append(out, endpoint{"keys." + name + ".options.redis", v})
		}
	}
	return out
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// notConnected says what --check did not do: a config naming five
// unreachable hosts is still "OK" to a check that opens nothing.
func notConnected(cfg *server.Config) string {
	n := 0
	for _, ep := range endpoints(cfg) {
		if remote(ep.url) {
			n++
		}
	}
	if n == 0 {
		return "no remote store or coordinator configured"
	}
	return fmt.Sprintf("did not connect to its %d remote store(s) and coordinator(s); --check --connect opens each", n)
}

// remote reports whether url names a server over the network.
func remote(url string) bool {
	scheme, _, _ := strings.Cut(strings.ToLower(url), "://")
	switch scheme {
	case "postgres", "postgresql", "mysql", "mariadb", "redis", "rediss", "etcd", "zk", "zookeeper":
		return true
	}
	return false
}

// checkConnections opens every remote endpoint of cfg at once, each within
// connectTimeout, reads nothing it would change and writes nothing, and
// prints one line per endpoint. It fails when any could not be reached.
func checkConnections(ctx context.Context, cfg *server.Config, w io.Writer) error {
	eps := endpoints(cfg)
	res := make([]string, len(eps))
	failed := make([]bool, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		if !remote(ep.url) {
			res[i] = fmt.Sprintf("  -     %-28s %s (on this machine, not opened)", ep.field, sqldb.Redact(ep.url))
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, connectTimeout)
			defer cancel()
			start := time.Now()
			err := dial(cctx, ep.url)
			took := time.Since(start).Round(time.Millisecond)
			if err != nil {
				failed[i] = true
				msg := strings.Join(strings.Fields(err.Error()), " ")
				res[i] = fmt.Sprintf("  FAIL  %-28s %s: %s", ep.field, sqldb.Redact(ep.url), msg)
				return
			}
			res[i] = fmt.Sprintf("  ok    %-28s %s (%v)", ep.field, sqldb.Redact(ep.url), took)
		}()
	}
	wg.Wait()
	bad, dialled := 0, 0
	for _, ep := range eps {
		if remote(ep.url) {
			dialled++
		}
	}
	for i, line := range res {
		fmt.Fprintln(w, line)
		if failed[i] {
			bad++
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d remote endpoint(s) failed the check (each had %v)", bad, dialled, connectTimeout)
	}
	return nil
}

// dial connects to url and checks it answers, without changing anything.
func dial(ctx context.Context, url string) error {
	scheme, _, _ := strings.Cut(strings.ToLower(url), "://")
	switch scheme {
	case "postgres", "postgresql", "mysql", "mariadb":
		db, err := sqldb.Open(ctx, url)
		if err != nil {
			return err
		}
		return db.Close()
	case "redis", "rediss":
		s, err := redisstore.Open(ctx, url)
		if err != nil {
			return err
		}
		return s.Close()
	case "etcd":
		cc, err := worker.EtcdClientConfig(url, connectTimeout)
		if err != nil {
			return err
		}
		cc.Context = ctx
		c, err := clientv3.New(cc)
		if err != nil {
			return err
		}
		defer c.Close()
		_, prefix, _, _ := worker.EtcdURL(url) // parsed above
		_, err = c.Get(ctx, prefix, clientv3.WithCountOnly(), clientv3.WithPrefix())
		return err
	case "zk", "zookeeper":
		servers, root, err := worker.ZooKeeperURL(url)
		if err != nil {
			return err
		}
		conn, _, err := zk.Connect(servers, connectTimeout, zk.WithLogger(quietZK{}))
		if err != nil {
			return err
		}
		defer conn.Close()
		done := make(chan error, 1)
		go func() { _, _, err := conn.Exists(root); done <- err }()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return errors.New("no answer (is ZooKeeper listening there?)")
		}
	}
	return fmt.Errorf("unknown scheme %q", scheme)
}

// quietZK drops go-zookeeper's connection log lines.
type quietZK struct{}

func (quietZK) Printf(string, ...any) {}
