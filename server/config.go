package server

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/idmint/idmint/region"
)

// Config is the whole server configuration. Load it with ParseConfig (YAML),
// then call SetDefaults, apply overrides (Override, flags), and Validate.
type Config struct {
	// Listen is the public address. Default 127.0.0.1:8080.
	Listen string `yaml:"listen"`
	// GRPCListen is the gRPC address (service idmint.v1.IDs). Empty: no
	// gRPC listener.
	GRPCListen string `yaml:"grpc_listen"`
	// GRPCReflection serves gRPC server reflection (grpc.reflection.v1) on
	// the gRPC listener, so grpcurl and similar tools can list and call the
	// services without the .proto. Off by default: it tells anyone who can
	// connect which services and methods there are.
	GRPCReflection bool `yaml:"grpc_reflection"`
	// AdminListen is the admin address serving pprof, /metrics and health.
	// Empty: no admin listener (and no pprof anywhere).
	AdminListen string `yaml:"admin_listen"`
	// DataDir holds the embedded state (SQLite store, worker file, keys
	// created through the API). Default ./idmint-data.
	DataDir string `yaml:"data_dir"`
	// Coordinator says how this node gets its worker ID: static://N,
	// file:///path, postgres://..., mysql://..., etcd://host:port/prefix,
	// zk://host:port/path. Default file://<data_dir>/worker.
	Coordinator string `yaml:"coordinator"`
	// Witness says where, besides the data directory, this node keeps the
	// high-water marks of the ID spaces whose numbers come from a store
	// (segment, ticket, redis, monotonic keys), so that a store that loses
	// acknowledged writes (a failover to a lagging replica, a restored
	// backup) cannot make two nodes issue the same IDs. "" (default): the
	// coordinator, when it is etcd:// or zk://; a URL (etcd://, zk://,
	// postgres://, mysql://: a database other than the stores): there;
	// "none": the data directory only.
	Witness string `yaml:"witness"`
	// Stores names the segment stores; keys refer to them by name. The
	// store "default" is sqlite://<data_dir>/segments.db unless given.
	Stores map[string]string `yaml:"stores"`
	// Layouts names custom snowflake bit layouts; each value is a layout
	// spec as snowflake.ParseLayout reads it
	// ("time=41:1ms,worker=10,seq=12,epoch=2024-01-01").
	Layouts map[string]string `yaml:"layouts"`
	// Keys are the ID spaces served, by name.
	Keys KeyConfigs `yaml:"keys"`
	// Metrics says where /metrics is served: "admin" (the admin listener
	// only, behind its auth) or "public" (both listeners). Default: admin
	// when admin_listen is set, public otherwise.
	Metrics string `yaml:"metrics"`
	// KeyDir is the only place key material named by a key created through
	// the admin API may come from: such a key's options.key_file must be
	// a bare file name in this directory. Empty: API-created keys cannot
	// use key files (config keys name any path; the operator wrote it).
	KeyDir string `yaml:"key_dir"`
	// AdminToken guards key administration. Empty: admin calls are served
	// to loopback clients only.
	AdminToken string `yaml:"admin_token"`
	// AdminTokenFile names a file holding admin_token (its first line): a
	// Kubernetes Secret or Docker secret mounted as a file, so the token
	// is in no config file, environment variable or process listing.
	// Override reads it. Give admin_token or admin_token_file, not both.
	AdminTokenFile string `yaml:"admin_token_file"`
	// MetricsToken is a scrape-only credential: a request carrying it as
	// `Authorization: Bearer <token>` may GET /metrics wherever /metrics
	// is served, and nothing else (no key administration, no pprof, no
	// dashboard data), so a Prometheus never holds the admin token. The
	// admin token still reads /metrics too. Empty: none.
	MetricsToken string `yaml:"metrics_token"`
	// MetricsTokenFile names a file holding metrics_token, as
	// admin_token_file does for admin_token.
	MetricsTokenFile string `yaml:"metrics_token_file"`
	// TLS, when both files are set, makes the public listener serve HTTPS.
	TLS TLSConfig `yaml:"tls"`
	// MaxCount is the most IDs one request may ask for. Default 10000.
	MaxCount int `yaml:"max_count"`
	// MaxKeys caps the keys created through the admin API: a create that
	// would make the server hold more than MaxKeys keys (config keys
	// included; they are never refused) answers 429 naming max_keys.
	// Default 4096: every key holds buffers, metrics and a dashboard row.
	MaxKeys int `yaml:"max_keys"`
	// MaxConns is the most connections the public HTTP listener holds at
	// once; further clients wait in the kernel's accept queue until one
	// closes (idle ones close after idle_timeout). Default 4096: with a
	// connection's buffers and goroutine, tens of MiB at most.
	MaxConns int `yaml:"max_conns"`
	// MaxBodyBytes limits request bodies. Default 64 KiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// AnswerBudget is the most bytes of answers (over 1 KiB each) the
	// server holds at once for clients that have not read them yet, HTTP
	// and gRPC together; a request finding it spent waits up to a second,
	// then gets 503 with Retry-After. Default 32 MiB.
	AnswerBudget int64 `yaml:"answer_budget"`
	// AnswerTimeout is how long a client has to read an answer over 1 KiB
	// before its connection is closed. Default 10s.
	AnswerTimeout Duration `yaml:"answer_timeout"`
	// MemoryLimit is the soft memory limit serve gives the Go runtime
	// (runtime/debug.SetMemoryLimit), in bytes, unless GOMEMLIMIT is set:
	// the collector works harder near it instead of letting garbage grow
	// to GOGC's target. Default max(96 MiB, 3 x answer_budget) plus
	// MemoryPerKey for each key the server may hold (the config's keys or
	// max_keys, whichever is more); -1: none.
	MemoryLimit int64 `yaml:"memory_limit"`
	// LeafSnowflakeKey serves /api/snowflake/get/{key} for keys that are
	// not configured (Leaf's snowflake endpoint ignores the key) and
	// /decodeSnowflakeId. Default: the snowflake key called "snowflake",
	// or else the config's only snowflake key, whatever its name (see
	// SnowflakeKeys).
	LeafSnowflakeKey string `yaml:"leaf_snowflake_key"`
	// Timeouts against slow clients. Defaults: read_header 5s, read 30s,
	// write 30s, idle 120s, shutdown 30s.
	ReadHeaderTimeout Duration `yaml:"read_header_timeout"`
	ReadTimeout       Duration `yaml:"read_timeout"`
	WriteTimeout      Duration `yaml:"write_timeout"`
	IdleTimeout       Duration `yaml:"idle_timeout"`
	ShutdownTimeout   Duration `yaml:"shutdown_timeout"`
	// Region names the region (datacenter) this node belongs to, when
	// several regions that share no store and no coordinator split one ID
	// space. Unset: a single region, every ID as without the section.
	Region RegionConfig `yaml:"region"`
	// DrainPeriod is how long a node keeps serving after SIGTERM while
	// /readyz answers 503 "draining", so load balancers and Kubernetes
	// move clients to other nodes before it stops accepting. Nil: the
	// default, DefaultDrainPeriod; 0s: stop accepting at once. Read it
	// with Drain.
	DrainPeriod *Duration `yaml:"drain_period"`

	// adminFromFile and metricsFromFile record that Override read the
	// token from its file (a second Override does not see the token and
	// its file as both given).
	adminFromFile, metricsFromFile bool
	// getenv is what Override was given, kept for Getenv.
	getenv func(string) string
	// src is the document ParseConfig read; Validate finds its problems'
	// lines in it.
	src []byte
}

