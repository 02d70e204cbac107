package rediscounter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Errors.
var (
	// ErrConfig: a Config that cannot work; the message names the field.
	ErrConfig = errors.New("rediscounter: invalid config")
	// ErrExhausted: the counter would pass MaxValue.
	ErrExhausted = errors.New("rediscounter: counter exhausted")
	// ErrBehind: the ceiling could not be raised far enough for the request
	// (other processes keep racing the counter past it); retry.
	ErrBehind = errors.New("rediscounter: high-water mark fell behind the counter")
	// ErrClosed: the Counter was closed.
	ErrClosed = errors.New("rediscounter: closed")
)

// MaxValue is the largest value a Counter issues: Lua numbers are doubles,
// exact up to 2^53.
const MaxValue = 1<<53 - 1

// DefaultBlock is the default Config.Block.
const DefaultBlock = 10000

// MaxBatch is the most values one NextN takes.
const MaxBatch = 100000

// Config configures a Counter. Redis, Key and Marks are required.
type Config struct {
	// Redis is the server: a redis:// or rediss:// URL, or host:port.
	Redis string
	// Options, when set, is used instead of Redis (it is copied; its
	// OnConnect, if any, runs before the Counter's).
	Options *redis.Options
	// Key is the Redis key holding the counter.
	Key string
	// Marks stores the durable high-water mark.
	Marks MarkStore
	// MarkName names the key's mark in Marks; default Key.
	MarkName string
	// Block is how far ahead of the counter the mark is raised, 1..2^40;
	// default 10000. Larger blocks mean fewer SQL writes and bigger gaps
	// after a Redis crash.
	Block int64
}

// Counter issues strictly increasing values of one Redis key. It is safe
// for concurrent use. It never returns a value above the mark persisted
// in Marks, and never a value returned before for the key by any Counter
// that follows the same protocol — across Redis restarts from older
// snapshots, key loss and process restarts (see the package doc).
type Counter struct {
	client *redis.Client
	key    []string
	marks  MarkStore
	name   string
	block  int64

	ceiling atomic.Int64 // a mark known to be persisted
	floor   atomic.Int64 // a value the counter is known to have reached on this run

	// wentBack counts the times the counter was found below a value this
	// process had seen it reach (the key lost, Redis restarted from an
	// older snapshot) and was raised past the mark.
	wentBack atomic.Int64

	runMu     sync.Mutex
	recovered map[string]bool // Redis run_ids this process has recovered

	raiseMu sync.Mutex // one raise at a time; off the hot path
	raising atomic.Bool
	bg      context.Context
	stop    context.CancelFunc
	bgMu    sync.Mutex // orders wg.Add against Close's wg.Wait
	wg      sync.WaitGroup
	closed  atomic.Bool
}

// incrScript increments by ARGV[3] unless the counter is below the floor
// ARGV[2] (data lost: {2, counter}) or the result would pass the ceiling
// ARGV[1] ({1, counter}); on success it returns {0, new value}.
var incrScript = redis.NewScript(`
local c = redis.call('GET', KEYS[1])
if c == false then c = 0 else c = tonumber(c) end
if c == nil then return redis.error_reply('rediscounter: key ' .. KEYS[1] .. ' does not hold an integer') end
if c < tonumber(ARGV[2]) then return {2, c} end
local n = tonumber(ARGV[3])
if c + n > tonumber(ARGV[1]) then return {1, c} end
return {0, redis.call('INCRBY', KEYS[1], n)}
`)

// recoverScript sets the counter to max(counter, ARGV[1]) and returns the
// counter as found and as left.
var recoverScript = redis.NewScript(`
local c = redis.call('GET', KEYS[1])
if c == false then c = 0 else c = tonumber(c) end
if c == nil then return redis.error_reply('rediscounter: key ' .. KEYS[1] .. ' does not hold an integer') end
local m = tonumber(ARGV[1])
if c < m then
  redis.call('SET', KEYS[1], ARGV[1])
  return {c, m}
end
return {c, c}
`)

func configErr(field, value, reason string) error {
	return fmt.Errorf("%w: %s %q %s", ErrConfig, field, value, reason)
}

