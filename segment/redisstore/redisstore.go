// Package redisstore keeps segments in Redis: one hash per key holding
// max_id, step, description and update_time, moved up by HINCRBY inside a
// Lua script, so each allocation is one atomic command.
//
// # Durability — read this before using it
//
// Redis acknowledges a write once it is in memory. Whether an acknowledged
// max_id survives a crash depends on the server's persistence settings,
// and a max_id that goes back after a restart makes idmint issue the same
// IDs again (design U5):
//
//   - appendonly yes + appendfsync always: every write is fsynced to the
//     append-only file before Redis replies. A crash or power loss loses
//     nothing acknowledged. This is the only safe setting, and Open
//     refuses any other unless told otherwise.
//   - appendfsync everysec (Redis's AOF default): up to about one second
//     of writes (two in the worst case) is lost on a crash of the machine
//     or of Redis under disk stalls. Allocations in that window are
//     reissued after restart: duplicates.
//   - RDB snapshots only (save ...), or no persistence: everything since
//     the last snapshot, or everything, is lost — max_id goes back by that
//     much.
//   - Replication is asynchronous: a replica promoted after a failover may
//     miss the last allocations even with appendfsync always on the old
//     primary. WAIT / min-replicas-to-write narrow the window but do not
//     close it. Use a single primary with AOF always, or a SQL store.
//
// Open checks appendonly and appendfsync with CONFIG GET and fails with
// ErrVolatile unless they are "yes" and "always". A server that forbids
// CONFIG (some managed services) cannot be checked and also fails. Add
// allow_volatile=true to the URL to skip the check when you accept the
// risk, e.g. in tests or when the key's IDs need not be unique across a
// Redis crash.
//
// Every script touches one key, so the store also works against Redis
// Cluster (List scans only the node the client talks to there).
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/sqldb"
)

// ErrVolatile: the Redis server's persistence settings would lose
// acknowledged allocations on a crash (see the package documentation).
var ErrVolatile = errors.New("redisstore: redis persistence is not appendonly yes + appendfsync always")

// ErrURL wraps every error about the URL given to Open.
var ErrURL = errors.New("redisstore: bad url")

// Store is a segment.Store on Redis, safe for concurrent use.
type Store struct {
	c      *redis.Client
	prefix string // "<prefix>:segment:"
	clock  clock.Clock
	owns   bool
}

var _ segment.Store = (*Store)(nil)

var prefixRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// Open connects to the Redis at rawURL:
//
//	redis://[user:password@]host:port[/db][?prefix=idmint][&allow_volatile=true]
//	rediss://...   (TLS)
//
// prefix (default "idmint") starts every Redis key the store writes;
// allow_volatile=true skips the durability check. Other query options are
// go-redis's own (dial_timeout, pool_size, ...).
func Open(ctx context.Context, rawURL string) (*Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: url does not parse (redis://host:port/db)", ErrURL)
	}
	shown := u.Redacted()
	q := u.Query()
	prefix := "idmint"
	if v := q.Get("prefix"); v != "" {
		prefix = v
	}
	if !prefixRE.MatchString(prefix) {
		return nil, fmt.Errorf("%w: %s: prefix %q: want 1 to 64 of A-Z a-z 0-9 _ . : -", ErrURL, shown, prefix)
	}
	allow := false
	if v := q.Get("allow_volatile"); v != "" {
		allow, err = strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: allow_volatile %q is not a boolean", ErrURL, shown, v)
		}
	}
	if q.Has(sqldb.PasswordFileParam) {
		// As in the SQL stores' URLs: the password is the file's first
		// line (go-redis would refuse the parameter as unknown).
		if _, set := u.User.Password(); set {
			return nil, fmt.Errorf("%w: %s: both a password in the URL and %s; give one", ErrURL, shown, sqldb.PasswordFileParam)
		}
		pw, err := sqldb.ReadPasswordFile(q.Get(sqldb.PasswordFileParam))
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrURL, shown, err)
		}
		u.User = url.UserPassword(u.User.Username(), pw) // no user: Redis's default user
		q.Del(sqldb.PasswordFileParam)
	}
	q.Del("prefix")
	q.Del("allow_volatile")
	u.RawQuery = q.Encode()
	opts, err := redis.ParseURL(u.String())
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrURL, shown, strings.ReplaceAll(err.Error(), rawURL, shown))
	}
	c := redis.NewClient(opts)
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("redisstore: connect %s: %w", shown, err)
	}
	if !allow {
		if err := CheckDurable(ctx, c); err != nil {
			c.Close()
			return nil, fmt.Errorf("redisstore: %s: %w", shown, err)
		}
	}
	s := New(c, prefix)
	s.owns = true
	return s, nil
}