// MetricsPublic reports whether the public listener serves /metrics: the
// config says "public", or says nothing and there is no admin listener.
func (c *Config) MetricsPublic() bool {
	return c.Metrics == "public" || (c.Metrics == "" && c.AdminListen == "")
}

// Getenv returns the environment variable name as seen by the getenv that
// Override was given (the binary passes os.Getenv; tests pass a map), or ""
// when Override was never called. Strategies read secrets named in key
// options through it (for example an order-number key_env), so the
// server's packages never read the process environment themselves.
func (c *Config) Getenv(name string) string {
	if c == nil || c.getenv == nil {
		return ""
	}
	return c.getenv(name)
}

// RegionConfig is the region: section. Its fields are fixed for the
// lifetime of the keys: the region's share of every key's ID space
// follows from Index and Count.
type RegionConfig struct {
	// Name names the region ("eu-west"): lower-case letters, digits and
	// '-'. Required when the section is set.
	Name string `yaml:"name"`
	// Index is the region's place, 0 <= Index < Count.
	Index int `yaml:"index"`
	// Count is how many regions the ID space is split among.
	Count int `yaml:"count"`
	// Registry, optional, is where every region claims its index once:
	// an etcd://host:port/prefix URL or a postgres:// or mysql:// database
	// every region reaches.
	Registry string `yaml:"registry"`
}

