package sqlstore_test

import (
	"path/filepath"
	"testing"

	"github.com/idmint/idmint/internal/testserver"
	"github.com/idmint/idmint/segment/segmenttest"
)

func benchURLs(b *testing.B) map[string]func() string {
	return map[string]func() string{
		"sqlite":   func() string { return "sqlite://" + filepath.Join(b.TempDir(), "bench.db") },
		"postgres": func() string { return testserver.Database(b, testserver.Postgres) },
		"mariadb":  func() string { return testserver.Database(b, testserver.MariaDB) },
	}
}

// BenchmarkAllocate: one allocation round trip on each SQL database.
func BenchmarkAllocate(b *testing.B) {
	for _, name := range []string{"sqlite", "postgres", "mariadb"} {
		b.Run(name, func(b *testing.B) {
			url := benchURLs(b)[name]()
			segmenttest.BenchmarkAllocate(b, openerB(b, url))
		})
	}
}

// BenchmarkNext: Next through the double buffer on each SQL database.
func BenchmarkNext(b *testing.B) {
	for _, name := range []string{"sqlite", "postgres", "mariadb"} {
		b.Run(name, func(b *testing.B) {
			url := benchURLs(b)[name]()
			segmenttest.BenchmarkNext(b, openerB(b, url))
		})
	}
}