// CheckDurable returns nil if the server runs with appendonly yes and
// appendfsync always, and an error wrapping ErrVolatile otherwise or when
// CONFIG GET is refused.
func CheckDurable(ctx context.Context, c *redis.Client) error {
	got := map[string]string{}
	for _, p := range []string{"appendonly", "appendfsync"} {
		m, err := c.ConfigGet(ctx, p).Result()
		if err != nil {
			return fmt.Errorf("%w: cannot check (CONFIG GET %s: %v); add allow_volatile=true to the url to skip the check", ErrVolatile, p, err)
		}
		got[p] = m[p]
	}
	if got["appendonly"] != "yes" || got["appendfsync"] != "always" {
		return fmt.Errorf("%w: server has appendonly %q, appendfsync %q; a crash would reissue IDs (add allow_volatile=true to the url to accept that)",
			ErrVolatile, got["appendonly"], got["appendfsync"])
	}
	return nil
}

// New returns a Store on an existing client with Redis keys starting
// "<prefix>:segment:". It does not check durability (see CheckDurable),
// and Close does not close c.
func New(c *redis.Client, prefix string) *Store {
	return &Store{c: c, prefix: prefix + ":segment:", clock: clock.NewReal()}
}

// Close closes the client if Open created it.
func (s *Store) Close() error {
	if s.owns {
		return s.c.Close()
	}
	return nil
}

// hashKey names key's hash; the braces make it a Redis Cluster hash tag.
func (s *Store) hashKey(key string) string { return s.prefix + "{" + key + "}" }

func (s *Store) now() string { return strconv.FormatInt(s.clock.Now().UnixMilli(), 10) }

// Reply numbers travel as strings: Lua numbers are doubles and would round
// IDs above 2^53.
var allocScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('IDMINT_UNKNOWN') end
local rowstep = redis.call('HGET', KEYS[1], 'step')
local step = ARGV[1]
if step == '0' then step = rowstep end
local n = tonumber(step)
if n == nil or n <= 0 then return redis.error_reply('IDMINT_BADSTEP ' .. tostring(rowstep)) end
local r = redis.pcall('HINCRBY', KEYS[1], 'max_id', step)
if type(r) == 'table' and r.err then
  return redis.error_reply('IDMINT_OVERFLOW ' .. tostring(redis.call('HGET', KEYS[1], 'max_id')) .. ' ' .. step)
end
redis.call('HSET', KEYS[1], 'update_time', ARGV[2])
return {redis.call('HGET', KEYS[1], 'max_id'), step, rowstep}
`)

var createScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return redis.error_reply('IDMINT_EXISTS') end
redis.call('HSET', KEYS[1], 'max_id', ARGV[1], 'step', ARGV[2], 'description', ARGV[3], 'update_time', ARGV[4])
return 1
`)

var raiseScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], 'max_id')
if not cur then return redis.error_reply('IDMINT_UNKNOWN') end
if tonumber(cur) < tonumber(ARGV[1]) then
  redis.call('HSET', KEYS[1], 'max_id', ARGV[1], 'update_time', ARGV[2])
end
return cur
`)

var setStepScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('IDMINT_UNKNOWN') end
redis.call('HSET', KEYS[1], 'step', ARGV[1], 'update_time', ARGV[2])
return 1
`)