// Set reports whether the config has a region: section.
func (r RegionConfig) Set() bool { return r != RegionConfig{} }

// RegionSpec returns the configured region; the zero Region when none is
// set.
func (c *Config) RegionSpec() region.Region {
	if c == nil || !c.Region.Set() {
		return region.Region{}
	}
	return region.Region{Name: c.Region.Name, Index: c.Region.Index, Count: c.Region.Count}
}

// TLSConfig names a certificate and its key (PEM files).
type TLSConfig struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// KeyConfigs is the keys: section of a config, by key name. It decodes
// itself from YAML: the yaml package checks a mapping for duplicate keys by
// comparing every pair, and 100,000 keys took 52 s to parse. Here a map
// finds duplicates, and each key's fields are checked against KeyConfig's
// as the decoder's KnownFields would.
type KeyConfigs map[string]KeyConfig

func (k *KeyConfigs) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		*k = nil
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: keys must be a mapping of key names to key settings", n.Line)
	}
	m := make(KeyConfigs, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		name := kn.Value
		if _, dup := m[name]; dup {
			return fmt.Errorf("line %d: key %q is already defined", kn.Line, name)
		}
		if vn.Kind == yaml.MappingNode {
			for j := 0; j+1 < len(vn.Content); j += 2 {
				if f := vn.Content[j]; f.Value != "<<" && !keyConfigFields[f.Value] {
					return fmt.Errorf("line %d: field %s not found in type server.KeyConfig (key %q)", f.Line, f.Value, name)
				}
			}
		}
		var kc KeyConfig
		if err := vn.Decode(&kc); err != nil {
			return fmt.Errorf("key %q: %w", name, err)
		}
		m[name] = kc
	}
	*k = m
	return nil
}

// keyConfigFields are the YAML names of KeyConfig's fields.
var keyConfigFields = func() map[string]bool {
	t := reflect.TypeOf(KeyConfig{})
	m := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); tag != "" && tag != "-" {
			m[tag] = true
		}
	}
	return m
}()

// KeyConfig configures one key (Leaf's biz_tag).
type KeyConfig struct {
	// Strategy names a registered Strategy.
	Strategy string `yaml:"strategy" json:"strategy"`
	// Store names an entry of Config.Stores (segment, ticket keys).
	// Default "default".
	Store string `yaml:"store,omitempty" json:"store,omitempty"`
	// Layout names a layout (snowflake keys).
	Layout string `yaml:"layout,omitempty" json:"layout,omitempty"`
	// Step is the block size leased from the store (segment keys).
	Step int64 `yaml:"step,omitempty" json:"step,omitempty"`
	// Tokens, when any, are required as `Authorization: Bearer <token>`
	// to get IDs of this key.
	Tokens []string `yaml:"tokens,omitempty" json:"-"`
	// RateLimit caps requests per second for this key (0: unlimited);
	// bursts of up to one second's worth are allowed.
	RateLimit float64 `yaml:"rate_limit,omitempty" json:"rate_limit,omitempty"`
	// Options are strategy-specific settings.
	Options map[string]string `yaml:"options,omitempty" json:"options,omitempty"`
	// NodeLocal says that this key's numbers may live on this node alone
	// (a segment key on the data directory's SQLite, a monotonic key's
	// bound file) although the coordinator implies several nodes: each
	// node then issues its own, overlapping numbers. Without it such a key
	// is refused at start.
	NodeLocal bool `yaml:"node_local,omitempty" json:"node_local,omitempty"`

	// api is set for keys created through the admin API (and reloaded
	// from the KeyStore): their options came from a request, so a
	// strategy must not let them name files or environment variables.
	api bool
}

// ClusterCoordinator reports whether the coordinator implies several
// nodes sharing the keys (etcd, ZooKeeper, a SQL worker table on
// PostgreSQL or MySQL, a Kubernetes StatefulSet), and names its kind.
func (c *Config) ClusterCoordinator() (string, bool) {
	scheme, _, _ := strings.Cut(c.Coordinator, "://")
	switch s := strings.ToLower(scheme); s {
	case "etcd", "zk", "zookeeper", "postgres", "postgresql", "mysql", "k8s":
		return s, true
	}
	return "", false
}

