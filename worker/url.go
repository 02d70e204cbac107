package worker

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/idmint/idmint/sqldb"
)

// Open returns the Assigner a coordinator URL names, connecting within the
// configured timeout:
//
//	static://3?horizon=/var/lib/idmint/static.horizon  worker ID 3
//	file:///var/lib/idmint/worker?id=0          kept in that file (id: first use only)
//	etcd://h1:2379,h2:2379/idmint?name=app      keys under /idmint/app/
//	zk://h1:2181,h2:2181/snowflake/app?endpoint=10.0.0.7:8080
//	sqlite:///var/lib/idmint/ids.db             the WORKER_NODE table
//	postgres://user@host/db   mysql://user@tcp(host:3306)/db
//	ip://  ip://10.0.0.7                        low 16 bits of the (private) IPv4
//	mac:// mac://02:00:00:00:00:01              the 48-bit MAC
//	k8s:// k8s://idmint-2 k8s://?env=POD_ORDINAL  StatefulSet ordinal (+offset=N)
//
// static, ip, mac and k8s need horizon, the file their time horizon is kept in
// (WithHorizonFile); horizon=memory (WithMemoryHorizon) keeps it in memory
// only, accepting that a restart with the clock set back can repeat IDs.
// Without either, Acquire refuses and says how to supply one.
//
// Every URL also takes ttl, margin and timeout (Go durations) and holder,
// which override opts. A malformed URL fails with an error wrapping
// ErrBadURL that names the field and the value; an unreachable coordinator
// fails within the timeout.
func Open(ctx context.Context, rawURL string, opts ...Option) (Assigner, error) {
	open, err := parseURL(rawURL, opts)
	if err != nil {
		return nil, err
	}
	return open(ctx)
}

type opener func(ctx context.Context) (Assigner, error)

