package sqldb

import (
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// PasswordFileParam is the URL query parameter that names a file holding
// the password, so that the password itself never appears in a config
// file, an environment variable or a process listing: a Docker secret
// (/run/secrets/NAME) or a Kubernetes Secret mounted as a file.
const PasswordFileParam = "password_file"

// maxPasswordFile bounds what ReadPasswordFile reads.
const maxPasswordFile = 4 << 10

// ReadPasswordFile returns the password kept in the file at path: its
// content up to the first line break. An empty, unreadable or oversized
// file is an error naming the parameter and the path, never the content.
func ReadPasswordFile(path string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("%w: %s is empty; want the path of a file holding the password", ErrURL, PasswordFileParam)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%w: %s %q: %v", ErrURL, PasswordFileParam, path, err)
	}
	defer f.Close()
	b := make([]byte, maxPasswordFile+1)
	n, _ := f.Read(b)
	if n > maxPasswordFile {
		return "", fmt.Errorf("%w: %s %q is larger than %d bytes; want a file holding one password", ErrURL, PasswordFileParam, path, maxPasswordFile)
	}
	pw, _, _ := strings.Cut(string(b[:n]), "\n")
	pw = strings.TrimSuffix(pw, "\r")
	if pw == "" {
		return "", fmt.Errorf("%w: %s %q holds no password (its first line is empty)", ErrURL, PasswordFileParam, path)
	}
	return pw, nil
}

// ApplyPasswordFile moves the password named by u's password_file
// parameter into u's user info and removes the parameter. A URL that also
// carries a password inline, or names no user, is refused.
func ApplyPasswordFile(u *url.URL) error {
	q := u.Query()
	if _, ok := q[PasswordFileParam]; !ok {
		return nil
	}
	if u.User == nil || u.User.Username() == "" {
		return fmt.Errorf("%w: %s given without a user name (want scheme://USER@host/...?%s=PATH)", ErrURL, PasswordFileParam, PasswordFileParam)
	}
	if _, set := u.User.Password(); set {
		return fmt.Errorf("%w: both a password in the URL and %s; give one", ErrURL, PasswordFileParam)
	}
	pw, err := ReadPasswordFile(q.Get(PasswordFileParam))
	if err != nil {
		return err
	}
	u.User = url.UserPassword(u.User.Username(), pw)
	q.Del(PasswordFileParam)
	u.RawQuery = q.Encode()
	return nil
}

// dsnPasswordFile is ApplyPasswordFile for a go-sql-driver DSN
// (USER@tcp(host)/db?password_file=PATH), whose parser keeps a parameter
// it does not know in Params, to be sent as a session variable.
func dsnPasswordFile(c *mysql.Config) error {
	path, ok := c.Params[PasswordFileParam]
	if !ok {
		return nil
	}
	if c.User == "" {
		return fmt.Errorf("%w: %s given without a user name (want USER@tcp(host:3306)/DB?%s=PATH)", ErrURL, PasswordFileParam, PasswordFileParam)
	}
	if c.Passwd != "" {
		return fmt.Errorf("%w: both a password in the dsn and %s; give one", ErrURL, PasswordFileParam)
	}
	pw, err := ReadPasswordFile(path)
	if err != nil {
		return err
	}
	c.Passwd = pw
	delete(c.Params, PasswordFileParam)
	return nil
}
