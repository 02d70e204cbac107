package stores_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/segment/redisstore"
	"github.com/idmint/idmint/segment/stores"
	"github.com/idmint/idmint/sqldb"
	"github.com/idmint/idmint/testkit/testserver"
)

func roundTrip(t *testing.T, url string) {
	t.Helper()
	ctx := context.Background()
	if err := stores.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	if err := stores.Migrate(ctx, url); err != nil { // idempotent
		t.Fatal(err)
	}
	a, err := stores.OpenAllocator(ctx, url, segment.Options{AutoCreate: true})
	if err != nil {
		t.Fatal(err)
	}
	id, err := a.Next(ctx, "via-url")
	if err != nil || id != 1 {
		t.Fatalf("Next = %d, %v", id, err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestOpenSQLite(t *testing.T) {
	t.Parallel()
	roundTrip(t, "sqlite://"+filepath.Join(t.TempDir(), "x.db"))
}

func TestOpenServers(t *testing.T) {
	t.Run("postgres", func(t *testing.T) { roundTrip(t, testserver.Database(t, testserver.Postgres)) })
	t.Run("mariadb", func(t *testing.T) { roundTrip(t, testserver.Database(t, testserver.MariaDB)) })
	t.Run("redis", func(t *testing.T) {
		roundTrip(t, "redis://"+testserver.Addr(t, testserver.Redis)+"/0?allow_volatile=true&prefix="+testserver.Prefix(t))
	})
}

func TestOpenBad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if _, err := stores.Open(ctx, "etcd://h:2379"); !errors.Is(err, stores.ErrScheme) {
		t.Errorf("Open(etcd) = %v, want ErrScheme", err)
	}
	if _, err := stores.Open(ctx, "sqlite://"); !errors.Is(err, sqldb.ErrURL) {
		t.Errorf("Open(sqlite://) = %v, want sqldb.ErrURL", err)
	}
	if _, err := stores.Open(ctx, "redis://h:1/0?prefix=a%20b"); !errors.Is(err, redisstore.ErrURL) {
		t.Errorf("Open(bad redis) = %v, want redisstore.ErrURL", err)
	}
	if _, err := stores.OpenAllocator(ctx, "sqlite://"+filepath.Join(t.TempDir(), "y.db"), segment.Options{LoadAt: 2}); !errors.Is(err, segment.ErrBadOptions) {
		t.Errorf("OpenAllocator(bad options) = %v", err)
	}
}
