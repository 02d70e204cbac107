package ticket

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/sqldb"
)

// Errors. Each is wrapped with the server and values involved.
var (
	// ErrConfig: a Config that cannot work (names the field and value).
	ErrConfig = errors.New("ticket: invalid config")
	// ErrUnavailable: every server failed this request.
	ErrUnavailable = errors.New("ticket: no ticket server answered")
	// ErrResidue: a server returned an ID outside its residue class, i.e. its
	// increment or offset is not what the Config says. The ID is dropped.
	ErrResidue = errors.New("ticket: id outside the server's residue class")
	// ErrWentBack: a server returned an ID not above the last one it gave
	// this process: its counter was reset. The ID is dropped.
	ErrWentBack = errors.New("ticket: server counter went back")
	// ErrNotDurable: the server does not make commits durable, so a crash
	// could move its counter back and repeat IDs.
	ErrNotDurable = errors.New("ticket: server is not durable")
	// ErrExhausted: the counter passed the largest int64.
	ErrExhausted = errors.New("ticket: counter exhausted")
	// ErrClosed: the Ticket was closed.
	ErrClosed = errors.New("ticket: closed")
)

// Defaults for the zero values of Config.
const (
	DefaultTable          = "Tickets64"
	DefaultSequence       = "idmint_tickets"
	DefaultStub           = "a"
	DefaultConns          = 4
	DefaultBackoffMin     = 100 * time.Millisecond
	DefaultBackoffMax     = 10 * time.Second
	DefaultAttemptTimeout = 2 * time.Second
	// MaxBatch is the most IDs one PostgreSQL round trip asks for.
	MaxBatch = 1000
	// DefaultBlock is how far above the highest ID served the witness's
	// ceiling is raised at a time.
	DefaultBlock = 100_000
)

// Witness keeps high-water marks outside the ticket servers; package
// witness implements it (the data directory, etcd, ZooKeeper, SQL).
type Witness interface {
	// Mark returns the space's mark, 0 when it has none.
	Mark(ctx context.Context, space string) (int64, error)
	// Claim raises the space's mark to `to` if it is at most `from`, and
	// returns (to, true) once durable; otherwise the mark and false.
	Claim(ctx context.Context, space string, from, to int64) (mark int64, ok bool, err error)
}

// Server is one ticket server.
type Server struct {
	// URL is the database, in any form sqldb.Open takes:
	// mysql://user:pass@host:3306/db, a go-sql-driver DSN, or
	// postgres://user@host:5432/db.
	URL string
	// Offset is the server's first ID and residue, 1..Config.Step. Zero
	// means its position in Config.Servers plus one.
	Offset int
}

// Config configures a Ticket. Only Servers is required.
type Config struct {
	// Servers are the ticket servers, tried round-robin.
	Servers []Server
	// Step is N, the increment of every server. Zero means len(Servers).
	// It may exceed len(Servers) when some of the N servers are retired or
	// served by other processes; it must then stay the same everywhere.
	Step int
	// Table is the MySQL ticket table; default "Tickets64".
	Table string
	// Sequence is the PostgreSQL sequence; default "idmint_tickets".
	Sequence string
	// Stub is the MySQL stub value, one ASCII letter or digit; default "a".
	// Different stubs in one table share one counter.
	Stub string
	// Conns is the number of connections pinned per server; default 4.
	Conns int
	// Clock paces back-off; default clock.NewReal().
	Clock clock.Clock
	// BackoffMin and BackoffMax bound the time a failing server is skipped;
	// defaults 100ms and 10s.
	BackoffMin, BackoffMax time.Duration
	// AttemptTimeout bounds one request to one server; default 2s.
	AttemptTimeout time.Duration

	// Witness, when set, keeps a ceiling above every ID served, in a
	// failure domain other than the ticket servers (the node's data
	// directory, the cluster's coordinator). No ID at or above the ceiling
	// is returned before the ceiling is raised past it, Block at a time. A
	// server is moved above the ceiling (keeping its residue class) before
	// its first ticket on a new connection after a failure or a change of
	// server identity, on the first connection of a process, and as soon
	// as it answers below an ID it gave this process: so a failover to a
	// lagging replica or a restored backup repeats nothing and costs no
	// waiting. nil: only this process's memory guards.
	Witness Witness
	// Space names the ceiling in the witness. Default
	// "ticket/TABLE,SEQUENCE": keys on one table share its counter, so
	// they share its ceiling too.
	Space string
	// Block is how far above the highest ID served the ceiling is raised;
	// default DefaultBlock. After a repair the IDs jump by at most this.
	Block int64
	// Logger receives a line when a server goes back or changes identity.
	// nil discards them.
	Logger *slog.Logger
}

