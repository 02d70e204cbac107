package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	_ "modernc.org/sqlite"             // database/sql driver "sqlite"
)

// ErrURL is wrapped by every error Open returns for a URL it cannot use; the
// message names the part of the URL that is wrong.
var ErrURL = errors.New("sqldb: bad database url")

// DB is an open database and the dialect to speak to it. It embeds *sql.DB,
// so every database/sql method is available; it is safe for concurrent use.
type DB struct {
	*sql.DB
	// Dialect is the SQL dialect of the database.
	Dialect Dialect
	// URL is the URL the database was opened with, password removed; fit
	// for logs and error messages.
	URL string
	// Timeout bounds every call made under Bound: the stores give each of
	// their statements (or transactions) at most this long when the
	// caller's context sets no earlier deadline. Open sets DefaultTimeout;
	// 0 or less means no bound.
	Timeout time.Duration
}

// DefaultTimeout bounds connecting in Open and, through DB.Bound, each
// store call, whenever the caller's context sets no earlier deadline: a
// server that accepts connections but never answers (paused, wedged, or
// another service on the database's port) costs an error after 5 s, never
// a hang. It matches the dial and call timeouts of idmint's Redis, etcd and
// ZooKeeper clients.
const DefaultTimeout = 5 * time.Second

// Bound returns ctx limited to db.Timeout, unless ctx already ends sooner
// or Timeout is not positive. Call cancel once the call (and any rows it
// returned) is done.
func (db *DB) Bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if db.Timeout <= 0 {
		return context.WithCancel(ctx)
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= db.Timeout {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, db.Timeout)
}

// Open parses rawURL, opens the database it names and checks that it
// answers within ctx, or within DefaultTimeout when ctx sets no earlier
// deadline. It does not create tables; see Migrate.
//
// Connections are bounded too: PostgreSQL URLs get connect_timeout=5 and
// MySQL ones timeout=5s unless they set their own, so a connection opened
// later by the pool cannot hang either. The DB's Timeout is DefaultTimeout.
//
// SQLite databases are opened in WAL mode with synchronous=FULL (a committed
// transaction survives power loss: segment and worker rows must never go
// back), a 10 s busy_timeout for other processes on the same file, and
// one connection with immediate transactions, so writers in this process
// queue instead of failing with SQLITE_BUSY.
func Open(ctx context.Context, rawURL string) (*DB, error) {
	driver, dsn, d, shown, err := parse(rawURL)
	if err != nil {
		return nil, err
	}
	sdb, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, fmt.Errorf("sqldb: open %s: %w", shown, err)
	}
	if d == SQLite {
		sdb.SetMaxOpenConns(1)
		sdb.SetMaxIdleConns(1)
		sdb.SetConnMaxLifetime(0)
	} else {
		sdb.SetMaxOpenConns(16)
		sdb.SetMaxIdleConns(4)
		sdb.SetConnMaxIdleTime(5 * time.Minute)
	}
	db := &DB{DB: sdb, Dialect: d, URL: shown, Timeout: DefaultTimeout}
	pctx, cancel := db.Bound(ctx)
	defer cancel()
	if err := ping(pctx, sdb, d); err != nil {
		sdb.Close()
		if ctx.Err() == nil && pctx.Err() != nil {
			return nil, fmt.Errorf("sqldb: connect %s: no answer within %v (is a database server listening there, and is it running?): %w", shown, db.Timeout, err)
		}
		return nil, fmt.Errorf("sqldb: connect %s: %w", shown, err)
	}
	return db, nil
}

// ping checks that the database answers. A new SQLite connection runs its
// pragmas, and switching a file to WAL needs a lock that SQLite refuses at
// once with SQLITE_BUSY (it does not wait out busy_timeout there) while
// another process opens the same file: that answer is retried until ctx
// ends.
func ping(ctx context.Context, sdb *sql.DB, d Dialect) error {
	busy := func(err error) bool { return d == SQLite && strings.Contains(err.Error(), "SQLITE_BUSY") }
	return retry(ctx, 0, 50*time.Millisecond, func() error { return sdb.PingContext(ctx) }, busy)
}

