package sqldb

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A password comes from password_file into the connection, never into
// what is shown, and a bad file is refused naming the parameter.
func TestPasswordFile(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("s3cret-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	driver, dsn, _, shown, err := parse("postgres://idmint@db:5432/idmint?sslmode=disable&password_file=" + pw)
	if err != nil {
		t.Fatal(err)
	}
	if driver != "pgx" || !strings.Contains(dsn, "idmint:s3cret-from-file@db:5432") || strings.Contains(dsn, "password_file") {
		t.Errorf("postgres dsn = %q", dsn)
	}
	if strings.Contains(shown, "s3cret") {
		t.Errorf("shown URL holds the password: %q", shown)
	}
	_, dsn, _, _, err = parse("mysql://idmint@db:3306/tickets?password_file=" + pw)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(dsn, "idmint:s3cret-from-file@tcp(db:3306)/tickets") || strings.Contains(dsn, "password_file") {
		t.Errorf("mysql dsn = %q", dsn)
	}
	// go-sql-driver's own DSN form, with and without the mysql:// prefix:
	// its parser used to keep password_file as a session variable
	// (SET password_file=...) and connect without a password.
	for _, raw := range []string{"idmint@tcp(db:3306)/tickets?password_file=" + pw, "mysql://idmint@tcp(db:3306)/tickets?timeout=3s&password_file=" + pw} {
		_, dsn, _, shown, err := parse(raw)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if !strings.HasPrefix(dsn, "idmint:s3cret-from-file@tcp(db:3306)/tickets") || strings.Contains(dsn, "password_file") {
			t.Errorf("%s: dsn = %q", raw, dsn)
		}
		if strings.Contains(shown, "s3cret") {
			t.Errorf("shown dsn holds the password: %q", shown)
		}
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	for _, c := range []struct{ url, want string }{
		{"postgres://idmint@db/idmint?password_file=" + filepath.Join(dir, "missing"), "password_file"},
		{"postgres://idmint@db/idmint?password_file=" + empty, "holds no password"},
		{"postgres://idmint:inline@db/idmint?password_file=" + pw, "both a password"},
		{"postgres://db/idmint?password_file=" + pw, "without a user name"},
		{"idmint:inline@tcp(db:3306)/tickets?password_file=" + pw, "both a password"},
		{"tcp(db:3306)/tickets?password_file=" + pw, "without a user name"},
		{"idmint@tcp(db:3306)/tickets?password_file=" + empty, "holds no password"},
		{"sqlite:///tmp/x.db?password_file=" + pw, "does not apply"},
	} {
		_, _, _, _, err := parse(c.url)
		if !errors.Is(err, ErrURL) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: err = %v, want ErrURL saying %q and no password", c.url, err, c.want)
		}
	}
}