func configErr(field, value, reason string) error {
	return fmt.Errorf("%w: %s %q %s", ErrConfig, field, value, reason)
}

// validate fills defaults and checks c; it does not touch the network.
func (c Config) validate() (Config, error) {
	if len(c.Servers) == 0 {
		return c, configErr("servers", "", "is empty: give at least one database URL")
	}
	if c.Step == 0 {
		c.Step = len(c.Servers)
	}
	if c.Step < len(c.Servers) {
		return c, configErr("step", strconv.Itoa(c.Step), fmt.Sprintf("is less than the %d servers: their residue classes would overlap", len(c.Servers)))
	}
	if c.Step > 65535 {
		return c, configErr("step", strconv.Itoa(c.Step), "exceeds 65535, MySQL's auto_increment_increment limit")
	}
	servers := append([]Server(nil), c.Servers...)
	used := map[int]int{}
	for i := range servers {
		s := &servers[i]
		if s.Offset == 0 {
			s.Offset = i + 1
		}
		if s.Offset < 1 || s.Offset > c.Step {
			return c, configErr(fmt.Sprintf("servers[%d].offset", i), strconv.Itoa(s.Offset), fmt.Sprintf("is outside 1..step (%d)", c.Step))
		}
		if j, dup := used[s.Offset]; dup {
			return c, configErr(fmt.Sprintf("servers[%d].offset", i), strconv.Itoa(s.Offset), fmt.Sprintf("is also servers[%d]'s: two servers would issue the same IDs", j))
		}
		used[s.Offset] = i
		if s.URL == "" {
			return c, configErr(fmt.Sprintf("servers[%d].url", i), "", "is empty")
		}
	}
	c.Servers = servers
	if c.Table == "" {
		c.Table = DefaultTable
	}
	if c.Sequence == "" {
		c.Sequence = DefaultSequence
	}
	if c.Stub == "" {
		c.Stub = DefaultStub
	}
	if err := checkIdent("table", c.Table); err != nil {
		return c, err
	}
	if err := checkIdent("sequence", c.Sequence); err != nil {
		return c, err
	}
	if len(c.Stub) != 1 || !isAlnum(c.Stub[0]) {
		return c, configErr("stub", c.Stub, "is not one ASCII letter or digit")
	}
	if c.Conns == 0 {
		c.Conns = DefaultConns
	}
	if c.Conns < 0 || c.Conns > 256 {
		return c, configErr("conns", strconv.Itoa(c.Conns), "is outside 1..256")
	}
	if c.Clock == nil {
		c.Clock = clock.NewReal()
	}
	if c.BackoffMin == 0 {
		c.BackoffMin = DefaultBackoffMin
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = DefaultBackoffMax
	}
	if c.BackoffMin < 0 || c.BackoffMax < c.BackoffMin {
		return c, configErr("backoff", c.BackoffMin.String()+".."+c.BackoffMax.String(), "is not a range 0 < min <= max")
	}
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = DefaultAttemptTimeout
	}
	if c.AttemptTimeout < 0 {
		return c, configErr("attempt_timeout", c.AttemptTimeout.String(), "is negative")
	}
	if c.Space == "" {
		c.Space = "ticket/" + c.Table + "," + c.Sequence
	}
	if c.Block == 0 {
		c.Block = DefaultBlock
	}
	if c.Block < int64(c.Step) || c.Block > 1<<40 {
		return c, configErr("block", strconv.FormatInt(c.Block, 10), fmt.Sprintf("is outside %d (step)..2^40", c.Step))
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

func isAlnum(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

// checkIdent accepts [A-Za-z_][A-Za-z0-9_]{0,63}: safe to write into SQL.
func checkIdent(field, s string) error {
	if s == "" || len(s) > 63 || s[0] >= '0' && s[0] <= '9' {
		return configErr(field, s, "is not a SQL identifier (a letter or underscore, then letters, digits, underscores; at most 63)")
	}
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) && s[i] != '_' {
			return configErr(field, s, "is not a SQL identifier (a letter or underscore, then letters, digits, underscores; at most 63)")
		}
	}
	return nil
}

