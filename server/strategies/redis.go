package strategies

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idmint/idmint/rediscounter"
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/sqldb"
	"github.com/idmint/idmint/witness"
)

// redisStrategy serves Redis INCR counters made crash-safe by
// rediscounter: a durable high-water mark in the key's SQL store, raised
// ahead of use in blocks, and recovery past it after a Redis restart or
// data loss.
func redisStrategy() server.Strategy {
	return typed(server.Strategy{
		Name: "redis",
		Summary: "Redis INCR, strictly increasing per key, with a durable high-water mark in the key's SQL store so a Redis " +
			"rollback (RDB snapshot, lagging replica) never repeats an ID (options: redis: a stores: name, redis://host:port/db " +
			"or host:port, required; counter_key: the Redis key, default idmint:<key>; block: how far the mark runs ahead, default 10000; " +
			"store: the SQL store of the marks, default the server's default store)",
	}, parseRedis, newRedis)
}

// redisKeyOptions is a redis key's options, checked.
type redisKeyOptions struct {
	redis      *redis.Options
	counterKey string // "" for idmint:<key>
	block      int64
}

// redisOptions parses the endpoint a redis option names (after resolving a
// stores: name) as rediscounter does: a redis:// or rediss:// URL, or
// host:port.
func redisOptions(u string) (*redis.Options, error) {
	if !strings.Contains(u, "://") {
		if _, _, err := net.SplitHostPort(u); err != nil {
			return nil, fmt.Errorf("not a stores: name, redis:// URL or host:port")
		}
		u = "redis://" + u
	}
	if !strings.HasPrefix(u, "redis://") && !strings.HasPrefix(u, "rediss://") {
		return nil, fmt.Errorf("not a stores: name, redis:// URL or host:port")
	}
	o, err := redis.ParseURL(u)
	if err != nil {
		return nil, fmt.Errorf("does not parse: %v", err)
	}
	return o, nil
}

// checkSQLStore reports whether the store a key names can hold SQL tables.
func checkSQLStore(u string) error {
	for _, p := range []string{"sqlite://", "postgres://", "postgresql://", "mysql://"} {
		if strings.HasPrefix(u, p) {
			return nil
		}
	}
	if !strings.Contains(u, "://") && strings.Contains(u, "tcp(") {
		return nil
	}
	return fmt.Errorf("the high-water marks need a SQL store (sqlite://, postgres://, mysql://)")
}

// parseRedis checks a redis key's options and returns them read.
func parseRedis(k server.KeyConfig, cfg *server.Config) (redisKeyOptions, []server.Problem) {
	ps := unknownOptions(k, "redis", "counter_key", "block")
	var o redisKeyOptions
	v, ok := k.Options["redis"]
	if !ok || v == "" {
		ps = append(ps, server.Problem{Field: "options.redis", Value: v, Message: "is required: a stores: name, redis://host:port/db or host:port"})
	} else {
		u, _ := resolveEndpoint(cfg, v) // whether a stores: name: not shown
		ro, err := redisOptions(u)
		if err != nil {
			ps = append(ps, server.Problem{Field: "options.redis", Value: sqldb.Redact(u), Message: err.Error()})
		}
		o.redis = ro
	}
	if ck, ok := k.Options["counter_key"]; ok && (ck == "" || len(ck) > 191) {
		ps = append(ps, server.Problem{Field: "options.counter_key", Value: ck, Message: "must be 1 to 191 bytes (it names the key's high-water mark too)"})
	}
	o.counterKey = k.Options["counter_key"]
	block, p := intOption(k, "block", rediscounter.DefaultBlock, 1, 1<<40)
	if p != nil {
		ps = append(ps, *p)
	}
	o.block = block
	if u, ok := cfg.Stores[k.Store]; ok {
		if err := checkSQLStore(u); err != nil {
			ps = append(ps, server.Problem{Field: "store", Value: k.Store, Message: err.Error()})
		}
	}
	if k.Step != 0 {
		ps = append(ps, server.Problem{Field: "step", Value: strconv.FormatInt(k.Step, 10), Message: "redis keys have no segment step; the mark's block is options.block"})
	}
	return o, ps
}

// marksResource is one SQL database holding the marks of every redis key
// on one store.
type marksResource struct {
	db    *sqldb.DB
	marks *rediscounter.SQLMarks
}

func (r *marksResource) Close(ctx context.Context) error { return r.db.Close() }