// parseURL validates rawURL without any I/O and returns what opens it.
func parseURL(rawURL string, opts []Option) (opener, error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok || scheme == "" {
		return nil, fmt.Errorf("%w: %q has no scheme (want static://, file://, etcd://, zk://, sqlite://, postgres://, mysql://, ip://, mac:// or k8s://)", ErrBadURL, sqldb.Redact(rawURL))
	}
	scheme = strings.ToLower(scheme)
	switch scheme {
	case "ip", "mac":
		// Not URLs url.Parse accepts ("mac://02:00:..." has no valid port).
		addr, query, _ := strings.Cut(rest, "?")
		q, err := url.ParseQuery(query)
		if err != nil {
			return nil, fmt.Errorf("%w: %s url query %q: %v", ErrBadURL, scheme, query, err)
		}
		opts, err = fixedOptions(scheme, q, opts)
		if err != nil {
			return nil, err
		}
		addr = strings.TrimSuffix(addr, "/")
		if scheme == "ip" {
			var ip net.IP
			if addr != "" {
				if ip = net.ParseIP(addr); ip == nil || ip.To4() == nil {
					return nil, fmt.Errorf("%w: ip url: address %q is not an IPv4 address", ErrBadURL, addr)
				}
			}
			return func(context.Context) (Assigner, error) { return NewIP(ip, opts...) }, nil
		}
		var mac net.HardwareAddr
		if addr != "" {
			m, err := net.ParseMAC(addr)
			if err != nil || len(m) != 6 {
				return nil, fmt.Errorf("%w: mac url: address %q is not a 48-bit MAC", ErrBadURL, addr)
			}
			mac = m
		}
		return func(context.Context) (Assigner, error) { return NewMAC(mac, opts...) }, nil
	case "k8s":
		return parseK8s(rest, opts)
	case "sqlite", "sqlite3", "postgres", "postgresql", "mysql":
		return func(ctx context.Context) (Assigner, error) { return openSQL(ctx, rawURL, opts) }, nil
	}
	// etcd and zk take a host list ("h1:2379,h2:2379"), which url.Parse
	// refuses as a port: take it out before parsing the rest.
	parsed, hostList := rawURL, ""
	if scheme == "etcd" || scheme == "zk" || scheme == "zookeeper" {
		end := strings.IndexAny(rest, "/?#")
		if end < 0 {
			end = len(rest)
		}
		hostList = rest[:end]
		parsed = scheme + "://hosts" + rest[end:]
		if scheme == "etcd" {
			hostList = etcdHosts(hostList)
		}
	}
	u, err := url.Parse(parsed)
	if err != nil {
		return nil, fmt.Errorf("%w: %s url %q does not parse: %v", ErrBadURL, scheme, parsed, err)
	}
	q := u.Query()
	switch scheme {
	case "static":
		opts, err = fixedOptions(scheme, q, opts)
		if err != nil {
			return nil, err
		}
		id, err := strconv.ParseInt(u.Host+strings.TrimSuffix(u.Path, "/"), 10, 64)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("%w: static url: worker id %q is not a non-negative integer (static://3)", ErrBadURL, u.Host+u.Path)
		}
		return func(context.Context) (Assigner, error) { return NewStatic(id, opts...) }, nil
	case "file":
		opts, err = queryOptions(scheme, q, opts, []string{"id"})
		if err != nil {
			return nil, err
		}
		if u.Host != "" {
			return nil, fmt.Errorf("%w: file url: host %q given; want file:///absolute/path", ErrBadURL, u.Host)
		}
		id := int64(0)
		if v := q.Get("id"); v != "" {
			if id, err = strconv.ParseInt(v, 10, 64); err != nil || id < 0 {
				return nil, fmt.Errorf("%w: file url: id %q is not a non-negative integer", ErrBadURL, v)
			}
		}
		return func(context.Context) (Assigner, error) { return NewFile(u.Path, id, opts...) }, nil
	case "etcd":
		opts, err = queryOptions(scheme, q, opts, []string{"name", sqldb.PasswordFileParam})
		if err != nil {
			return nil, err
		}
		eps, prefix, name, err := etcdParts(hostList, u, q)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) (Assigner, error) {
			// Read when connecting: a password file is a secret that
			// exists where the node runs, not where its config is checked.
			user, password, err := EtcdAuth(rawURL)
			if err != nil {
				return nil, err
			}
			if user != "" {
				opts = append(opts, WithEtcdAuth(user, password))
			}
			return NewEtcd(ctx, eps, prefix+"/"+name+"/", opts...)
		}, nil
	case "zk", "zookeeper":
		opts, err = queryOptions(scheme, q, opts, []string{"endpoint"})
		if err != nil {
			return nil, err
		}
		eps, err := hosts(scheme, hostList, 2181)
		if err != nil {
			return nil, err
		}
		root := strings.TrimSuffix(u.Path, "/")
		if root == "" {
			return nil, fmt.Errorf("%w: zk url: path is empty; want zk://host:2181/snowflake/{name} (Leaf's layout)", ErrBadURL)
		}
		endpoint := q.Get("endpoint")
		return func(ctx context.Context) (Assigner, error) { return NewZooKeeper(ctx, eps, root, endpoint, opts...) }, nil
	}
	return nil, fmt.Errorf("%w: scheme %q is not one of static, file, etcd, zk, sqlite, postgres, mysql, ip, mac, k8s", ErrBadURL, scheme)
}

// parseK8s parses the rest of k8s://[POD][?env=VAR&offset=N&horizon=FILE]
// (NewStatefulSet); the pod name is resolved when the opener runs.
func parseK8s(rest string, opts []Option) (opener, error) {
	host, query, _ := strings.Cut(rest, "?")
	host = strings.TrimSuffix(host, "/")
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("%w: k8s url query %q: %v", ErrBadURL, query, err)
	}
	if opts, err = fixedOptions("k8s", q, opts, "env", "offset"); err != nil {
		return nil, err
	}
	env := q.Get("env")
	if _, ok := q["env"]; ok && !envName(env) {
		return nil, fmt.Errorf("%w: k8s url: env %q is not an environment variable name (want env=POD_ORDINAL)", ErrBadURL, env)
	}
	if host != "" && env != "" {
		return nil, fmt.Errorf("%w: k8s url: pod %q and env %q both given; want one", ErrBadURL, host, env)
	}
	if host != "" {
		if _, err := podOrdinal(host); err != nil {
			return nil, err
		}
	}
	offset := int64(0)
	if v, ok := q["offset"]; ok {
		if offset, err = strconv.ParseInt(v[len(v)-1], 10, 64); err != nil || offset < 0 || offset > maxOrdinal {
			return nil, fmt.Errorf("%w: k8s url: offset %q is not an integer between 0 and %d", ErrBadURL, v[len(v)-1], maxOrdinal)
		}
	}
	return func(context.Context) (Assigner, error) {
		pod, err := statefulSetPod(host, env)
		if err != nil {
			return nil, err
		}
		return NewStatefulSet(pod, offset, opts...)
	}, nil
}