// source is one ticket server's backend.
type source interface {
	// tickets fills dst (1 <= len(dst) <= MaxBatch) with fresh IDs from the
	// server, in increasing order, and returns how many; MySQL gives one.
	tickets(ctx context.Context, dst []int64) (int, error)
	// raise moves the server's counter so that its next ID is at least
	// atLeast (in its residue class), never down, and returns the next ID
	// it would have given before.
	raise(ctx context.Context, atLeast int64) (before int64, err error)
	close() error
}

// conn is one new connection of a source, offered to a connHook before
// its first ticket.
type conn interface {
	// identity names the server (sqldb.Identity).
	identity(ctx context.Context) (string, error)
	// raise is source.raise on this connection.
	raise(ctx context.Context, atLeast int64) (before int64, err error)
}

// connHook runs on every new connection of a source, after its session
// is set up and before its first ticket; an error drops the connection.
type connHook func(ctx context.Context, c conn) error

// server is one ticket server and its health.
type server struct {
	cfg    Server
	shown  string // URL without password
	step   int64
	opener func(ctx context.Context) (source, error)

	openMu sync.Mutex // serialises opening src; held over I/O, off the hot path

	mu       sync.Mutex // guards the fields below; never held over I/O
	src      source
	max      int64 // largest ID this server has given this process
	failures int
	retryAt  time.Duration // clock.Mono before which the server is skipped
	lastErr  error
	identity string // the server behind the connections, as last seen
	trusted  bool   // a connection was repaired (or checked) since the last failure
	wentBack uint64 // times the server answered below what it had given
	swaps    uint64 // changes of identity seen
}

// Ticket issues IDs from N ticket servers. It is safe for concurrent use.
// Every ID it returns is unique among all IDs any Ticket with the same
// servers and Step returns (see the package doc for why); IDs from one
// server increase, IDs from different servers interleave.
type Ticket struct {
	cfg     Config
	servers []*server
	rr      atomic.Uint64
	closed  atomic.Bool

	ceiling  atomic.Int64 // a persisted ceiling: every ID served is below it
	raiseMu  sync.Mutex   // one ceiling raise at a time
	raising  atomic.Bool  // a background raise runs
	raiseErr atomic.Pointer[error]
}

// Open validates cfg, connects to each server, creates its table or
// sequence if missing and checks its settings. A server that cannot be
// reached is skipped for now and retried later; Open fails if none can be
// reached, or if any server is misconfigured (ErrConfig, ErrNotDurable) or
// its URL is bad (sqldb.ErrURL).
func Open(ctx context.Context, cfg Config) (*Ticket, error) {
	return open(ctx, cfg, openSource)
}

// open is Open with the backend opener injected (tests use fakes).
func open(ctx context.Context, cfg Config, opener func(context.Context, Config, Server, connHook) (source, error)) (*Ticket, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	t := &Ticket{cfg: cfg}
	if cfg.Witness != nil {
		m, err := cfg.Witness.Mark(ctx, cfg.Space)
		if err != nil {
			return nil, fmt.Errorf("ticket: read the ceiling %q: %w", cfg.Space, err)
		}
		t.ceiling.Store(m)
	}
	var errs []error
	for _, s := range cfg.Servers {
		srv := &server{cfg: s, shown: sqldb.Redact(s.URL), step: int64(cfg.Step)}
		hook := func(ctx context.Context, c conn) error { return t.onConnect(ctx, srv, c) }
		srv.opener = func(ctx context.Context) (source, error) { return opener(ctx, cfg, s, hook) }
		t.servers = append(t.servers, srv)
		if _, err := srv.source(ctx); err != nil {
			if errors.Is(err, sqldb.ErrURL) || errors.Is(err, ErrConfig) || errors.Is(err, ErrNotDurable) {
				t.Close()
				return nil, err
			}
			srv.fail(cfg, err)
			errs = append(errs, err)
		}
	}
	if len(errs) == len(t.servers) {
		t.Close()
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, errors.Join(errs...))
	}
	return t, nil
}