// scriptErr maps the scripts' error replies to segment's errors.
func scriptErr(op, key string, err error) error {
	// Redis 7 puts "ERR " in front of a script's error_reply.
	msg := err.Error()
	if i := strings.Index(msg, "IDMINT_"); i >= 0 {
		msg = msg[i:]
	}
	switch {
	case strings.HasPrefix(msg, "IDMINT_UNKNOWN"):
		return fmt.Errorf("%w: %q", segment.ErrUnknownKey, key)
	case strings.HasPrefix(msg, "IDMINT_EXISTS"):
		return fmt.Errorf("%w: %q", segment.ErrKeyExists, key)
	case strings.HasPrefix(msg, "IDMINT_BADSTEP"):
		return fmt.Errorf("%w: key %q: step field is %q", segment.ErrBadStep, key, strings.TrimPrefix(msg, "IDMINT_BADSTEP "))
	case strings.HasPrefix(msg, "IDMINT_OVERFLOW"):
		// "IDMINT_OVERFLOW <max_id> <step>": HINCRBY refused to add the
		// step to max_id. It refuses an overflow, and also a field that
		// is not an integer (a hand edit; tonumber took a step of "1e3").
		f := strings.Fields(msg)
		if len(f) < 3 {
			return fmt.Errorf("redisstore: %s %q: HINCRBY refused: %s", op, key, msg)
		}
		maxID, errMax := strconv.ParseInt(f[1], 10, 64)
		step, errStep := strconv.ParseInt(f[2], 10, 64)
		switch {
		case errStep != nil:
			return fmt.Errorf("%w: key %q: step field is %q, not an integer", segment.ErrBadStep, key, f[2])
		case errMax != nil:
			return fmt.Errorf("redisstore: %s %q: max_id field is %q, not an integer (the key's hash was changed outside idmint)", op, key, f[1])
		}
		return segment.OverflowError(key, maxID, step)
	}
	return fmt.Errorf("redisstore: %s %q: %w", op, key, err)
}

// Allocate runs one script: HINCRBY max_id by the step and read it back.
// HINCRBY refuses to pass 2^63-1 and changes nothing then.
func (s *Store) Allocate(ctx context.Context, key string, step int64) (segment.Segment, error) {
	if err := segment.ValidateAllocate(key, step); err != nil {
		return segment.Segment{}, err
	}
	res, err := allocScript.Run(ctx, s.c, []string{s.hashKey(key)}, strconv.FormatInt(step, 10), s.now()).StringSlice()
	if err != nil {
		return segment.Segment{}, scriptErr("allocate", key, err)
	}
	return allocated(key, res)
}

var _ segment.BatchAllocator = (*Store)(nil)

// AllocateMany runs Allocate's script for every request in one pipeline:
// one round trip, each key's allocation atomic on its own. A request the
// script refuses (unknown key, bad step, overflow) fails alone.
func (s *Store) AllocateMany(ctx context.Context, reqs []segment.AllocateRequest) ([]segment.Allocation, error) {
	out, err := segment.CheckBatch(reqs)
	if err != nil {
		return nil, err
	}
	todo := make([]int, 0, len(reqs))
	for i := range reqs {
		if out[i].Err == nil {
			todo = append(todo, i)
		}
	}
	now := s.now()
	cmds, err := s.evalMany(ctx, allocScript, len(todo), func(j int) ([]string, []any) {
		r := reqs[todo[j]]
		return []string{s.hashKey(r.Key)}, []any{strconv.FormatInt(r.Step, 10), now}
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: allocate %d keys: %w", len(reqs), err)
	}
	for j, i := range todo {
		if res, err := cmds[j].StringSlice(); err != nil {
			out[i].Err = scriptErr("allocate", reqs[i].Key, err)
		} else {
			out[i].Segment, out[i].Err = allocated(reqs[i].Key, res)
		}
	}
	return out, nil
}

// evalMany runs script n times in one pipeline, call(j) giving the j-th
// run's keys and arguments, and returns each run's reply, which may be
// the script's own error. Runs the server refused with NOSCRIPT (its
// script cache is empty after a restart) ran nothing: the script is
// loaded and they are sent again, once. Any other failure (the
// connection) fails the whole, since what the server did is unknown.
func (s *Store) evalMany(ctx context.Context, script *redis.Script, n int, call func(j int) ([]string, []any)) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, n)
	todo := make([]int, n)
	for j := range todo {
		todo[j] = j
	}
	for try := 0; len(todo) > 0; try++ {
		pipe := s.c.Pipeline()
		for _, j := range todo {
			keys, args := call(j)
			cmds[j] = script.EvalSha(ctx, pipe, keys, args...)
		}
		_, _ = pipe.Exec(ctx) // each command carries its own error
		var again []int
		for _, j := range todo {
			err := cmds[j].Err()
			var rerr redis.Error
			switch {
			case err == nil:
			case redis.HasErrorPrefix(err, "NOSCRIPT") && try == 0:
				again = append(again, j)
			case errors.As(err, &rerr):
			default:
				return nil, err
			}
		}
		if len(again) > 0 {
			if err := script.Load(ctx, s.c).Err(); err != nil {
				return nil, fmt.Errorf("load the script: %w", err)
			}
		}
		todo = again
	}
	return cmds, nil
}

