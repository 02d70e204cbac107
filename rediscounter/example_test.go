package rediscounter_test

import (
	"context"
	"fmt"

	"github.com/idmint/idmint/rediscounter"
	"github.com/idmint/idmint/sqldb"
)

// Order numbers from Redis INCR, safe against RDB rollback: the mark lives
// in SQLite beside the server (it needs a running Redis, so it has no
// Output and is only compiled).
func ExampleOpen() {
	ctx := context.Background()
	db, err := sqldb.Open(ctx, "sqlite:///var/lib/idmint/marks.db")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	marks, err := rediscounter.NewSQLMarks(ctx, db)
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := rediscounter.Open(ctx, rediscounter.Config{Redis: "127.0.0.1:6379", Key: "idmint:order", Marks: marks})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	id, err := c.Next(ctx)
	fmt.Println(id, err)
}
