package sqldb_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/idmint/idmint/sqldb"
)

func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "sqldb")
	defer os.RemoveAll(dir)
	db, err := sqldb.Open(context.Background(), "sqlite://"+filepath.Join(dir, "idmint.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	fmt.Println(db.Dialect, db.Dialect.Rebind("SELECT ?"), sqldb.Postgres.Rebind("SELECT ?"))
	// Output: sqlite SELECT ? SELECT $1
}

func ExampleRedact() {
	fmt.Println(sqldb.Redact("postgres://idmint:hunter2@db:5432/idmint"))
	fmt.Println(sqldb.Redact("idmint:hunter2@tcp(db:3306)/idmint"))
	// Output:
	// postgres://idmint:xxxxx@db:5432/idmint
	// idmint:xxxxx@tcp(db:3306)/idmint
}