// allocated reads the allocation script's answer for key.
func allocated(key string, res []string) (segment.Segment, error) {
	var err error
	if len(res) != 3 {
		return segment.Segment{}, fmt.Errorf("redisstore: allocate %q: script returned %d values", key, len(res))
	}
	var v [3]int64
	for i, r := range res {
		if v[i], err = strconv.ParseInt(r, 10, 64); err != nil {
			return segment.Segment{}, fmt.Errorf("redisstore: allocate %q: bad number %q: %w", key, r, err)
		}
	}
	maxID, used, rowStep := v[0], v[1], v[2]
	return segment.Segment{Start: maxID - used, End: maxID, Step: rowStep}, nil
}

// Raise sets max_id to atLeast in one script if it is below, and returns
// the max_id it found.
func (s *Store) Raise(ctx context.Context, key string, atLeast int64) (int64, error) {
	if err := segment.ValidateKey(key); err != nil {
		return 0, err
	}
	if atLeast < 0 {
		return 0, fmt.Errorf("%w: key %q: raise to %d", segment.ErrBadMaxID, key, atLeast)
	}
	res, err := raiseScript.Run(ctx, s.c, []string{s.hashKey(key)}, strconv.FormatInt(atLeast, 10), s.now()).Text()
	if err != nil {
		return 0, scriptErr("raise", key, err)
	}
	before, err := strconv.ParseInt(res, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("redisstore: raise %q: bad max_id %q", key, res)
	}
	return before, nil
}

// Identity names the Redis server's run (INFO server run_id): a restart
// or a failover shows as a change.
func (s *Store) Identity(ctx context.Context) (string, error) {
	info, err := s.c.Info(ctx, "server").Result()
	if err != nil {
		return "", fmt.Errorf("redisstore: identity: %w", err)
	}
	for _, ln := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(ln), "run_id:"); ok {
			return "run_id=" + v, nil
		}
	}
	return "", nil
}

// Create writes a new hash.
func (s *Store) Create(ctx context.Context, k segment.KeyInfo) error {
	k, err := segment.ValidateKeyInfo(k)
	if err != nil {
		return err
	}
	err = createScript.Run(ctx, s.c, []string{s.hashKey(k.Key)},
		strconv.FormatInt(k.MaxID, 10), strconv.FormatInt(k.Step, 10), k.Description, s.now()).Err()
	if err != nil {
		return scriptErr("create", k.Key, err)
	}
	return nil
}

func parseInfo(key string, m map[string]string) (segment.KeyInfo, error) {
	k := segment.KeyInfo{Key: key, Description: m["description"]}
	var err error
	if k.MaxID, err = strconv.ParseInt(m["max_id"], 10, 64); err != nil {
		return k, fmt.Errorf("redisstore: key %q: max_id field %q: %w", key, m["max_id"], err)
	}
	if k.Step, err = strconv.ParseInt(m["step"], 10, 64); err != nil {
		return k, fmt.Errorf("redisstore: key %q: step field %q: %w", key, m["step"], err)
	}
	if ms, err := strconv.ParseInt(m["update_time"], 10, 64); err == nil {
		k.UpdateTime = time.UnixMilli(ms).UTC()
	}
	return k, nil
}