// Open validates cfg, connects to Redis — recovering the counter past the
// persisted mark on the first connection — and raises the mark one block
// ahead. It fails if Redis or the mark store cannot be reached.
func Open(ctx context.Context, cfg Config) (*Counter, error) {
	if cfg.Key == "" {
		return nil, configErr("key", "", "is empty")
	}
	if cfg.Marks == nil {
		return nil, configErr("marks", "", "is nil: give a MarkStore such as NewSQLMarks")
	}
	if cfg.MarkName == "" {
		cfg.MarkName = cfg.Key
	}
	if len(cfg.MarkName) > 191 {
		return nil, configErr("mark_name", cfg.MarkName[:20]+"...", "is longer than 191 bytes")
	}
	if cfg.Block == 0 {
		cfg.Block = DefaultBlock
	}
	if cfg.Block < 1 || cfg.Block > 1<<40 {
		return nil, configErr("block", strconv.FormatInt(cfg.Block, 10), "is outside 1..2^40")
	}
	var opt *redis.Options
	switch {
	case cfg.Options != nil:
		o := *cfg.Options
		opt = &o
	case cfg.Redis == "":
		return nil, configErr("redis", "", "is empty: give redis://host:port or host:port")
	default:
		u := cfg.Redis
		if !strings.Contains(u, "://") {
			u = "redis://" + u
		}
		var err error
		if opt, err = redis.ParseURL(u); err != nil {
			return nil, configErr("redis", cfg.Redis, "does not parse: "+err.Error())
		}
	}
	c := &Counter{
		key:       []string{cfg.Key},
		marks:     cfg.Marks,
		name:      cfg.MarkName,
		block:     cfg.Block,
		recovered: map[string]bool{},
	}
	c.bg, c.stop = context.WithCancel(context.Background())
	userHook := opt.OnConnect
	opt.OnConnect = func(ctx context.Context, cn *redis.Conn) error {
		if userHook != nil {
			if err := userHook(ctx, cn); err != nil {
				return err
			}
		}
		return c.onConnect(ctx, cn)
	}
	c.client = redis.NewClient(opt)
	if err := c.client.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("rediscounter: connect %s: %w", opt.Addr, err)
	}
	if err := c.raise(ctx, max(c.ceiling.Load(), c.floor.Load())+c.block); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// onConnect runs on every new Redis connection before it is used (rule 2).
func (c *Counter) onConnect(ctx context.Context, cn *redis.Conn) error {
	info, err := cn.Info(ctx, "server").Result()
	if err != nil {
		return fmt.Errorf("rediscounter: INFO server: %w", err)
	}
	run := runID(info)
	if run == "" {
		return errors.New("rediscounter: INFO server has no run_id")
	}
	c.runMu.Lock()
	done := c.recovered[run]
	c.runMu.Unlock()
	if done {
		return nil
	}
	if err := c.recoverOn(ctx, cn); err != nil {
		return err
	}
	c.runMu.Lock()
	c.recovered[run] = true
	c.runMu.Unlock()
	return nil
}

func runID(info string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, "run_id:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// recoverOn reads the persisted mark afresh and moves the counter to at
// least it. The read must come after the Redis run being recovered began;
// it does, since the caller is talking to that run.
func (c *Counter) recoverOn(ctx context.Context, s redis.Scripter) error {
	m, err := c.marks.Mark(ctx, c.name)
	if err != nil {
		return err
	}
	res, err := recoverScript.Run(ctx, s, c.key, m).Int64Slice()
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("script returned %v", res)
	}
	if err != nil {
		return fmt.Errorf("rediscounter: recover %s past mark %d: %w", c.key[0], m, err)
	}
	found, v := res[0], res[1]
	// Below the mark is how a new process finds any counter (the mark runs
	// a block ahead); below a value this process saw it reach, it lost
	// acknowledged writes.
	if found < c.floor.Load() {
		c.wentBack.Add(1)
	}
	storeMax(&c.ceiling, m)
	// The counter is at least v on this run from now on; a floor from an
	// earlier run is no lower bound any more, but it is <= m <= v.
	storeMax(&c.floor, v)
	return nil
}

func storeMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// raise makes the persisted mark, and so the ceiling, at least target.
func (c *Counter) raise(ctx context.Context, target int64) error {
	if target > MaxValue {
		target = MaxValue
	}
	if c.ceiling.Load() >= target {
		return nil
	}
	c.raiseMu.Lock()
	defer c.raiseMu.Unlock()
	if c.ceiling.Load() >= target {
		return nil
	}
	m, err := c.marks.Raise(ctx, c.name, target)
	if err != nil {
		return err
	}
	storeMax(&c.ceiling, m)
	return nil
}

// prefetch raises the mark in the background when the ceiling is less
// than half a block above v.
func (c *Counter) prefetch(v int64) {
	if c.ceiling.Load()-v >= c.block/2 || !c.raising.CompareAndSwap(false, true) {
		return
	}
	c.bgMu.Lock()
	defer c.bgMu.Unlock()
	if c.closed.Load() {
		c.raising.Store(false)
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer c.raising.Store(false)
		// A failure here is not lost: the next request that reaches the
		// ceiling raises synchronously and reports it.
		_ = c.raise(c.bg, v+c.block)
	}()
}

// Next returns the next value of the key: one script call (one INCR)
// per ID, strictly increasing.
func (c *Counter) Next(ctx context.Context) (int64, error) {
	var v [1]int64
	if _, err := c.NextN(ctx, v[:]); err != nil {
		return 0, err
	}
	return v[0], nil
}

// NextN fills dst with min(len(dst), MaxBatch) consecutive values taken by
// one INCRBY and returns how many. With an error it writes nothing.
func (c *Counter) NextN(ctx context.Context, dst []int64) (int, error) {
	if c.closed.Load() {
		return 0, ErrClosed
	}
	n := int64(min(len(dst), MaxBatch))
	if n == 0 {
		return 0, nil
	}
	for attempt := range 16 {
		ceil := c.ceiling.Load()
		res, err := incrScript.Run(ctx, c.client, c.key, ceil, c.floor.Load(), n).Int64Slice()
		if err != nil {
			return 0, fmt.Errorf("rediscounter: incr %s: %w", c.key[0], err)
		}
		if len(res) != 2 {
			return 0, fmt.Errorf("rediscounter: incr %s: script returned %v", c.key[0], res)
		}
		switch code, v := res[0], res[1]; code {
		case 0:
			storeMax(&c.floor, v)
			for i := range n {
				dst[i] = v - n + 1 + i
			}
			c.prefetch(v)
			return int(n), nil
		case 1: // at the ceiling: raise it past the counter, then retry
			if v+n > MaxValue {
				return 0, fmt.Errorf("%w: %s is at %d; %d more would pass %d", ErrExhausted, c.key[0], v, n, int64(MaxValue))
			}
			// Other processes may race the counter past the new ceiling
			// before this call's INCRBY: each race lost doubles the lead
			// (up to 1,024 blocks), so a call is never starved; the
			// price is a larger gap if the process dies holding it.
			lead := max(c.block, n) << min(attempt, 10)
			target := v + n // <= MaxValue, checked above
			if lead > MaxValue-target {
				target = MaxValue
			} else {
				target += lead
			}
			if err := c.raise(ctx, target); err != nil {
				return 0, err
			}
		case 2: // below the floor: the key lost data without a restart
			if err := c.recoverOn(ctx, c.client); err != nil {
				return 0, err
			}
		default:
			return 0, fmt.Errorf("rediscounter: incr %s: script returned code %d", c.key[0], code)
		}
	}
	return 0, fmt.Errorf("%w: %s", ErrBehind, c.key[0])
}

// Ceiling returns the persisted mark this Counter works under: every value
// it has returned is at most this, and so is the mark in the store.
func (c *Counter) Ceiling() int64 { return c.ceiling.Load() }

// WentBack counts the times this Counter found Redis's counter below a
// value it had seen it reach (the key deleted or evicted, Redis restarted
// from an older snapshot) and raised it past the persisted mark, so no
// value repeated.
func (c *Counter) WentBack() int64 { return c.wentBack.Load() }

// Close stops background raises and closes the Redis client. It is
// idempotent; Next and NextN then return ErrClosed.
func (c *Counter) Close() error {
	c.bgMu.Lock()
	already := c.closed.Swap(true)
	c.bgMu.Unlock()
	if already {
		return nil
	}
	c.stop()
	c.wg.Wait()
	if c.client != nil {
		return c.client.Close()
	}
	return nil
}
