package sqlstore_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/idmint/idmint/segment/segmenttest"
	"github.com/idmint/idmint/testkit/testserver"
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

// BenchmarkAllocateMany: a lot of 500 and of 2,000 keys leased in one
// batch from a table of 10,000 rows, per key (the server's warm-up lot is
// 500 keys; the cost per key should not grow with the lot).
func BenchmarkAllocateMany(b *testing.B) {
	for _, name := range []string{"sqlite", "postgres", "mariadb"} {
		for _, lot := range []int{500, 2000} {
			b.Run(fmt.Sprintf("%s/lot=%d", name, lot), func(b *testing.B) {
				url := benchURLs(b)[name]()
				segmenttest.BenchmarkAllocateMany(b, openerB(b, url), 10000, lot)
			})
		}
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