func newRedis(ctx context.Context, env *server.Env, name string, k server.KeyConfig, o redisKeyOptions) (server.Issuer, error) {
	opts, block, counterKey := o.redis, o.block, o.counterKey
	if counterKey == "" {
		counterKey = "idmint:" + name
	}
	storeURL := env.Config.Stores[k.Store]
	res, err := env.Shared(ctx, "redis marks "+k.Store, func(ctx context.Context) (server.Resource, error) {
		db, err := sqldb.Open(ctx, storeURL)
		if err != nil {
			return nil, fmt.Errorf("open marks store %q: %w", k.Store, err)
		}
		m, err := rediscounter.NewSQLMarks(ctx, db)
		if err != nil {
			db.Close()
			return nil, fmt.Errorf("marks store %q: %w", k.Store, err)
		}
		return &marksResource{db: db, marks: m}, nil
	})
	if err != nil {
		return nil, err
	}
	w, err := openWitness(ctx, env)
	if err != nil {
		return nil, err
	}
	w.warnShared(env, name, opts.Addr)
	c, err := rediscounter.Open(ctx, rediscounter.Config{
		Options: opts, Key: counterKey, Marks: witnessedMarks{res.(*marksResource).marks, w.w}, Block: block,
	})
	if err != nil {
		return nil, err
	}
	// A separate one-connection client answers readiness: a PING must not
	// queue behind the counter's pool, and needs no recovery hook.
	po := *opts
	po.PoolSize, po.MinIdleConns, po.MaxRetries = 1, 0, -1
	po.DialTimeout, po.ReadTimeout, po.WriteTimeout = time.Second, time.Second, time.Second
	env.Logger.Info("redis key ready", "key", name, "redis", opts.Addr, "counter_key", counterKey, "mark_store", k.Store, "ceiling", c.Ceiling())
	return &redisKey{c: c, ping: redis.NewClient(&po), line: newRegionLine(env.Config, name)}, nil
}

// witnessedMarks keeps a Redis counter's high-water mark in its SQL store
// and in the node's witness (the data directory, the cluster's
// coordinator): the mark read is the largest, a raise counts once both
// hold it. A marks database that fails over to a lagging replica, or a
// node-local SQLite store beside a shared Redis, then cannot lower the
// ceiling the counter is recovered to.
type witnessedMarks struct {
	sql rediscounter.MarkStore
	w   witness.Witness
}

func (m witnessedMarks) Mark(ctx context.Context, name string) (int64, error) {
	a, err := m.sql.Mark(ctx, name)
	if err != nil {
		return 0, err
	}
	b, err := m.w.Mark(ctx, "redis/"+name)
	if err != nil {
		return 0, err
	}
	return max(a, b), nil
}

func (m witnessedMarks) Raise(ctx context.Context, name string, target int64) (int64, error) {
	a, err := m.sql.Raise(ctx, name, target)
	if err != nil {
		return 0, err
	}
	b, err := witness.Raise(ctx, m.w, "redis/"+name, target)
	if err != nil {
		return 0, err
	}
	return min(a, b), nil
}

// redisKey serves one key from its own rediscounter.Counter.
type redisKey struct {
	c    *rediscounter.Counter
	ping *redis.Client
	last atomic.Int64 // largest value handed out by this process
	line regionLine   // the region's share of the number line
}

// behindRetries is how many times one request retries a counter that
// raced past its high-water mark (many concurrent batches larger than the
// mark's block) before answering 503.
const behindRetries = 8

// NextInt64s fills dst with consecutive values, rediscounter.MaxBatch per
// INCRBY. Values got before a failure are dropped: gaps, never repeats.
func (k *redisKey) NextInt64s(ctx context.Context, dst []int64) error {
	behind := 0
	for i := 0; i < len(dst); {
		n, err := k.c.NextN(ctx, dst[i:])
		if errors.Is(err, rediscounter.ErrBehind) && behind < behindRetries && ctx.Err() == nil {
			behind++
			continue
		}
		if err != nil {
			return &retryable{err, time.Second}
		}
		i += n
	}
	if v := dst[len(dst)-1]; v > 0 {
		for {
			old := k.last.Load()
			if v <= old || k.last.CompareAndSwap(old, v) {
				break
			}
		}
	}
	return k.line.apply(dst)
}

// Ready pings the Redis server.
func (k *redisKey) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return k.ping.Ping(ctx).Err()
}

// Stats are the counter's persisted mark, the largest value handed out,
// and its runway: the mark claims every value up to it, so the headroom is
// what lies between the mark and rediscounter.MaxValue.
func (k *redisKey) Stats() []server.Stat {
	mark := k.c.Ceiling()
	return append([]server.Stat{
		{Name: "redis_counter_ceiling", Help: "Persisted high-water mark a redis key's counter works under.", Value: float64(mark)},
		{Name: "redis_counter_last", Help: "Largest value this process handed out for a redis key.", Value: float64(k.last.Load())},
		{Name: "redis_went_back_total", Help: "Times a redis key's counter was found below a value this node had seen it reach (the key lost or evicted, Redis restarted from an older snapshot) and was raised past the persisted mark.",
			Value: float64(k.c.WentBack()), Counter: true},
	}, k.line.runway(rediscounter.MaxValue, mark)...)
}

// Close closes the counter and the readiness client.
func (k *redisKey) Close(ctx context.Context) error {
	err := k.c.Close()
	if perr := k.ping.Close(); err == nil {
		err = perr
	}
	return err
}