// Redact returns rawURL with any password replaced by "xxxxx", for logs.
func Redact(rawURL string) string {
	if isMySQLDSN(rawURL) {
		if c, err := parseDSN(rawURL); err == nil {
			if c.Passwd != "" {
				c.Passwd = "xxxxx"
			}
			return c.FormatDSN()
		}
		return "(unparsable mysql dsn)"
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable url)"
	}
	return u.Redacted()
}

// isMySQLDSN reports whether s is a go-sql-driver DSN such as
// "user:pass@tcp(host:3306)/db" rather than a URL.
func isMySQLDSN(s string) bool {
	s = strings.TrimPrefix(s, "mysql://")
	return strings.Contains(s, "@tcp(") || strings.Contains(s, "@unix(") ||
		strings.HasPrefix(s, "tcp(") || strings.HasPrefix(s, "unix(")
}

// parseDSN parses a go-sql-driver DSN, with or without "mysql://".
// password_file is taken out before go-sql-driver's parser sees it: that
// parser refuses a '/' in a parameter's value unless escaped, which a
// path always has (/run/secrets/db); it is put back in Params, unescaped.
func parseDSN(raw string) (*mysql.Config, error) {
	raw = strings.TrimPrefix(raw, "mysql://")
	var file string
	found := false
	for _, sep := range []string{"?", "&"} {
		i := strings.Index(raw, sep+PasswordFileParam+"=")
		if i < 0 {
			continue
		}
		v := raw[i+len(sep)+len(PasswordFileParam)+1:]
		rest := ""
		if j := strings.IndexByte(v, '&'); j >= 0 {
			v, rest = v[:j], v[j+1:]
		}
		u, err := url.QueryUnescape(v)
		if err != nil {
			return nil, fmt.Errorf("%s %q is not escaped right: %v", PasswordFileParam, v, err)
		}
		file, found = u, true
		switch {
		case rest == "":
			raw = raw[:i]
		default:
			raw = raw[:i] + sep + rest
		}
		break
	}
	c, err := mysql.ParseDSN(raw)
	if err != nil {
		return nil, err
	}
	if found {
		if c.Params == nil {
			c.Params = map[string]string{}
		}
		c.Params[PasswordFileParam] = file
	}
	return c, nil
}