// FromAPI reports whether the key was created through the admin API
// (now, or before a restart, from the KeyStore) rather than written in the
// config file. Strategies refuse options of such keys that would read
// server-side files or environment variables outside what the config
// allows (an order-number key's key_file outside key_dir, its key_env).
func (k KeyConfig) FromAPI() bool { return k.api }

// Duration is a time.Duration written as "1.5s" in YAML and JSON.
type Duration time.Duration

// UnmarshalYAML reads a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: bad duration %q", n.Line, s)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as a Go duration string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return strconv.AppendQuote(nil, time.Duration(d).String()), nil
}

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s, err := strconv.Unquote(string(b))
	if err != nil {
		return fmt.Errorf("bad duration %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("bad duration %q", s)
	}
	*d = Duration(v)
	return nil
}

// Defaults used by SetDefaults.
const (
	DefaultListen       = "127.0.0.1:8080"
	DefaultDataDir      = "idmint-data"
	DefaultMaxCount     = 10000
	DefaultMaxBodyBytes = 64 << 10
	DefaultAnswerBudget = 32 << 20
	DefaultMaxConns     = 4096
	DefaultMaxKeys      = 4096
	DefaultStore        = "default"
	// DefaultDrainPeriod is drain_period's default: two failed probes of
	// a readiness check every 2 s, and a load balancer's poll, fit in it.
	DefaultDrainPeriod = 5 * time.Second
)

// Drain is the drain period: DrainPeriod, or DefaultDrainPeriod when it is
// not set.
func (c *Config) Drain() time.Duration {
	if c.DrainPeriod == nil {
		return DefaultDrainPeriod
	}
	return time.Duration(*c.DrainPeriod)
}

// MemoryPerKey is what the default memory_limit allows each key: its live
// heap is about 2.4 KiB, and the rest lets GOGC's headroom work.
const MemoryPerKey = 8 << 10

// MaxConfigBytes is the largest config file ParseConfig reads (100,000
// keys take about 3.5 MB).
const MaxConfigBytes = 64 << 20

// ParseConfig reads a YAML config. Unknown fields are errors (a typo must
// not silently fall back to a default).
func ParseConfig(r io.Reader) (*Config, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("server: read config: %w", err)
	}
	if len(b) > MaxConfigBytes {
		return nil, fmt.Errorf("server: config is larger than %d bytes", MaxConfigBytes)
	}
	doc, ps := lintConfig(b, nil)
	if len(ps) > 0 {
		lines := linesOf(b)
		for i := range ps {
			if ps[i].Line == 0 {
				ps[i].Line = lines.line(ps[i].Field)
			}
		}
		return nil, &ValidationError{Problems: ps}
	}
	c := Config{src: b}
	// The document's every field was checked against Config above, so it
	// decodes from the parsed tree without a second parse.
	if err := doc.Decode(&c); err != nil {
		return nil, fmt.Errorf("server: config: %w", err)
	}
	return &c, nil
}