// openSource opens the backend for s by its URL's dialect.
func openSource(ctx context.Context, cfg Config, s Server, hook connHook) (source, error) {
	db, err := sqldb.Open(ctx, s.URL)
	if err != nil {
		return nil, err
	}
	var src source
	switch db.Dialect {
	case sqldb.MySQL:
		src, err = newMySQL(ctx, db, cfg, s.Offset, hook)
	case sqldb.Postgres:
		src, err = newPostgres(ctx, db, cfg, s.Offset, hook)
	default:
		err = configErr("url", db.URL, "is "+db.Dialect.String()+"; ticket servers are MySQL/MariaDB or PostgreSQL")
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return src, nil
}

// source returns the server's backend, opening it if needed; concurrent
// callers wait for one open.
func (s *server) source(ctx context.Context) (source, error) {
	s.mu.Lock()
	src := s.src
	s.mu.Unlock()
	if src != nil {
		return src, nil
	}
	s.openMu.Lock()
	defer s.openMu.Unlock()
	s.mu.Lock()
	src = s.src
	s.mu.Unlock()
	if src != nil {
		return src, nil
	}
	src, err := s.opener(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.src = src
	s.mu.Unlock()
	return src, nil
}

// floor returns the largest ID s has given this process so far. Any ID the
// server issues for a request that starts after this call must exceed it.
func (s *server) floor() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max
}

// skip reports whether s is backing off at mono time now.
func (s *server) skip(now time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failures > 0 && now < s.retryAt
}

func (s *server) fail(cfg Config, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures++
	d := cfg.BackoffMax
	if s.failures < 30 {
		d = min(cfg.BackoffMin<<(s.failures-1), cfg.BackoffMax)
	}
	s.retryAt = cfg.Clock.Mono() + d
	s.lastErr = err
	s.trusted = false // the next new connection may reach another server
}

// accept checks ids against the server's residue class and against floor,
// the largest ID the server had returned before this request began (a
// fresh ID must exceed it, or the server's counter went back), and records
// success.
func (s *server) accept(ids []int64, floor int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if id <= 0 {
			return fmt.Errorf("%w: %s returned %d", ErrExhausted, s.shown, id)
		}
		if id%s.step != int64(s.cfg.Offset)%s.step {
			return fmt.Errorf("%w: %s returned %d, which is %d mod %d; offset %d wants %d",
				ErrResidue, s.shown, id, id%s.step, s.step, s.cfg.Offset, int64(s.cfg.Offset)%s.step)
		}
		if id <= floor {
			return fmt.Errorf("%w: %s returned %d after it had returned %d", ErrWentBack, s.shown, id, floor)
		}
	}
	for _, id := range ids {
		s.max = max(s.max, id)
	}
	s.failures = 0
	s.lastErr = nil
	return nil
}

// Next returns one ID: one round trip to the next healthy server.
func (t *Ticket) Next(ctx context.Context) (int64, error) {
	var id [1]int64
	if _, err := t.NextN(ctx, id[:]); err != nil {
		return 0, err
	}
	return id[0], nil
}

// NextN fills dst with IDs from one server in one round trip — up to
// MaxBatch from PostgreSQL (nextval over generate_series), one from MySQL,
// where each REPLACE yields one ID — and returns how many it wrote. The
// IDs written increase. With an error it writes nothing.
func (t *Ticket) NextN(ctx context.Context, dst []int64) (int, error) {
	if t.closed.Load() {
		return 0, ErrClosed
	}
	if len(dst) == 0 {
		return 0, nil
	}
	dst = dst[:min(len(dst), MaxBatch)]
	n := len(t.servers)
	start := int(t.rr.Add(1) % uint64(n))
	now := t.cfg.Clock.Mono()
	var errs []error
	var skipped []*server
	for i := range n {
		s := t.servers[(start+i)%n]
		if s.skip(now) {
			skipped = append(skipped, s)
			continue
		}
		k, err := t.try(ctx, s, dst)
		if err == nil {
			return k, nil
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("ticket: %w", ctx.Err())
		}
		errs = append(errs, err)
	}
	// Every server tried has failed and the rest are backing off: probe
	// those too rather than fail while one of them may be back.
	for _, s := range skipped {
		k, err := t.try(ctx, s, dst)
		if err == nil {
			return k, nil
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("ticket: %w", ctx.Err())
		}
		errs = append(errs, err)
	}
	return 0, fmt.Errorf("%w: %w", ErrUnavailable, errors.Join(errs...))
}

