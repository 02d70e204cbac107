package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"

	"github.com/idmint/idmint/doctor"
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/server/admin"
	"github.com/idmint/idmint/server/dashboard"
	"github.com/idmint/idmint/server/grpcapi"
	"github.com/idmint/idmint/server/leaf"
	"github.com/idmint/idmint/server/strategies"
	"github.com/idmint/idmint/sqldb"
)

func init() {
	register(command{name: "serve", summary: "serve IDs over HTTP (zero config: ./idmint-data, http://127.0.0.1:8080)", run: runServe})
}

// serveFlags are the flags of `idmint serve`; each overrides the config
// file and the environment.
type serveFlags struct {
	config, listen, grpcListen, adminListen, data, coordinator, store, logFormat, logLevel string
	check                                                                                  bool
	connect                                                                                bool
}

func runServe(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "serve", "[--config idmint.yaml] [--listen 127.0.0.1:8080] [--data ./idmint-data] [--check]")
	var f serveFlags
	fs.StringVar(&f.config, "config", "", "YAML config file (env IDMINT_CONFIG); without one, a default set of keys is served")
	fs.StringVar(&f.listen, "listen", "", "public address host:port (env IDMINT_LISTEN; default "+server.DefaultListen+"); port 0 picks a free one")
	fs.StringVar(&f.grpcListen, "grpc-listen", "", "gRPC address host:port (env IDMINT_GRPC_LISTEN; default none)")
	fs.StringVar(&f.adminListen, "admin-listen", "", "admin address for pprof, /metrics, health (env IDMINT_ADMIN_LISTEN; default none)")
	fs.StringVar(&f.data, "data", "", "data directory (env IDMINT_DATA_DIR; default ./"+server.DefaultDataDir+")")
	fs.StringVar(&f.coordinator, "coordinator", "", "worker-ID coordinator URL (env IDMINT_COORDINATOR; default file://<data>/worker)")
	fs.StringVar(&f.store, "store", "", "default segment store URL (env IDMINT_STORE; default sqlite://<data>/segments.db)")
	fs.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.BoolVar(&f.check, "check", false, "validate the configuration, print every problem with its field, and exit")
	fs.BoolVar(&f.connect, "connect", false, "with --check: also connect to every remote store, coordinator and witness (5 s each), report each, and change nothing")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q (serve takes flags only)", pos[0])
	}
	log, err := newLogger(e.stderr, f.logFormat, f.logLevel)
	if err != nil {
		return err
	}
	reg := server.NewRegistry()
	if err := strategies.Register(reg); err != nil {
		return err
	}
	cfg, err := loadServeConfig(e, f, reg)
	if err != nil {
		return err
	}
	if err := cfg.Validate(reg); err != nil {
		var ve *server.ValidationError
		if errors.As(err, &ve) {
			return configProblems(ve.Problems)
		}
		return err
	}
	if err := refusePlaceholderSecrets(cfg); err != nil {
		return err
	}
	if f.connect && !f.check {
		return usagef("--connect goes with --check")
	}
	if f.check {
		fmt.Fprintf(e.stdout, "configuration OK: %d key(s), listen %s, data %s\n", len(cfg.Keys), cfg.Listen, cfg.DataDir)
		if !f.connect {
			fmt.Fprintf(e.stdout, "(checked the file only: %s)\n", notConnected(cfg))
			return nil
		}
		return checkConnections(context.Background(), cfg, e.stdout)
	}
	// The cheap checks of idmint doctor: logged once, exported as
	// idmint_doctor_findings.
	findings := doctor.Check(cfg, doctor.Options{})
	doctor.Log(log, findings)
	if pct, set := serveGC(e.getenv); set {
		log.Debug("garbage collector", "gogc", pct, "why", "GOGC is not set")
	}
	if limit, set := serveMemoryLimit(e.getenv, cfg.MemoryLimit); set {
		log.Debug("soft memory limit", "bytes", limit, "why", "GOMEMLIMIT is not set")
	}
	privateFiles()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	if err := secureDataDir(cfg.DataDir); err != nil {
		return err
	}
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	defer lock.Release()
	// Listen before anything is acquired (the worker lease, the stores): an
	// address in use then fails at once and holds no lease meanwhile.
	ls, err := listenAll(cfg)
	if err != nil {
		return err
	}
	closeListeners := func() {
		for _, l := range []net.Listener{ls.HTTP, ls.GRPC, ls.Admin} {
			if l != nil {
				l.Close()
			}
		}
	}
	logStores(log, cfg)
	srv, err := server.New(ctx, server.Options{Config: cfg, Registry: reg, Logger: log,
		KeyStore: &server.FileKeyStore{Path: filepath.Join(cfg.DataDir, "keys.json"), Logger: log},
		Surfaces: []server.NewSurface{leaf.New, admin.New, dashboard.New, grpcapi.New},
		Findings: doctor.Counts(findings)})
	if err != nil {
		closeListeners()
		return err
	}
	// Again, for the files opening the stores created (SQLite's).
	if err := secureDataDir(cfg.DataDir); err != nil {
		closeListeners()
		srv.Close(context.Background())
		return err
	}
	warnHostLocal(log, cfg, ls)
	printBanner(e.stdout, cfg, srv, ls)
	// Building many keys leaves garbage several times the live heap
	// (GOGC=400): hand it back to the system once. With 10,000 keys the
	// resident set went from 110 to about 45 MB. Beside the first requests,
	// not before them: the collection took 20-30 ms of a 250 ms start.
	go debug.FreeOSMemory()
	// A second signal skips the rest of the drain period (an operator
	// who means "now").
	served := make(chan struct{})
	defer close(served)
	go func() {
		select {
		case <-e.again:
			log.Info("second signal: skipping the rest of the drain period")
			srv.SkipDrain()
		case <-served:
		}
	}()
	return srv.Serve(ctx, ls)
}