// SetDefaults fills every unset field with its default. The data directory
// default is relative to the working directory.
func (c *Config) SetDefaults() {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.Coordinator == "" {
		c.Coordinator = "file://" + filepath.ToSlash(absOrSelf(filepath.Join(c.DataDir, "worker")))
	}
	if c.Stores == nil {
		c.Stores = map[string]string{}
	}
	if _, ok := c.Stores[DefaultStore]; !ok {
		c.Stores[DefaultStore] = "sqlite://" + filepath.ToSlash(absOrSelf(filepath.Join(c.DataDir, "segments.db")))
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaxKeys == 0 {
		c.MaxKeys = DefaultMaxKeys
	}
	if c.MaxCount == 0 {
		c.MaxCount = DefaultMaxCount
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.AnswerBudget == 0 {
		c.AnswerBudget = DefaultAnswerBudget
	}
	if c.MemoryLimit == 0 {
		// Room for every key the server may hold besides: a live heap of
		// 100,000 keys (230 MiB) above a fixed limit kept the collector
		// running (half the CPU, a 37 s start instead of 3 s).
		keys := max(len(c.Keys), c.MaxKeys)
		c.MemoryLimit = max(96<<20, 3*c.AnswerBudget) + int64(keys)*MemoryPerKey
	}
	if c.LeafSnowflakeKey == "" {
		c.LeafSnowflakeKey = defaultSnowflakeKey(c.Keys)
	}
	def := func(d *Duration, v time.Duration) {
		if *d == 0 {
			*d = Duration(v)
		}
	}
	def(&c.ReadHeaderTimeout, 5*time.Second)
	def(&c.ReadTimeout, 30*time.Second)
	def(&c.WriteTimeout, 30*time.Second)
	def(&c.IdleTimeout, 120*time.Second)
	def(&c.ShutdownTimeout, 30*time.Second)
	if c.DrainPeriod == nil {
		d := Duration(DefaultDrainPeriod)
		c.DrainPeriod = &d
	}
	def(&c.AnswerTimeout, 10*time.Second)
	for name, k := range c.Keys {
		if k.Store == "" {
			k.Store = DefaultStore
			c.Keys[name] = k
		}
	}
}

func absOrSelf(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// Override applies environment variables over the config (getenv is
// os.Getenv in the binary; the package never reads the environment itself):
//
//	IDMINT_LISTEN, IDMINT_GRPC_LISTEN, IDMINT_ADMIN_LISTEN, IDMINT_DATA_DIR, IDMINT_COORDINATOR, IDMINT_WITNESS,
//	IDMINT_STORE (the default store's URL), IDMINT_ADMIN_TOKEN, IDMINT_ADMIN_TOKEN_FILE,
//	IDMINT_METRICS_TOKEN, IDMINT_METRICS_TOKEN_FILE,
//	IDMINT_MAX_COUNT, IDMINT_TLS_CERT, IDMINT_TLS_KEY, IDMINT_DRAIN_PERIOD.
//
// A token given in the environment, as a value or as a file, replaces
// both forms in the config. Then Override reads admin_token_file and
// metrics_token_file into AdminToken and MetricsToken (the file's first
// line), so every later step sees the tokens themselves.
//
// Call it before SetDefaults so that derived defaults follow
// IDMINT_DATA_DIR. It fails naming the variable (or field) and value when
// one does not parse or a token file cannot be read.
//
// getenv is kept for Getenv, so strategies can resolve variables a key's
// options name.
func (c *Config) Override(getenv func(string) string) error {
	c.getenv = getenv
	set := func(name string, dst *string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	set("IDMINT_LISTEN", &c.Listen)
	set("IDMINT_ADMIN_LISTEN", &c.AdminListen)
	set("IDMINT_GRPC_LISTEN", &c.GRPCListen)
	set("IDMINT_DATA_DIR", &c.DataDir)
	set("IDMINT_COORDINATOR", &c.Coordinator)
	set("IDMINT_WITNESS", &c.Witness)
	if err := envToken(getenv, "IDMINT_ADMIN_TOKEN", &c.AdminToken, &c.AdminTokenFile, &c.adminFromFile); err != nil {
		return err
	}
	if err := envToken(getenv, "IDMINT_METRICS_TOKEN", &c.MetricsToken, &c.MetricsTokenFile, &c.metricsFromFile); err != nil {
		return err
	}
	set("IDMINT_TLS_CERT", &c.TLS.CertFile)
	set("IDMINT_TLS_KEY", &c.TLS.KeyFile)
	if v := getenv("IDMINT_STORE"); v != "" {
		if c.Stores == nil {
			c.Stores = map[string]string{}
		}
		c.Stores[DefaultStore] = v
	}
	if v := getenv("IDMINT_MAX_COUNT"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("server: IDMINT_MAX_COUNT: %q is not a whole number", v)
		}
		c.MaxCount = n
	}
	if v := getenv("IDMINT_DRAIN_PERIOD"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("server: IDMINT_DRAIN_PERIOD: %q is not a duration (5s, 0s)", v)
		}
		dd := Duration(d)
		c.DrainPeriod = &dd
	}
	if err := readToken("admin_token", &c.AdminToken, c.AdminTokenFile, &c.adminFromFile); err != nil {
		return err
	}
	return readToken("metrics_token", &c.MetricsToken, c.MetricsTokenFile, &c.metricsFromFile)
}

// Problem is one thing wrong with a config: the field path
// ("keys.order.step"), the offending value, and what is wrong.
type Problem struct {
	Field   string
	Value   string
	Message string
	// Line is the config file's line the problem is on; 0 when unknown
	// (a flag, an environment variable, a key created through the API).
	Line int
}

// String renders the problem as "line N: field: message (value "v")",
// without the parts that are unknown or empty.
func (p Problem) String() string {
	var b strings.Builder
	if p.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	if p.Value != "" {
		fmt.Fprintf(&b, " (value %q)", p.Value)
	}
	return b.String()
}

// ValidationError lists every problem Validate found.
type ValidationError struct{ Problems []Problem }

// Error lists every problem, one per line.
func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "server: config has %d problem(s):", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// ErrInvalidConfig is matched (errors.Is) by every *ValidationError.
var ErrInvalidConfig = errors.New("server: invalid config")

// Is reports whether target is ErrInvalidConfig.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalidConfig }

// Validate checks the whole config (after SetDefaults) against reg and
// returns a *ValidationError listing every problem, or nil.
func (c *Config) Validate(reg *Registry) error {
	var ps []Problem
	add := func(field, value, format string, a ...any) {
		ps = append(ps, Problem{Field: field, Value: value, Message: fmt.Sprintf(format, a...)})
	}
	loopbackOnly := true
	if err := checkAddr(c.Listen); err != nil {
		add("listen", c.Listen, "%v", err)
	} else if !isLoopbackAddr(c.Listen) {
		loopbackOnly = false
	}
	if c.GRPCListen != "" {
		if err := checkAddr(c.GRPCListen); err != nil {
			add("grpc_listen", c.GRPCListen, "%v", err)
		} else if !isLoopbackAddr(c.GRPCListen) && c.AdminToken == "" {
			add("grpc_listen", c.GRPCListen, "serving a non-loopback address needs admin_token (without it only loopback is served)")
		}
	}
	if c.AdminListen != "" {
		if err := checkAddr(c.AdminListen); err != nil {
			add("admin_listen", c.AdminListen, "%v", err)
		} else if !isLoopbackAddr(c.AdminListen) && c.AdminToken == "" {
			add("admin_listen", c.AdminListen, "a non-loopback admin listener needs admin_token (it serves pprof)")
		}
	}
	if !loopbackOnly && c.AdminToken == "" {
		add("listen", c.Listen, "serving a non-loopback address needs admin_token (without it only loopback is served)")
	}
	switch c.Metrics {
	case "", "public":
	case "admin":
		if c.AdminListen == "" {
			add("metrics", c.Metrics, "serving /metrics on the admin listener needs admin_listen")
		}
	default:
		add("metrics", c.Metrics, `must be "admin" or "public"`)
	}
	if c.AdminToken != "" && len(c.AdminToken) < 16 {
		add("admin_token", "(redacted)", "must be at least 16 characters")
	}
	if c.MetricsToken != "" {
		if len(c.MetricsToken) < 16 {
			add("metrics_token", "(redacted)", "must be at least 16 characters")
		}
		if c.MetricsToken == c.AdminToken {
			add("metrics_token", "(redacted)", "is the admin token: a scrape-only credential must differ from it, or whoever scrapes can administer")
		}
	}
	for _, f := range []struct{ field, token, file string }{
		{"admin_token_file", c.AdminToken, c.AdminTokenFile},
		{"metrics_token_file", c.MetricsToken, c.MetricsTokenFile},
	} {
		if f.file != "" && f.token == "" {
			add(f.field, f.file, "was not read (Config.Override reads it)")
		}
	}
	if c.DataDir == "" {
		add("data_dir", "", "must not be empty")
	}
	if c.Coordinator != "" {
		if _, err := url.Parse(c.Coordinator); err != nil {
			add("coordinator", redactURL(c.Coordinator), "not a URL: %v", err)
		}
	}
	if c.Witness != "" && c.Witness != "none" {
		scheme, _, ok := strings.Cut(c.Witness, "://")
		switch strings.ToLower(scheme) {
		case "etcd", "zk", "zookeeper", "postgres", "postgresql", "mysql":
		default:
			ok = false
		}
		if !ok {
			add("witness", redactURL(c.Witness), `must be "none" or an etcd://, zk://, postgres:// or mysql:// URL (a database other than the stores)`)
		}
		for _, name := range sortedKeys(c.Stores) {
			if c.Stores[name] == c.Witness {
				add("witness", redactURL(c.Witness), "is the URL of store %q: a witness must be another failure domain, or a failover of that database takes both", name)
			}
		}
	}
	if c.Region.Set() {
		ps = append(ps, c.checkRegion()...)
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		add("tls", c.TLS.CertFile+","+c.TLS.KeyFile, "cert_file and key_file must be given together")
	}
	if c.MaxCount < 1 || c.MaxCount > 1_000_000 {
		add("max_count", strconv.Itoa(c.MaxCount), "must be between 1 and 1000000")
	}
	if c.MaxKeys < 1 || c.MaxKeys > 1<<20 {
		add("max_keys", strconv.Itoa(c.MaxKeys), "must be between 1 and 1048576")
	}
	if c.MaxConns < 1 || c.MaxConns > 1<<20 {
		add("max_conns", strconv.Itoa(c.MaxConns), "must be between 1 and 1048576")
	}
	if c.MaxBodyBytes < 1 {
		add("max_body_bytes", strconv.FormatInt(c.MaxBodyBytes, 10), "must be positive")
	}
	if c.AnswerBudget < 64<<10 || c.AnswerBudget > 1<<40 {
		add("answer_budget", strconv.FormatInt(c.AnswerBudget, 10), "must be between 65536 bytes (64 KiB) and 2^40")
	}
	if c.MemoryLimit != -1 && (c.MemoryLimit < 16<<20 || c.MemoryLimit > 1<<50) {
		add("memory_limit", strconv.FormatInt(c.MemoryLimit, 10), "must be at least 16777216 bytes (16 MiB), or -1 for no limit")
	}
	if c.AnswerTimeout < 0 || (c.AnswerTimeout > 0 && time.Duration(c.AnswerTimeout) < 100*time.Millisecond) {
		add("answer_timeout", time.Duration(c.AnswerTimeout).String(), "must be at least 100ms")
	}
	for _, d := range []struct {
		f string
		v Duration
	}{{"read_header_timeout", c.ReadHeaderTimeout}, {"read_timeout", c.ReadTimeout}, {"write_timeout", c.WriteTimeout}, {"idle_timeout", c.IdleTimeout}, {"shutdown_timeout", c.ShutdownTimeout}} {
		if d.v < 0 {
			add(d.f, time.Duration(d.v).String(), "must not be negative")
		}
	}
	if d := c.Drain(); d < 0 || d > 10*time.Minute {
		add("drain_period", d.String(), "must be between 0s (stop accepting at once) and 10m")
	}
	for _, name := range sortedKeys(c.Stores) {
		u := c.Stores[name]
		if err := CheckName(name); err != nil {
			add("stores."+name, name, "%v", err)
		}
		if _, err := url.Parse(u); err != nil || u == "" {
			add("stores."+name, redactURL(u), "not a store URL (sqlite://, postgres://, mysql://, redis://)")
		}
	}
	for _, name := range sortedKeys(c.Layouts) {
		if _, err := lookupLayout(reg, c, name); err != nil {
			add("layouts."+name, name, "%v", err)
		}
	}
	for _, name := range sortedKeys(c.Keys) {
		ps = append(ps, c.checkKey(reg, "keys."+name, name, c.Keys[name])...)
	}
	if c.LeafSnowflakeKey != "" {
		if _, ok := c.Keys[c.LeafSnowflakeKey]; !ok {
			add("leaf_snowflake_key", c.LeafSnowflakeKey, "no such key")
		}
	}
	if len(ps) == 0 {
		return nil
	}
	lines := linesOf(c.src)
	for i := range ps {
		if ps[i].Line == 0 {
			ps[i].Line = lines.line(ps[i].Field)
		}
	}
	return &ValidationError{ps}
}

// checkRegion validates the region: section.
func (c *Config) checkRegion() []Problem {
	var ps []Problem
	r := c.Region
	if r.Name == "" {
		ps = append(ps, Problem{Field: "region.name", Message: "is required when region is set (lower-case letters, digits and '-', e.g. eu-west)"})
	} else if err := (region.Region{Name: r.Name, Index: 0, Count: 1}).Validate(); err != nil {
		ps = append(ps, Problem{Field: "region.name", Value: r.Name, Message: "is not a region name (lower-case letters, digits and '-', at most 63, starting and ending with a letter or digit, e.g. eu-west)"})
	}
	if r.Count < 1 || r.Count > region.MaxCount {
		ps = append(ps, Problem{Field: "region.count", Value: strconv.Itoa(r.Count), Message: fmt.Sprintf("must be between 1 and %d: the number of regions the ID space is split among", region.MaxCount)})
	} else if r.Index < 0 || r.Index >= r.Count {
		ps = append(ps, Problem{Field: "region.index", Value: strconv.Itoa(r.Index), Message: fmt.Sprintf("must be between 0 and %d (region.count is %d)", r.Count-1, r.Count)})
	}
	if r.Registry != "" {
		scheme, _, ok := strings.Cut(r.Registry, "://")
		switch strings.ToLower(scheme) {
		case "etcd", "postgres", "postgresql", "mysql":
		default:
			ok = false
		}
		if !ok {
			ps = append(ps, Problem{Field: "region.registry", Value: redactURL(r.Registry), Message: `must be empty or an etcd://host:port/prefix, postgres:// or mysql:// URL every region reaches`})
		}
	}
	return ps
}

// checkKey validates one key; prefix is the field path of the key.
func (c *Config) checkKey(reg *Registry, prefix, name string, k KeyConfig) []Problem {
	var ps []Problem
	add := func(field, value, format string, a ...any) {
		ps = append(ps, Problem{Field: prefix + field, Value: value, Message: fmt.Sprintf(format, a...)})
	}
	if err := CheckName(name); err != nil {
		add("", name, "%v", err)
	}
	st, ok := reg.Strategy(k.Strategy)
	if !ok {
		add(".strategy", k.Strategy, "unknown strategy; known: %s", strings.Join(reg.Strategies(), ", "))
	}
	if k.Store != "" {
		if _, ok := c.Stores[k.Store]; !ok {
			add(".store", k.Store, "no such store in stores")
		}
	}
	if k.Layout != "" {
		if _, err := lookupLayout(reg, c, k.Layout); err != nil {
			add(".layout", k.Layout, "%v", err)
		}
	}
	if k.Step < 0 {
		add(".step", strconv.FormatInt(k.Step, 10), "must not be negative")
	}
	if k.RateLimit < 0 {
		add(".rate_limit", strconv.FormatFloat(k.RateLimit, 'g', -1, 64), "must not be negative")
	}
	for i, t := range k.Tokens {
		if len(t) < 16 {
			add(fmt.Sprintf(".tokens[%d]", i), "(redacted)", "must be at least 16 characters")
		}
	}
	if ok && st.MaxName > 0 && len(name) > st.MaxName {
		add("", name, "a %s key name is at most %d bytes, not %d", k.Strategy, st.MaxName, len(name))
	}
	if ok && st.Check != nil {
		reported := map[string]bool{}
		for _, p := range ps {
			reported[p.Field] = true
		}
		for _, p := range st.Check(k, c) {
			p.Field = prefix + "." + p.Field
			if !reported[p.Field] {
				ps = append(ps, p)
			}
		}
	}
	return ps
}

// MaxNameLen is the longest key or store name, in bytes (Leaf's biz_tag is
// varchar(128)).
const MaxNameLen = 128

// ErrBadName is returned by CheckName.
var ErrBadName = errors.New("server: bad key name")

// CheckName reports whether s can name a key: 1 to 128 bytes of valid UTF-8,
// letters, digits and . _ : - only, not starting with a punctuation mark.
func CheckName(s string) error {
	if s == "" {
		return fmt.Errorf("%w: must not be empty", ErrBadName)
	}
	if len(s) > MaxNameLen {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrBadName, len(s), MaxNameLen)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrBadName, s)
	}
	for i, r := range s {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
		case i > 0 && (r == '.' || r == '_' || r == ':' || r == '-'):
		default:
			return fmt.Errorf("%w: %q: character %q at byte %d is not allowed (letters, digits, . _ : - only)", ErrBadName, s, r, i)
		}
	}
	return nil
}

func checkAddr(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("not host:port: %v", err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("bad port %q", port)
	}
	_ = host
	return nil
}

// isLoopbackAddr reports whether host:port names only loopback interfaces
// ("" and "0.0.0.0" are every interface).
func isLoopbackAddr(a string) bool {
	host, _, err := net.SplitHostPort(a)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// defaultSnowflakeKey is leaf_snowflake_key's default among keys: the
// snowflake key called "snowflake", or else the only snowflake key; ""
// when there is none, or several and none is called "snowflake".
func defaultSnowflakeKey(keys map[string]KeyConfig) string {
	if k, ok := keys["snowflake"]; ok && k.Strategy == "snowflake" {
		return "snowflake"
	}
	if ns := SnowflakeKeys(keys); len(ns) == 1 {
		return ns[0]
	}
	return ""
}

// SnowflakeKeys returns the names of the snowflake keys among keys, sorted.
func SnowflakeKeys(keys map[string]KeyConfig) []string {
	var ns []string
	for n, k := range keys {
		if k.Strategy == "snowflake" {
			ns = append(ns, n)
		}
	}
	sort.Strings(ns)
	return ns
}