// try asks s for IDs once, under the attempt timeout.
func (t *Ticket) try(ctx context.Context, s *server, dst []int64) (int, error) {
	actx, cancel := context.WithTimeout(ctx, t.cfg.AttemptTimeout)
	defer cancel()
	src, err := s.source(actx)
	if err != nil {
		s.fail(t.cfg, err)
		return 0, err
	}
	floor := s.floor()
	k, err := src.tickets(actx, dst)
	if err == nil {
		err = s.accept(dst[:k], floor)
	}
	if errors.Is(err, ErrWentBack) {
		// Repair, not wait: move the server above everything served and
		// ask once more.
		if err = t.repair(actx, s, src, "answered below an ID it had given", "", ""); err == nil {
			floor = s.floor()
			if k, err = src.tickets(actx, dst); err == nil {
				err = s.accept(dst[:k], floor)
			}
		}
	}
	if err == nil && k > 0 {
		err = t.underCeiling(actx, dst[k-1])
	}
	if err != nil {
		s.fail(t.cfg, err)
		return 0, err
	}
	return k, nil
}

// target is the lowest ID s may give next: above every ID it gave this
// process and, with a witness, at or above the ceiling read fresh.
func (t *Ticket) target(ctx context.Context, s *server) (int64, error) {
	target := s.floor() + 1
	if t.cfg.Witness != nil {
		m, err := t.cfg.Witness.Mark(ctx, t.cfg.Space)
		if err != nil {
			return 0, fmt.Errorf("ticket: read the ceiling %q: %w", t.cfg.Space, err)
		}
		storeMax(&t.ceiling, m)
		target = max(target, m)
	}
	return target, nil
}

// repair moves s above target and logs why: once as a change of the
// server when its identity changed (with both identities and values), or
// as a server that went back when it answered at or below an ID it gave
// this process.
func (t *Ticket) repair(ctx context.Context, s *server, r interface {
	raise(context.Context, int64) (int64, error)
}, why string, was, now string) error {
	target, err := t.target(ctx, s)
	if err != nil {
		return err
	}
	var before int64
	if target > 1 {
		if before, err = r.raise(ctx, target); err != nil {
			return fmt.Errorf("ticket: %s: raise the counter to %d: %w", s.shown, target, err)
		}
	}
	s.mu.Lock()
	floor := s.max
	back := target > 1 && before <= floor
	if back {
		s.wentBack++
	}
	s.mu.Unlock()
	switch {
	case was != now:
		t.cfg.Logger.Warn("ticket: the server behind the URL changed (a failover or a restore?); moved it above the ceiling",
			"server", s.shown, "was", was, "now", now, "next_was", before, "highest_given", floor, "raised_to", target, "went_back", back)
	case back:
		t.cfg.Logger.Warn("ticket: server went back below the witness: a failover or a restore? raised it above the ceiling",
			"server", s.shown, "why", why, "next_was", before, "highest_given", floor, "raised_to", target)
	}
	return nil
}

// onConnect checks a new connection before its first ticket: after a
// failure, a change of the server's identity (or on every new connection
// when the server does not tell it), or on the first connection of this
// process the counter is moved above the ceiling — the server
// behind the URL may be a promoted replica or a restored backup that does
// not know the last IDs.
func (t *Ticket) onConnect(ctx context.Context, s *server, c conn) error {
	id, _ := c.identity(ctx) // a hint only: "" when the server will not say
	s.mu.Lock()
	prev, trusted := s.identity, s.trusted
	changed := prev != "" && id != "" && id != prev
	if id != "" {
		s.identity = id
	}
	if changed {
		s.swaps++
	}
	s.mu.Unlock()
	// A server that will not say who it is could be a promoted replica
	// behind any new connection: repair then too.
	if trusted && !changed && id != "" {
		return nil
	}
	why, was := "first connection", id
	if changed {
		why, was = "server identity changed", prev
	} else if prev != "" {
		why = "new connection after a failure"
	}
	if err := t.repair(ctx, s, c, why, was, id); err != nil {
		return err
	}
	s.mu.Lock()
	s.trusted = true
	s.mu.Unlock()
	return nil
}

