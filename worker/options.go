package worker

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/internal/mutate"
)

// Defaults for the Options.
const (
	// DefaultTTL is how long a lease survives without a keepalive.
	DefaultTTL = 10 * time.Second
	// DefaultTimeout bounds connecting to a coordinator and each request.
	DefaultTimeout = 5 * time.Second
)

// An Option configures an Assigner. Options are applied over the defaults
// in order; Open and the New* constructors validate the result and name the
// offending option in the error.
type Option func(*settings)

type settings struct {
	clock   clock.Clock
	ttl     time.Duration
	margin  time.Duration // 0: ttl/5
	timeout time.Duration
	holder  string
	logger  *slog.Logger
	mut     *mutate.Set // mistakes a simulation puts back; nil in production

	interval time.Duration // keepalive period; 0: ttl/3 (set by backends)

	horizonFile    string // static, ip, mac: where the horizon is kept
	horizonFileSet bool
	memoryHorizon  bool // static, ip, mac: the caller accepts a horizon in memory only

	etcdUser, etcdPassword string // etcd: authentication
}

func newSettings(opts []Option) (settings, error) {
	s := settings{ttl: DefaultTTL, timeout: DefaultTimeout}
	for _, o := range opts {
		o(&s)
	}
	if s.clock == nil {
		s.clock = clock.NewReal()
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if s.holder == "" {
		h, _ := os.Hostname()
		s.holder = h + ":" + strconv.Itoa(os.Getpid())
	}
	if s.ttl < time.Second {
		return s, fmt.Errorf("%w: ttl %v is below 1s", ErrBadOption, s.ttl)
	}
	if s.margin == 0 {
		s.margin = s.ttl / 5
	}
	if s.margin < 0 || s.margin >= s.ttl {
		return s, fmt.Errorf("%w: margin %v must be in (0, ttl %v)", ErrBadOption, s.margin, s.ttl)
	}
	if s.timeout <= 0 {
		return s, fmt.Errorf("%w: timeout %v must be positive", ErrBadOption, s.timeout)
	}
	if s.horizonFileSet && s.horizonFile == "" {
		return s, fmt.Errorf("%w: horizon file is empty (want a path such as /var/lib/idmint/static.horizon)", ErrBadOption)
	}
	if s.horizonFileSet && s.memoryHorizon {
		return s, fmt.Errorf("%w: horizon file %q and a memory-only horizon both given; choose one", ErrBadOption, s.horizonFile)
	}
	return s, nil
}

// WithClock sets the clock leases are judged on. Default: clock.NewReal().
// A generator bound to the lease must use the same Clock, because
// ValidUntil is a reading of its Mono.
func WithClock(c clock.Clock) Option { return func(s *settings) { s.clock = c } }

// WithTTL sets how long a lease outlives its last keepalive on the
// coordinator (etcd lease TTL, ZooKeeper session timeout, SQL heartbeat
// staleness). Default 10 s; at least 1 s (etcd raises anything below its
// minimum, about 2 s, which only makes the fence more conservative).
// Keepalives are sent every TTL/3.
func WithTTL(d time.Duration) Option { return func(s *settings) { s.ttl = d } }

// WithMargin sets how long before TTL expiry, counted from the sending of
// the last confirmed keepalive, the fence closes. It must cover the drift
// between this machine's monotonic clock and the coordinator's during one
// TTL. Default TTL/5.
func WithMargin(d time.Duration) Option { return func(s *settings) { s.margin = d } }

// WithTimeout bounds connecting to the coordinator and each request to it;
// an unreachable endpoint fails Open or Acquire within it. Default 5 s.
func WithTimeout(d time.Duration) Option { return func(s *settings) { s.timeout = d } }

// WithHolder names this process in the coordinator (List shows it).
// Default "hostname:pid".
func WithHolder(name string) Option { return func(s *settings) { s.holder = name } }

// WithLogger sets where keepalive failures and lease loss are logged.
// Default: discarded.
func WithLogger(l *slog.Logger) Option { return func(s *settings) { s.logger = l } }

// WithMutations puts known, fixed mistakes back into the lease, for the
// module's own simulation tests. Its argument's type is internal to the
// module, so other code can pass only nil (no mistakes).
func WithMutations(m *mutate.Set) Option { return func(s *settings) { s.mut = m } }

// WithHorizonFile names the file a static, ip or mac assigner records its
// time horizon in (design.md U3, U6): written and fsync'd before any ID is
// stamped past it, lowered to the last issued ID on a clean close, read on
// the next Acquire, so a restart with the clock set back issues nothing at
// or below what the last run may have issued. It holds the same JSON as a
// file:// coordinator's file, and is flock'ed (path+".lock") while leased,
// so two processes on one machine cannot share it. Several worker IDs may
// use one file over time: its horizon only covers more. Without it (or
// WithMemoryHorizon) those assigners refuse to grant a lease. Coordinators
// that record the horizon themselves (file, SQL, etcd, ZooKeeper) ignore
// it.
func WithHorizonFile(path string) Option {
	return func(s *settings) { s.horizonFile, s.horizonFileSet = path, true }
}

// WithMemoryHorizon lets a static, ip or mac assigner without a horizon
// file keep its horizon in memory: it protects handovers inside one process
// only, so a restart with the clock set back can repeat IDs the last run
// issued. Use it only where that cannot happen or does not matter (tests,
// one-shot tools on a clock that is never stepped back); the URL form is
// horizon=memory. It cannot be combined with WithHorizonFile.
func WithMemoryHorizon() Option { return func(s *settings) { s.memoryHorizon = true } }

// WithEtcdAuth makes the etcd backend authenticate as user with password
// (etcd's own users, `etcdctl auth enable`).
func WithEtcdAuth(user, password string) Option {
	return func(s *settings) { s.etcdUser, s.etcdPassword = user, password }
}
