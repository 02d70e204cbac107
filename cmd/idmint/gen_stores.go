package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/idmint/idmint/rediscounter"
	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/segment/stores"
	"github.com/idmint/idmint/sqldb"
	"github.com/idmint/idmint/ticket"
)

// The store-backed kinds of `idmint gen`: each issues from a real database
// or Redis, exactly as the server's keys of the same strategy do.
func init() {
	genKinds["segment"] = genSegment
	genKinds["ticket"] = genTicket
	genKinds["redis"] = genRedis
}

// defaultStore is the zero-config SQLite file idmint serve uses too.
var defaultStore = "sqlite://" + filepath.Join("idmint-data", "segments.db")

// ensureSQLiteDir creates the directory of a sqlite:// URL's file.
func ensureSQLiteDir(url string) error {
	if p, ok := strings.CutPrefix(url, "sqlite://"); ok {
		return os.MkdirAll(filepath.Dir(p), 0o700)
	}
	return nil
}

func genSegment(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "gen segment", "[--key NAME] [--store URL] [--step N] [-n N] [--json]")
	key := fs.String("key", "order", "segment key (Leaf's biz_tag); created on first use")
	store := fs.String("store", defaultStore, "segment store: sqlite:///path, postgres://..., mysql://..., redis://...")
	step := fs.Int64("step", 1000, "step of a key created here")
	n := fs.Int("n", 1, "how many IDs to issue")
	asJSON := jsonFlag(fs)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if err := countFlag(*n, maxGen); err != nil {
		return err
	}
	if _, err := segment.ValidateKeyInfo(segment.KeyInfo{Key: *key, Step: *step}); err != nil {
		return usagef("flag --key/--step: %v", err)
	}
	if err := ensureSQLiteDir(*store); err != nil {
		return err
	}
	a, err := stores.OpenAllocator(ctx, *store, segment.Options{AutoCreate: true, AutoCreateStep: *step, CloseStore: true})
	if err != nil {
		return fmt.Errorf("flag --store %s: %w", sqldb.Redact(*store), err)
	}
	defer a.Close()
	k, err := a.Key(*key)
	if err != nil {
		return err
	}
	return withJSON(e, "segment", *asJSON, func(e *env) error { return writeInt64s(ctx, e, *n, k.NextN) })
}

func genTicket(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "gen ticket", "--servers URL[,URL...] [--step N] [-n N] [--json]")
	servers := fs.String("servers", "", "ticket servers in order (offsets 1, 2, ...): mysql://user:pass@host:3306/db or postgres://...")
	step := fs.Int("step", 0, "N, the increment of every server (default: the number of servers)")
	n := fs.Int("n", 1, "how many IDs to issue")
	asJSON := jsonFlag(fs)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if err := countFlag(*n, 1_000_000); err != nil {
		return err
	}
	if strings.TrimSpace(*servers) == "" {
		return usagef("flag --servers: missing: at least one mysql:// or postgres:// URL")
	}
	var cfg ticket.Config
	for _, u := range strings.Split(*servers, ",") {
		cfg.Servers = append(cfg.Servers, ticket.Server{URL: strings.TrimSpace(u)})
	}
	cfg.Step = *step
	t, err := ticket.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer t.Close()
	return withJSON(e, "ticket", *asJSON, func(e *env) error { return writeInt64s(ctx, e, *n, t.NextN) })
}

func genRedis(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "gen redis", "--redis URL [--key NAME] [--marks URL] [-n N] [--json]")
	addr := fs.String("redis", "", "Redis server: redis://host:6379/0 or host:port")
	key := fs.String("key", "idmint:order", "Redis key holding the counter")
	marks := fs.String("marks", defaultStore, "SQL database keeping the durable high-water mark: sqlite:///path, postgres://..., mysql://...")
	n := fs.Int("n", 1, "how many IDs to issue")
	asJSON := jsonFlag(fs)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if err := countFlag(*n, maxGen); err != nil {
		return err
	}
	if *addr == "" {
		return usagef("flag --redis: missing: redis://host:6379/0 or host:port")
	}
	if err := ensureSQLiteDir(*marks); err != nil {
		return err
	}
	db, err := sqldb.Open(ctx, *marks)
	if err != nil {
		return usagef("flag --marks: %v", err)
	}
	defer db.Close()
	m, err := rediscounter.NewSQLMarks(ctx, db)
	if err != nil {
		return err
	}
	c, err := rediscounter.Open(ctx, rediscounter.Config{Redis: *addr, Key: *key, Marks: m})
	if err != nil {
		return err
	}
	defer c.Close()
	return withJSON(e, "redis", *asJSON, func(e *env) error { return writeInt64s(ctx, e, *n, c.NextN) })
}