// underCeiling returns once hi is below a persisted ceiling, raising it
// Block above hi when it is not; it starts a raise in the background when
// less than half a block is left, so the witness is rarely on the path.
func (t *Ticket) underCeiling(ctx context.Context, hi int64) error {
	w := t.cfg.Witness
	if w == nil {
		return nil
	}
	c := t.ceiling.Load()
	if hi < c {
		if hi >= c-t.cfg.Block/2 && t.raising.CompareAndSwap(false, true) {
			go func() {
				defer t.raising.Store(false)
				bctx, cancel := context.WithTimeout(context.Background(), 2*t.cfg.AttemptTimeout)
				defer cancel()
				t.raise(bctx, hi+t.cfg.Block)
			}()
		}
		return nil
	}
	if err := t.raise(ctx, hi+t.cfg.Block); err != nil {
		return err
	}
	if hi >= t.ceiling.Load() {
		return fmt.Errorf("ticket: ceiling %q is %d, not above %d", t.cfg.Space, t.ceiling.Load(), hi)
	}
	return nil
}

// raise makes the persisted ceiling at least target.
func (t *Ticket) raise(ctx context.Context, target int64) error {
	t.raiseMu.Lock()
	defer t.raiseMu.Unlock()
	if t.ceiling.Load() >= target {
		return nil
	}
	w, sp := t.cfg.Witness, t.cfg.Space
	for {
		m, err := w.Mark(ctx, sp)
		if err != nil {
			return fmt.Errorf("ticket: raise the ceiling %q: %w", sp, err)
		}
		// Claim even when m already reaches target: with several
		// witnesses m is the largest mark, and the claim raises the rest.
		to := max(m, target)
		if _, ok, err := w.Claim(ctx, sp, m, to); err != nil {
			return fmt.Errorf("ticket: raise the ceiling %q to %d: %w", sp, to, err)
		} else if ok {
			storeMax(&t.ceiling, to)
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("ticket: raise the ceiling %q to %d: %w", sp, to, err)
		}
	}
}

func storeMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if old >= v || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// Ceiling returns the ceiling this Ticket last saw persisted (0 without a
// witness): every ID it returned is below it.
func (t *Ticket) Ceiling() int64 { return t.ceiling.Load() }

// Status is one server's health as Ticket sees it.
type Status struct {
	URL      string // without password
	Offset   int
	Up       bool  // false while the server is backing off
	Failures int   // consecutive failures
	Max      int64 // largest ID this process got from it
	Err      error // last failure, nil when up
	// WentBack counts the times the server was found below an ID it had
	// given and was raised above the ceiling; IdentityChanges the times
	// the server behind the URL changed.
	WentBack, IdentityChanges uint64
}

// Status reports each server's health, in Config order, for readiness
// checks and metrics.
func (t *Ticket) Status() []Status {
	now := t.cfg.Clock.Mono()
	out := make([]Status, len(t.servers))
	for i, s := range t.servers {
		s.mu.Lock()
		out[i] = Status{URL: s.shown, Offset: s.cfg.Offset, Up: s.failures == 0 || now >= s.retryAt,
			Failures: s.failures, Max: s.max, Err: s.lastErr, WentBack: s.wentBack, IdentityChanges: s.swaps}
		s.mu.Unlock()
	}
	return out
}

// Close closes every server's connections. Next and NextN then return
// ErrClosed. Close is idempotent.
func (t *Ticket) Close() error {
	if t.closed.Swap(true) {
		return nil
	}
	var errs []error
	for _, s := range t.servers {
		s.mu.Lock()
		src := s.src
		s.src = nil
		s.mu.Unlock()
		if src != nil {
			errs = append(errs, src.close())
		}
	}
	return errors.Join(errs...)
}
