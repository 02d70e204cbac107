package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/idmint/idmint/segment/stores"
	"github.com/idmint/idmint/sqldb"
)

func init() {
	register(command{name: "migrate", summary: "create or upgrade a segment store's tables (Leaf's leaf_alloc): idmint migrate --store URL", run: runMigrate})
}

func runMigrate(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "migrate", "[--store URL]")
	store := fs.String("store", defaultStore, "segment store: sqlite:///path, postgres://..., mysql://..., redis://...")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if err := ensureSQLiteDir(*store); err != nil {
		return err
	}
	if err := stores.Migrate(ctx, *store); err != nil {
		if errors.Is(err, stores.ErrScheme) || errors.Is(err, sqldb.ErrURL) {
			return usagef("flag --store: %v", err)
		}
		return fmt.Errorf("flag --store %s: %w", sqldb.Redact(*store), err)
	}
	fmt.Fprintf(e.stdout, "migrated %s\n", sqldb.Redact(*store))
	return nil
}