var _ segment.BatchCreator = (*Store)(nil)

// CreateMissing runs Create's script for every key in one pipeline,
// skipping the keys that exist (their hashes are left as they are): a
// start with 10,000 keys on a fresh Redis made 10,000 round trips, 1.2 s.
func (s *Store) CreateMissing(ctx context.Context, keys []segment.KeyInfo) error {
	valid, err := segment.ValidateKeyInfos(keys)
	if err != nil {
		return err
	}
	now := s.now()
	cmds, err := s.evalMany(ctx, createScript, len(valid), func(j int) ([]string, []any) {
		k := valid[j]
		return []string{s.hashKey(k.Key)}, []any{strconv.FormatInt(k.MaxID, 10), strconv.FormatInt(k.Step, 10), k.Description, now}
	})
	if err != nil {
		return fmt.Errorf("redisstore: create %d keys: %w", len(valid), err)
	}
	for j, c := range cmds {
		if err := c.Err(); err != nil {
			if err := scriptErr("create", valid[j].Key, err); !errors.Is(err, segment.ErrKeyExists) {
				return err
			}
		}
	}
	return nil
}

// Get reads one hash.
func (s *Store) Get(ctx context.Context, key string) (segment.KeyInfo, error) {
	if err := segment.ValidateKey(key); err != nil {
		return segment.KeyInfo{}, err
	}
	m, err := s.c.HGetAll(ctx, s.hashKey(key)).Result()
	if err != nil {
		return segment.KeyInfo{}, fmt.Errorf("redisstore: get %q: %w", key, err)
	}
	if len(m) == 0 {
		return segment.KeyInfo{}, fmt.Errorf("%w: %q", segment.ErrUnknownKey, key)
	}
	return parseInfo(key, m)
}

// List scans for the store's hashes and reads them, ordered by key.
func (s *Store) List(ctx context.Context) ([]segment.KeyInfo, error) {
	var names []string
	it := s.c.Scan(ctx, 0, s.prefix+"{*}", 1000).Iterator()
	for it.Next(ctx) {
		rk := it.Val()
		if strings.HasPrefix(rk, s.prefix+"{") && strings.HasSuffix(rk, "}") {
			names = append(names, rk)
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("redisstore: list: %w", err)
	}
	cmds := make([]*redis.MapStringStringCmd, len(names))
	if len(names) > 0 {
		_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, n := range names {
				cmds[i] = p.HGetAll(ctx, n)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("redisstore: list: %w", err)
		}
	}
	out := make([]segment.KeyInfo, 0, len(names))
	for i, n := range names {
		m := cmds[i].Val()
		if len(m) == 0 {
			continue // deleted meanwhile
		}
		k, err := parseInfo(strings.TrimSuffix(strings.TrimPrefix(n, s.prefix+"{"), "}"), m)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	sortInfos(out)
	return out, nil
}

func sortInfos(ks []segment.KeyInfo) {
	sort.Slice(ks, func(i, j int) bool { return ks[i].Key < ks[j].Key })
}

// SetStep changes the step field.
func (s *Store) SetStep(ctx context.Context, key string, step int64) error {
	if err := segment.ValidateKey(key); err != nil {
		return err
	}
	if err := segment.ValidateStep(step); err != nil {
		return fmt.Errorf("key %q: %w", key, err)
	}
	if err := setStepScript.Run(ctx, s.c, []string{s.hashKey(key)}, strconv.FormatInt(step, 10), s.now()).Err(); err != nil {
		return scriptErr("set step of", key, err)
	}
	return nil
}

// Delete removes the hash.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := segment.ValidateKey(key); err != nil {
		return err
	}
	n, err := s.c.Del(ctx, s.hashKey(key)).Result()
	if err != nil {
		return fmt.Errorf("redisstore: delete %q: %w", key, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %q", segment.ErrUnknownKey, key)
	}
	return nil
}
