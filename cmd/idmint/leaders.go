package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"text/tabwriter"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/idmint/idmint/internal/idtext"
	"github.com/idmint/idmint/monotonic"
	"github.com/idmint/idmint/server/strategies"
	"github.com/idmint/idmint/worker"
)

func init() {
	register(command{name: "leaders", summary: "list who leads each monotonic key, since when, and its bound: idmint leaders --etcd HOST:PORT", run: runLeaders})
}

func runLeaders(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "leaders", "(--etcd HOST:PORT[,HOST:PORT] [--prefix P] | --coordinator etcd://...) [--json]")
	etcd := fs.String("etcd", "", "etcd endpoints host:port[,host:port], as in a monotonic key's options.etcd")
	prefix := fs.String("prefix", strategies.MonotonicOptionPrefix, "etcd prefix of the keys, with --etcd")
	coord := fs.String("coordinator", "", "the serve nodes' etcd:// coordinator URL instead of --etcd, for keys without options.etcd (etcd://host:2379/prefix?name=app)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	var hosts []string
	switch {
	case *coord != "" && *etcd != "":
		return usagef("flags --etcd and --coordinator: give one")
	case *coord != "":
		hosts, *prefix = strategies.MonotonicCoordinatorPrefix(*coord)
		if len(hosts) == 0 {
			return usagef("flag --coordinator: %q is not an etcd:// URL (monotonic keys elect their leader in etcd)", *coord)
		}
	case *etcd != "":
		for _, h := range strings.Split(*etcd, ",") {
			if _, _, err := net.SplitHostPort(h); err != nil {
				return usagef("flag --etcd: %q is not host:port", h)
			}
			hosts = append(hosts, h)
		}
	default:
		return usagef("flag --etcd or --coordinator is needed: where the monotonic keys elect their leader (run `idmint leaders -h`)")
	}
	if !strings.HasPrefix(*prefix, "/") {
		return usagef("flag --prefix: %q must start with /", *prefix)
	}
	cc := clientv3.Config{Endpoints: hosts, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if *coord != "" { // its credentials too
		user, password, err := worker.EtcdAuth(*coord)
		if err != nil {
			return usagef("flag --coordinator: %v", err)
		}
		cc.Username, cc.Password = user, password
	}
	cli, err := clientv3.New(cc)
	if err != nil {
		return fmt.Errorf("etcd %s: %w", strings.Join(hosts, ","), err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ls, err := monotonic.Leaders(ctx, cli, *prefix)
	if err != nil {
		return fmt.Errorf("etcd %s: %w", strings.Join(hosts, ","), err)
	}
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(ls)
	}
	w := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KEY\tLEADER\tNODE\tSINCE\tLEASE LEFT\tCANDIDATES\tBOUND")
	for _, l := range ls {
		leader, node, left := l.Leader, l.Node, "-"
		if leader == "" {
			leader = "(none)"
		}
		if node == "" {
			node = "-"
		}
		if l.LeaseLeft > 0 {
			left = l.LeaseLeft.String()
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%d\n", idtext.Printable(l.Key), idtext.Printable(leader), idtext.Printable(node), stamp(l.Since), left, l.Candidates, l.Bound)
	}
	if len(ls) == 0 {
		if *coord == "" {
			fmt.Fprintf(w, "(no monotonic keys under %s: a cluster keeps them under its coordinator's prefix; try --coordinator etcd://HOST:2379/PREFIX?name=NAME as serve was given it)\n", idtext.Printable(*prefix))
		} else {
			fmt.Fprintf(w, "(no monotonic keys under %s)\n", idtext.Printable(*prefix))
		}
	}
	return w.Flush()
}