// envName reports whether s is a portable environment variable name.
func envName(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

// EtcdURL returns what an etcd:// coordinator URL names: the endpoints
// (host:port, port 2379 by default), the key prefix ("/idmint" by default)
// and the name ("default"); worker IDs live under prefix/name/. Other
// state a node keeps in the same etcd (monotonic keys) derives its place
// from the same parts.
func EtcdURL(rawURL string) (endpoints []string, prefix, name string, err error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok || !strings.EqualFold(scheme, "etcd") {
		return nil, "", "", fmt.Errorf("%w: %q is not an etcd:// url", ErrBadURL, sqldb.Redact(rawURL))
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	u, err := url.Parse("etcd://hosts" + rest[end:])
	if err != nil {
		return nil, "", "", fmt.Errorf("%w: etcd url %q does not parse: %v", ErrBadURL, sqldb.Redact(rawURL), err)
	}
	return etcdParts(etcdHosts(rest[:end]), u, u.Query())
}

// etcdHosts is the host list of an etcd URL's authority, without the user
// information before its '@'.
func etcdHosts(authority string) string {
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		return authority[i+1:]
	}
	return authority
}

// EtcdAuth returns the etcd user and password an etcd:// URL gives:
// etcd://USER:PASSWORD@host:2379/..., or better etcd://USER@host:2379/...?password_file=PATH,
// which reads the password from a file (a Docker or Kubernetes secret) so
// that it appears in no config, environment or process listing. No user:
// "", "" (etcd without authentication).
func EtcdAuth(rawURL string) (user, password string, err error) {
	_, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return "", "", fmt.Errorf("%w: %q is not an etcd:// url", ErrBadURL, sqldb.Redact(rawURL))
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority := rest[:end]
	u, err := url.Parse("etcd://hosts" + rest[end:])
	if err != nil {
		return "", "", fmt.Errorf("%w: etcd url does not parse: %v", ErrBadURL, err)
	}
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		ui, err := url.Parse("etcd://" + authority[:i+1] + "hosts")
		if err != nil || ui.User == nil {
			return "", "", fmt.Errorf("%w: etcd url: the user information before '@' does not parse (want etcd://USER@host:2379/...?password_file=PATH)", ErrBadURL)
		}
		u.User = ui.User
	}
	if err := sqldb.ApplyPasswordFile(u); err != nil {
		return "", "", fmt.Errorf("%w: etcd url: %v", ErrBadURL, err)
	}
	if u.User == nil {
		return "", "", nil
	}
	password, set := u.User.Password()
	if u.User.Username() == "" || !set {
		return "", "", fmt.Errorf("%w: etcd url: user %q has no password; want etcd://USER@host:2379/...?password_file=PATH", ErrBadURL, u.User.Username())
	}
	return u.User.Username(), password, nil
}

// EtcdClientConfig is the etcd client configuration an etcd:// URL names:
// its endpoints and credentials, a silent logger, the given dial timeout.
func EtcdClientConfig(rawURL string, dialTimeout time.Duration) (clientv3.Config, error) {
	eps, _, _, err := EtcdURL(rawURL)
	if err != nil {
		return clientv3.Config{}, err
	}
	user, password, err := EtcdAuth(rawURL)
	if err != nil {
		return clientv3.Config{}, err
	}
	return clientv3.Config{Endpoints: eps, DialTimeout: dialTimeout, Logger: zap.NewNop(), Context: context.Background(),
		Username: user, Password: password}, nil
}