// listenAll opens the public, gRPC and admin listeners of cfg; an address in
// use gets a hint naming the flag that moves it.
func listenAll(cfg *server.Config) (server.Listeners, error) {
	var ls server.Listeners
	for _, o := range []struct {
		addr, flag string
		dst        *net.Listener
	}{{cfg.Listen, "--listen", &ls.HTTP}, {cfg.GRPCListen, "--grpc-listen", &ls.GRPC}, {cfg.AdminListen, "--admin-listen", &ls.Admin}} {
		if o.addr == "" {
			continue
		}
		l, err := net.Listen("tcp", o.addr)
		if err != nil {
			for _, d := range []net.Listener{ls.HTTP, ls.GRPC, ls.Admin} {
				if d != nil {
					d.Close()
				}
			}
			if errors.Is(err, syscall.EADDRINUSE) {
				return ls, fmt.Errorf("listen on %s: the address is already in use (another idmint or program listens there); choose another with %s host:port, or %s 127.0.0.1:0 for any free port: %w", o.addr, o.flag, o.flag, err)
			}
			return ls, fmt.Errorf("listen on %s: %w", o.addr, err)
		}
		*o.dst = l
	}
	return ls, nil
}

// secureDataDir makes the data directory 0700 and every regular file in it
// 0600, also when the directory existed before (MkdirAll leaves an
// existing directory's mode alone, and SQLite creates its files 0644 under
// the usual umask): it holds key tokens (keys.json), the worker lease and
// the segment store. Symbolic links are not followed.
func secureDataDir(dir string) error {
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	// The server may be running already (the second call): a file it
	// renames away meanwhile (worker.tmp, a SQLite journal) is skipped.
	gone := func(err error) bool { return errors.Is(err, fs.ErrNotExist) }
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if gone(err) {
				return nil
			}
			return fmt.Errorf("data directory: %w", err)
		}
		mode := fs.FileMode(0)
		switch {
		case p == dir:
		case d.IsDir():
			mode = 0o700
		case d.Type().IsRegular():
			mode = 0o600
		}
		if mode != 0 {
			if err := os.Chmod(p, mode); err != nil && !gone(err) {
				return fmt.Errorf("data directory: %w", err)
			}
		}
		return nil
	})
}

