// Package stores opens a segment.Store from a URL, so the server and the
// CLI need not know the backends:
//
//	sqlite:///var/lib/idmint/idmint.db          embedded default (sqlstore)
//	postgres://user:pass@host:5432/db           PostgreSQL (sqlstore)
//	mysql://user:pass@host:3306/db              MySQL/MariaDB (sqlstore)
//	user:pass@tcp(host:3306)/db                 the same, go-sql-driver DSN
//	redis://host:6379/0?prefix=idmint           Redis (redisstore; see its durability notes)
package stores

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/segment/redisstore"
	"github.com/idmint/idmint/segment/sqlstore"
	"github.com/idmint/idmint/sqldb"
)

// ErrScheme: the URL names no store this package knows.
var ErrScheme = errors.New("stores: unknown store url scheme")

func isRedis(raw string) bool {
	return strings.HasPrefix(raw, "redis://") || strings.HasPrefix(raw, "rediss://")
}

// Open opens the store rawURL names. SQL stores are migrated (the
// leaf_alloc table is created if missing); Redis stores are checked for
// durable persistence unless the URL says allow_volatile=true.
func Open(ctx context.Context, rawURL string) (segment.Store, error) {
	if isRedis(rawURL) {
		return redisstore.Open(ctx, rawURL)
	}
	s, err := sqlstore.Open(ctx, rawURL)
	if errors.Is(err, sqldb.ErrURL) {
		if u, perr := url.Parse(rawURL); perr == nil && u.Scheme != "" && !known(u.Scheme) {
			return nil, fmt.Errorf("%w: %q (want sqlite, postgres, mysql or redis)", ErrScheme, u.Scheme)
		}
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

func known(scheme string) bool {
	switch scheme {
	case "sqlite", "sqlite3", "postgres", "postgresql", "mysql", "mariadb", "redis", "rediss":
		return true
	}
	return false
}

// Migrate applies the store's schema migrations (what `idmint migrate`
// runs). Redis needs none; its URL is only checked by connecting.
func Migrate(ctx context.Context, rawURL string) error {
	if isRedis(rawURL) {
		s, err := redisstore.Open(ctx, rawURL)
		if err != nil {
			return err
		}
		return s.Close()
	}
	db, err := sqldb.Open(ctx, rawURL)
	if err != nil {
		return err
	}
	defer db.Close()
	return sqlstore.Migrate(ctx, db)
}

// OpenAllocator opens the store and an Allocator on it; closing the
// Allocator closes the store.
func OpenAllocator(ctx context.Context, rawURL string, opts segment.Options) (*segment.Allocator, error) {
	s, err := Open(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	opts.CloseStore = true
	a, err := segment.New(s, opts)
	if err != nil {
		s.Close()
		return nil, err
	}
	return a, nil
}
