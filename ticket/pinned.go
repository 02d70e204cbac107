package ticket

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/idmint/idmint/sqldb"
)

// pinned is a small pool of *sql.Conn, each set up once by init (session
// variables) and then used by one request at a time, so a statement and
// whatever reads its session state run on the same connection.
type pinned struct {
	db   *sqldb.DB
	init func(ctx context.Context, c *sql.Conn) error
	sem  chan struct{}  // one token per connection in use or idle
	idle chan *sql.Conn // set-up connections not in use
}

func newPinned(db *sqldb.DB, n int, init func(context.Context, *sql.Conn) error) *pinned {
	return &pinned{db: db, init: init, sem: make(chan struct{}, n), idle: make(chan *sql.Conn, n)}
}

// with runs f on a set-up connection. A connection f fails on is closed
// rather than reused: its session may be gone. When f fails on a
// connection that sat idle, the other idle ones are likely dead too (the
// server restarted): they are dropped and f is tried once more on a fresh
// connection. Retrying costs at most a gap in the IDs, never a repeat.
func (p *pinned) with(ctx context.Context, f func(*sql.Conn) error) error {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-p.sem }()
	select {
	case c := <-p.idle:
		err := f(c)
		if err == nil {
			p.idle <- c
			return nil
		}
		c.Close()
		p.drain()
		if ctx.Err() != nil {
			return err
		}
	default:
	}
	c, err := p.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("connect %s: %w", p.db.URL, err)
	}
	if err := p.init(ctx, c); err != nil {
		c.Close()
		return err
	}
	if err := f(c); err != nil {
		c.Close()
		return err
	}
	p.idle <- c
	return nil
}

// drain closes every idle connection.
func (p *pinned) drain() {
	for {
		select {
		case c := <-p.idle:
			c.Close()
		default:
			return
		}
	}
}

// close closes the idle connections and the database.
func (p *pinned) close() error {
	p.drain()
	return p.db.Close()
}

// raiserOn is a source that can move its server's counter on one
// connection (mysqlSource, pgSource).
type raiserOn interface {
	raiseOn(ctx context.Context, c *sql.Conn, atLeast int64) (before int64, err error)
}

// raise runs r.raiseOn on one of the pool's connections.
func (p *pinned) raise(ctx context.Context, r raiserOn, atLeast int64) (before int64, err error) {
	err = p.with(ctx, func(c *sql.Conn) error {
		before, err = r.raiseOn(ctx, c, atLeast)
		return err
	})
	return before, err
}

// newConn is a new connection of a SQL source, offered to the connHook.
type newConn struct {
	r raiserOn
	d sqldb.Dialect
	c *sql.Conn
}

func (x newConn) identity(ctx context.Context) (string, error) { return sqldb.Identity(ctx, x.d, x.c) }

func (x newConn) raise(ctx context.Context, atLeast int64) (int64, error) {
	return x.r.raiseOn(ctx, x.c, atLeast)
}