// logStores says which stores and coordinator the server opens, before it
// opens them (passwords redacted): a store that does not answer fails
// start-up after sqldb.DefaultTimeout, and the log shows which one it was.
func logStores(log *slog.Logger, cfg *server.Config) {
	names := make([]string, 0, len(cfg.Stores))
	for n := range cfg.Stores {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		log.Info("store", "name", n, "url", sqldb.Redact(cfg.Stores[n]))
	}
	log.Info("worker-ID coordinator", "url", sqldb.Redact(cfg.Coordinator))
}

// warnHostLocal warns when the zero-config file:// coordinator serves a
// non-loopback address: its worker ID is unique on this host only, so a
// second host serving the same keys with its own file would issue the same
// snowflake IDs.
func warnHostLocal(log *slog.Logger, cfg *server.Config, ls server.Listeners) {
	if !strings.HasPrefix(strings.ToLower(cfg.Coordinator), "file://") {
		return
	}
	for _, ln := range []net.Listener{ls.HTTP, ls.GRPC} {
		if ln == nil {
			continue
		}
		if a, ok := ln.Addr().(*net.TCPAddr); ok && a.IP.IsLoopback() {
			continue
		}
		log.Warn("the file:// coordinator's worker ID is unique on this host only; "+
			"when more than one host serves these keys, give every host one shared coordinator "+
			"(--coordinator etcd://..., zk://..., or a SQL database: postgres://..., mysql://...), "+
			"or two hosts may issue the same snowflake IDs",
			"coordinator", cfg.Coordinator, "listen", ln.Addr().String())
		return
	}
}

// loadServeConfig reads the config file (if any), applies the environment,
// then the flags, adds the default keys when none are configured, and fills
// defaults.
func loadServeConfig(e *env, f serveFlags, reg *server.Registry) (*server.Config, error) {
	path := f.config
	if path == "" {
		path = e.getenv("IDMINT_CONFIG")
	}
	cfg := &server.Config{}
	if path != "" {
		fh, err := os.Open(path)
		if err != nil {
			return nil, usagef("--config: %v", err)
		}
		cfg, err = server.ParseConfig(fh)
		fh.Close()
		if err != nil {
			return nil, usagef("--config %s: %v", path, err)
		}
	}
	if err := cfg.Override(e.getenv); err != nil {
		return nil, usagef("%v", err)
	}
	set := func(flag string, dst *string) {
		if flag != "" {
			*dst = flag
		}
	}
	set(f.listen, &cfg.Listen)
	set(f.grpcListen, &cfg.GRPCListen)
	set(f.adminListen, &cfg.AdminListen)
	set(f.data, &cfg.DataDir)
	set(f.coordinator, &cfg.Coordinator)
	if f.store != "" {
		if cfg.Stores == nil {
			cfg.Stores = map[string]string{}
		}
		cfg.Stores[server.DefaultStore] = f.store
	}
	if len(cfg.Keys) == 0 {
		cfg.Keys = defaultKeys(reg)
	}
	cfg.SetDefaults()
	return cfg, nil
}

// defaultKeys is what a zero-config server serves: a snowflake key (Leaf's
// layout), a segment key when the segment strategy is available, and a
// UUIDv7 key.
func defaultKeys(reg *server.Registry) map[string]server.KeyConfig {
	keys := map[string]server.KeyConfig{
		"snowflake": {Strategy: "snowflake", Layout: strategies.DefaultLayout},
		"uuid":      {Strategy: "uuid"},
	}
	if _, ok := reg.Strategy("segment"); ok {
		keys["order"] = server.KeyConfig{Strategy: "segment"}
	}
	return keys
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level: %q is not debug, info, warn or error", level)
	}
	o := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, o)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, o)), nil
	}
	return nil, usagef("--log-format: %q is not text or json", format)
}

