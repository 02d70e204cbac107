package sqldb

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

// TestOpenSQLiteConcurrently: processes starting together on a new SQLite
// file (the zero-config store, racing workers) all open it. Switching the
// file to WAL answers SQLITE_BUSY at once to all but one of them, without
// waiting out busy_timeout; Open retries that instead of failing.
func TestOpenSQLiteConcurrently(t *testing.T) {
	ctx := context.Background()
	for round := range 40 {
		url := "sqlite://" + filepath.Join(t.TempDir(), fmt.Sprintf("r%d.db", round))
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				db, err := Open(ctx, url)
				if err != nil {
					errs <- err
					return
				}
				_, err = db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS t (x INTEGER)")
				db.Close()
				if err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}