func etcdParts(hostList string, u *url.URL, q url.Values) (endpoints []string, prefix, name string, err error) {
	endpoints, err = hosts("etcd", hostList, 2379)
	if err != nil {
		return nil, "", "", err
	}
	prefix = strings.TrimSuffix(u.Path, "/")
	if prefix == "" {
		prefix = "/idmint"
	}
	name = q.Get("name")
	if name == "" {
		name = "default"
	}
	if strings.ContainsAny(name, "/ ") {
		return nil, "", "", fmt.Errorf("%w: etcd url: name %q must not contain '/' or spaces", ErrBadURL, name)
	}
	return endpoints, prefix, name, nil
}

// fixedOptions is queryOptions for static, ip, mac and k8s, which also
// take horizon=FILE (and the parameters extra names).
func fixedOptions(scheme string, q url.Values, opts []Option, extra ...string) ([]Option, error) {
	out, err := queryOptions(scheme, q, opts, append([]string{"horizon"}, extra...))
	if err != nil {
		return nil, err
	}
	if vs, ok := q["horizon"]; ok {
		v := vs[len(vs)-1]
		if v == "" {
			return nil, fmt.Errorf("%w: %s url: horizon %q is empty; want horizon=/var/lib/idmint/%s.horizon", ErrBadURL, scheme, v, scheme)
		}
		if v == "memory" {
			out = append(out, WithMemoryHorizon())
		} else {
			out = append(out, WithHorizonFile(v))
		}
	}
	return out, nil
}

// hosts splits "h1:p1,h2" into host:port endpoints.
func hosts(scheme, list string, defPort int) ([]string, error) {
	if list == "" {
		return nil, fmt.Errorf("%w: %s url: host is empty; want %s://host:%d", ErrBadURL, scheme, scheme, defPort)
	}
	var out []string
	for _, h := range strings.Split(list, ",") {
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			host, port = h, strconv.Itoa(defPort)
		}
		if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 || host == "" {
			return nil, fmt.Errorf("%w: %s url: host %q is not host:port", ErrBadURL, scheme, h)
		}
		out = append(out, net.JoinHostPort(host, port))
	}
	return out, nil
}

// queryOptions turns the common query parameters into Options appended to
// opts, and rejects parameters neither common nor in extra.
func queryOptions(scheme string, q url.Values, opts []Option, extra []string) ([]Option, error) {
	out := append([]Option(nil), opts...)
	for k, vs := range q {
		v := vs[len(vs)-1]
		switch k {
		case "ttl", "margin", "timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("%w: %s url: %s %q is not a positive duration such as 3s", ErrBadURL, scheme, k, v)
			}
			out = append(out, map[string]func(time.Duration) Option{"ttl": WithTTL, "margin": WithMargin, "timeout": WithTimeout}[k](d))
		case "holder":
			out = append(out, WithHolder(v))
		default:
			known := false
			for _, e := range extra {
				known = known || e == k
			}
			if !known {
				return nil, fmt.Errorf("%w: %s url: unknown parameter %q (want ttl, margin, timeout, holder%s)", ErrBadURL, scheme, k, extraList(extra))
			}
		}
	}
	return out, nil
}

func extraList(extra []string) string {
	if len(extra) == 0 {
		return ""
	}
	return ", " + strings.Join(extra, ", ")
}

// ZooKeeperURL returns what a zk:// coordinator URL names: the servers
// (host:port, port 2181 by default) and the root path (Leaf's
// /snowflake/{name}). Other state a node keeps in the same ensemble (the
// marks of package witness) lives under the same root.
func ZooKeeperURL(rawURL string) (servers []string, root string, err error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok || !(strings.EqualFold(scheme, "zk") || strings.EqualFold(scheme, "zookeeper")) {
		return nil, "", fmt.Errorf("%w: %q is not a zk:// url", ErrBadURL, rawURL)
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	u, err := url.Parse("zk://hosts" + rest[end:])
	if err != nil {
		return nil, "", fmt.Errorf("%w: zk url %q does not parse: %v", ErrBadURL, rawURL, err)
	}
	servers, err = hosts("zk", rest[:end], 2181)
	if err != nil {
		return nil, "", err
	}
	root = strings.TrimSuffix(u.Path, "/")
	if root == "" {
		return nil, "", fmt.Errorf("%w: zk url: path is empty; want zk://host:2181/snowflake/{name} (Leaf's layout)", ErrBadURL)
	}
	return servers, root, nil
}