func printBanner(w io.Writer, cfg *server.Config, srv *server.Server, ls server.Listeners) {
	ln := ls.HTTP
	scheme := "http"
	if cfg.TLS.CertFile != "" {
		scheme = "https"
	}
	base := scheme + "://" + ln.Addr().String()
	fmt.Fprintf(w, "idmint: listening on %s\n", base)
	if ls.GRPC != nil {
		fmt.Fprintf(w, "idmint: grpc on %s (service idmint.v1.IDs)\n", ls.GRPC.Addr())
	}
	if ls.Admin != nil {
		fmt.Fprintf(w, "idmint: admin (pprof, metrics) on %s://%s\n", scheme, ls.Admin.Addr())
	}
	dir, _ := filepath.Abs(cfg.DataDir)
	fmt.Fprintf(w, "idmint: data directory %s\n", dir)
	names := srv.Keys()
	fmt.Fprintf(w, "idmint: keys %s\n", keyList(names))
	key := "snowflake"
	if _, ok := cfg.Keys[key]; !ok && len(names) > 0 {
		key = names[0]
	}
	if len(names) > 0 {
		fmt.Fprintf(w, "idmint: try  curl '%s/v1/keys/%s/ids?count=3'\n", base, key)
	}
	if k, ok := cfg.Keys["snowflake"]; ok && k.Strategy == "snowflake" {
		fmt.Fprintf(w, "idmint: Leaf clients: curl %s/api/snowflake/get/snowflake\n", base)
	}
}

// bannerKeys is how many key names the banner lists: a server with 10,000
// keys printed 69 KB of names at every start.
const bannerKeys = 12

// keyList names the keys for the banner: all of a few, the first
// bannerKeys of many with how many more there are.
func keyList(names []string) string {
	switch {
	case len(names) == 0:
		return "(none yet: create them with POST /v1/keys)"
	case len(names) <= bannerKeys:
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s, … and %d more (%d in all; GET /v1/keys lists them)",
		strings.Join(names[:bannerKeys], ", "), len(names)-bannerKeys, len(names))
}

// serveGOGC is the garbage collector's target percentage for serve when
// GOGC is not set. A server's live heap is a few MiB, so with Go's default
// of 100 it collected after every ~4 MiB of garbage: 5-6 % of the CPU of
// single-ID requests at ~55 k req/s went to marking (gcBgMarkWorker and
// assists in a 5 s profile of the Leaf snowflake route), and 0.6 % at 400.
// The price is a heap target of 5x the live heap instead of 2x (a 3 MiB
// live heap: ~15 MiB). GOGC, and GOMEMLIMIT, override it.
const serveGOGC = 400

// serveMemoryLimit gives the runtime the config's memory_limit as its soft
// limit unless GOMEMLIMIT is set (the runtime applied that one) or the
// config says -1, and says whether it did. With GOGC at 400 the heap may
// grow to five times what is live: answers held for clients that do not
// read were multiplied by it (2,000 such connections: +1.7 GB of RSS).
// Near the limit the collector runs more often instead.
func serveMemoryLimit(getenv func(string) string, limit int64) (int64, bool) {
	if limit <= 0 || (getenv != nil && getenv("GOMEMLIMIT") != "") {
		return 0, false
	}
	debug.SetMemoryLimit(limit)
	return limit, true
}

// serveGC applies serveGOGC unless the environment sets GOGC (the
// runtime has applied that one already), and says whether it did.
func serveGC(getenv func(string) string) (int, bool) {
	if getenv == nil || getenv("GOGC") != "" {
		return 0, false
	}
	debug.SetGCPercent(serveGOGC)
	return serveGOGC, true
}