func parse(raw string) (driver, dsn string, d Dialect, shown string, err error) {
	if raw == "" {
		return "", "", 0, "", fmt.Errorf("%w: url is empty (want sqlite://, postgres:// or mysql://)", ErrURL)
	}
	if isMySQLDSN(raw) {
		c, err := parseDSN(raw)
		if err != nil {
			return "", "", 0, "", fmt.Errorf("%w: mysql dsn %s: %v", ErrURL, Redact(raw), err)
		}
		// go-sql-driver keeps a parameter it does not know as a session
		// variable (SET password_file=...): the file was never read.
		if err := dsnPasswordFile(c); err != nil {
			return "", "", 0, "", fmt.Errorf("mysql dsn %s: %w", Redact(raw), err)
		}
		return "mysql", mysqlDSN(c), MySQL, Redact(raw), nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse quotes the input, password included: do not wrap it.
		return "", "", 0, "", fmt.Errorf("%w: url does not parse (scheme://...)", ErrURL)
	}
	shown = u.Redacted()
	if (u.Scheme == "sqlite" || u.Scheme == "sqlite3") && u.Query().Has(PasswordFileParam) {
		return "", "", 0, "", fmt.Errorf("%w: sqlite url %q: %s does not apply (an SQLite file has no password)", ErrURL, shown, PasswordFileParam)
	}
	if u.Query().Has(PasswordFileParam) {
		if err := ApplyPasswordFile(u); err != nil {
			return "", "", 0, "", err
		}
		raw = u.String()
	}
	switch u.Scheme {
	case "sqlite", "sqlite3":
		path := u.Host + u.Path // sqlite://rel.db has Host "rel.db"
		if u.Opaque != "" {
			path = u.Opaque
		}
		if path == "" || path == "/" {
			return "", "", 0, "", fmt.Errorf("%w: sqlite url %q: path is empty (sqlite:///abs/file.db or sqlite://relative.db)", ErrURL, shown)
		}
		if path != ":memory:" {
			path = filepath.Clean(path)
		}
		q := url.Values{}
		q.Add("_pragma", "busy_timeout(10000)")
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(FULL)")
		q.Add("_pragma", "foreign_keys(1)")
		q.Set("_txlock", "immediate")
		q.Set("_time_format", "sqlite")
		return "sqlite", "file:" + path + "?" + q.Encode(), SQLite, shown, nil
	case "postgres", "postgresql":
		if u.Host == "" {
			return "", "", 0, "", fmt.Errorf("%w: postgres url %q: host is empty", ErrURL, shown)
		}
		if strings.Trim(u.Path, "/") == "" {
			return "", "", 0, "", fmt.Errorf("%w: postgres url %q: database name (path) is empty", ErrURL, shown)
		}
		if u.Query().Get("connect_timeout") == "" {
			// pgconn applies it to the whole connection set-up: dial, TLS
			// and start-up (pgconn.Config.ConnectTimeout).
			q := u.Query()
			q.Set("connect_timeout", strconv.Itoa(int(DefaultTimeout/time.Second)))
			u.RawQuery = q.Encode()
			raw = u.String()
		}
		return "pgx", raw, Postgres, shown, nil
	case "mysql", "mariadb":
		c := mysql.NewConfig()
		if u.User != nil {
			c.User = u.User.Username()
			c.Passwd, _ = u.User.Password()
		}
		if u.Host == "" {
			return "", "", 0, "", fmt.Errorf("%w: mysql url %q: host is empty", ErrURL, shown)
		}
		c.Net = "tcp"
		c.Addr = u.Host
		if _, _, err := net.SplitHostPort(u.Host); err != nil {
			c.Addr = net.JoinHostPort(u.Hostname(), "3306")
		}
		c.DBName = strings.Trim(u.Path, "/")
		if c.DBName == "" {
			return "", "", 0, "", fmt.Errorf("%w: mysql url %q: database name (path) is empty", ErrURL, shown)
		}
		// Pass the query through go-sql-driver's own parser, so its
		// options (tls, timeout, ...) are validated where they are known.
		if u.RawQuery != "" {
			probe, err := mysql.ParseDSN("/x?" + u.RawQuery)
			if err != nil {
				return "", "", 0, "", fmt.Errorf("%w: mysql url %q: query: %v", ErrURL, shown, err)
			}
			addr, netw, user, pass, db := c.Addr, c.Net, c.User, c.Passwd, c.DBName
			c = probe
			c.Addr, c.Net, c.User, c.Passwd, c.DBName = addr, netw, user, pass, db
		}
		return "mysql", mysqlDSN(c), MySQL, shown, nil
	case "":
		return "", "", 0, "", fmt.Errorf("%w: scheme is missing (want sqlite://, postgres:// or mysql://)", ErrURL)
	default:
		return "", "", 0, "", fmt.Errorf("%w: scheme %q is not one of sqlite, postgres, mysql", ErrURL, u.Scheme)
	}
}

// mysqlDSN sets the options idmint relies on: a dial timeout (when the
// URL sets none), parseTime (update_time scans
// into time.Time), UTC, and client-side interpolation of parameters (one
// round trip per statement instead of prepare, execute and close; safe
// with the utf8mb4 default, refused by the driver for the few multibyte
// charsets where it is not), then formats the DSN.
func mysqlDSN(c *mysql.Config) string {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout // dial timeout; the handshake honours the context
	}
	c.ParseTime = true
	c.InterpolateParams = true
	if c.Loc == nil {
		c.Loc = time.UTC
	}
	return c.FormatDSN()
}
