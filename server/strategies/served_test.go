package strategies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/ordernum"
	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/segment/stores"
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/testkit/testserver"
)

// setup is what a served test varies: extra stores, the clock, the
// environment strategies see through Config.Getenv, and the data dir.
type setup struct {
	stores map[string]string
	clk    clock.Clock
	env    map[string]string
	dir    string
	keyDir string
	coord  string // coordinator URL; default static://7
	admin  string // admin_listen (the server does not bind it)
	public bool   // metrics: public
}

func serveWith(t testing.TB, keys map[string]server.KeyConfig, o setup) (*server.Server, http.Handler) {
	t.Helper()
	reg := server.NewRegistry()
	if err := Register(reg); err != nil {
		t.Fatal(err)
	}
	if o.dir == "" {
		o.dir = t.TempDir()
	}
	if o.coord == "" {
		o.coord = "static://7"
	}
	cfg := &server.Config{DataDir: o.dir, Coordinator: o.coord, Stores: map[string]string{}, Keys: keys, KeyDir: o.keyDir, AdminListen: o.admin}
	if o.public {
		cfg.Metrics = "public"
	}
	for n, u := range o.stores {
		cfg.Stores[n] = u
	}
	if _, ok := cfg.Stores["default"]; !ok {
		cfg.Stores["default"] = "sqlite://" + filepath.Join(o.dir, "seg.db")
	}
	if err := cfg.Override(func(name string) string { return o.env[name] }); err != nil {
		t.Fatal(err)
	}
	cfg.SetDefaults()
	s, err := server.New(context.Background(), server.Options{Config: cfg, Registry: reg, Surfaces: surfaces, Clock: o.clk,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s, s.Handler()
}

// hammer asks for count IDs of key from 8 goroutines, rounds times each,
// and returns every ID, failing on a duplicate or a bad answer.
func hammer(t *testing.T, h http.Handler, key string, count, rounds int) []string {
	t.Helper()
	var (
		mu  sync.Mutex
		all []string
		wg  sync.WaitGroup
	)
	seen := map[string]bool{}
	for c := 0; c < 8; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				code, body := get(t, h, "GET", fmt.Sprintf("/v1/keys/%s/ids?count=%d", key, count), "")
				var b struct{ IDs []string }
				if code != 200 || json.Unmarshal([]byte(body), &b) != nil || len(b.IDs) != count {
					t.Errorf("%s: %d %s", key, code, body)
					return
				}
				mu.Lock()
				for _, id := range b.IDs {
					if seen[id] {
						t.Errorf("%s: duplicate %s", key, id)
					}
					seen[id] = true
				}
				all = append(all, b.IDs...)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return all
}

func ints(t *testing.T, ids []string) []int64 {
	t.Helper()
	out := make([]int64, len(ids))
	for i, s := range ids {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			t.Fatalf("id %q is not a positive int64", s)
		}
		out[i] = n
	}
	return out
}

// problemsOf validates keys and returns the problems by field.
func problemsOf(t *testing.T, keys map[string]server.KeyConfig, stores map[string]string, env map[string]string) map[string]server.Problem {
	t.Helper()
	reg := server.NewRegistry()
	if err := Register(reg); err != nil {
		t.Fatal(err)
	}
	cfg := &server.Config{DataDir: t.TempDir(), Stores: stores, Keys: keys}
	cfg.Override(func(n string) string { return env[n] })
	cfg.SetDefaults()
	out := map[string]server.Problem{}
	var ve *server.ValidationError
	if err := cfg.Validate(reg); errors.As(err, &ve) {
		for _, p := range ve.Problems {
			out[p.Field] = p
		}
	}
	return out
}

func wantProblems(t *testing.T, got map[string]server.Problem, fields ...string) {
	t.Helper()
	for _, f := range fields {
		if _, ok := got[f]; !ok {
			t.Errorf("no problem for %s; got %v", f, got)
		}
	}
}

// --- ticket ---

// mysqlURL turns testserver's go-sql-driver DSN (user@tcp(host:port)/db)
// into the mysql:// URL a stores: entry takes.
func mysqlURL(t *testing.T, dsn string) string {
	t.Helper()
	m := regexp.MustCompile(`^([^@]*)@tcp\(([^)]*)\)/([^?]*)(\?.*)?$`).FindStringSubmatch(dsn)
	if m == nil {
		t.Fatalf("unexpected MariaDB DSN form %q", dsn)
	}
	return "mysql://" + m[1] + "@" + m[2] + "/" + m[3] + m[4]
}

func TestTicketServesMariaDBAndPostgres(t *testing.T) {
	my1 := mysqlURL(t, testserver.Database(t, testserver.MariaDB))
	my2 := mysqlURL(t, testserver.Database(t, testserver.MariaDB))
	pg := testserver.Database(t, testserver.Postgres)
	mysqlDSN := strings.Replace(strings.TrimPrefix(my1, "mysql://"), "@", "@tcp(", 1)
	mysqlDSN = strings.Replace(mysqlDSN, "/", ")/", 1)
	_, h := serveWith(t, map[string]server.KeyConfig{
		// Two MariaDB servers by store name, N = 2.
		"flickr": {Strategy: "ticket", Options: map[string]string{"servers": "tick1, tick2"}},
		// A PostgreSQL sequence through the key's own store (N = 1),
		// with a table-free name of its own.
		"pgseq": {Strategy: "ticket", Store: "pg", Options: map[string]string{"sequence": "pgseq_tickets"}},
		// One of four servers, given inline (as a go-sql-driver DSN), the
		// others retired: offset 3.
		"lone": {Strategy: "ticket", Options: map[string]string{"servers": mysqlDSN, "step": "4", "offsets": "3", "table": "Lone64"}},
	}, setup{stores: map[string]string{"tick1": my1, "tick2": my2, "pg": pg}})

	flickr := ints(t, hammer(t, h, "flickr", 5, 10))
	residues := map[int64]int{}
	for _, id := range flickr {
		residues[id%2]++
	}
	if residues[0] == 0 || residues[1] == 0 {
		t.Errorf("both servers should serve (round-robin): residues %v", residues)
	}
	for _, id := range ints(t, hammer(t, h, "lone", 3, 5)) {
		if id%4 != 3 {
			t.Fatalf("lone: id %d outside residue 3 mod 4", id)
		}
	}
	pgIDs := ints(t, hammer(t, h, "pgseq", 500, 5))
	if len(pgIDs) != 8*5*500 {
		t.Fatalf("pgseq: %d ids", len(pgIDs))
	}
	// Contiguous within one request: PostgreSQL hands out a batch.
	if code, body := get(t, h, "GET", "/readyz", ""); code != 200 {
		t.Fatalf("readyz: %d %s", code, body)
	}
	_, metrics := get(t, h, "GET", "/metrics", "")
	if !strings.Contains(metrics, `idmint_ticket_servers_up{key="flickr",strategy="ticket"} 2`) {
		t.Errorf("metrics lack the servers up:\n%s", grepLines(metrics, "ticket"))
	}
	// The runway above the largest ID the servers gave (exact to float64's
	// 2048 near 2^63).
	var top int64
	for _, id := range flickr {
		top = max(top, id)
	}
	if head := mustSample(t, metrics, "idmint_counter_headroom", `key="flickr",strategy="ticket"`); head != float64(math.MaxInt64-top) {
		t.Errorf("ticket headroom %v after ID %d, want %v", head, top, float64(math.MaxInt64-top))
	}
}

func TestTicketChecks(t *testing.T) {
	t.Parallel()
	stores := map[string]string{"my": "mysql://root@127.0.0.1:1/x", "my2": "mysql://root@127.0.0.1:2/x", "cache": "redis://127.0.0.1:6379/0"}
	got := problemsOf(t, map[string]server.KeyConfig{
		"a": {Strategy: "ticket"}, // default store is SQLite
		"b": {Strategy: "ticket", Options: map[string]string{"servers": "my,nosuch"}},
		"c": {Strategy: "ticket", Options: map[string]string{"servers": "my,my2", "step": "1"}},
		"d": {Strategy: "ticket", Options: map[string]string{"servers": "my,my2", "offsets": "1,1"}},
		"e": {Strategy: "ticket", Options: map[string]string{"servers": "my,my2", "offsets": "1"}},
		"f": {Strategy: "ticket", Store: "my", Options: map[string]string{"table": "drop table", "stub": "ab", "conns": "0"}, Step: 10},
		"g": {Strategy: "ticket", Options: map[string]string{"servers": "my,mysql://root@127.0.0.1:1/x"}},
		"h": {Strategy: "ticket", Store: "cache"},
		"i": {Strategy: "ticket", Store: "my", Options: map[string]string{"colour": "red"}},
	}, stores, nil)
	wantProblems(t, got, "keys.a.store", "keys.b.options.servers[1]", "keys.c.options.step", "keys.d.options.offsets[1]",
		"keys.e.options.offsets", "keys.f.options.table", "keys.f.options.stub", "keys.f.options.conns", "keys.f.step",
		"keys.g.options.servers[1]", "keys.h.store", "keys.i.options.colour")
	for f := range got {
		if strings.HasPrefix(f, "keys.my") {
			t.Errorf("unexpected problem %v", got[f])
		}
	}
	ok := problemsOf(t, map[string]server.KeyConfig{
		"ok":  {Strategy: "ticket", Options: map[string]string{"servers": "my,my2", "step": "3", "offsets": "1,3"}},
		"ok2": {Strategy: "ticket", Store: "my2"},
	}, stores, nil)
	if len(ok) != 0 {
		t.Errorf("valid ticket keys reported: %v", ok)
	}
}

// A password in a ticket server URL never shows in a problem.
func TestTicketProblemsRedactPasswords(t *testing.T) {
	t.Parallel()
	got := problemsOf(t, map[string]server.KeyConfig{
		"a": {Strategy: "ticket", Options: map[string]string{"servers": "sqlite://u:hunter2@x/y"}},
	}, nil, nil)
	p, ok := got["keys.a.options.servers[0]"]
	if !ok || strings.Contains(p.String(), "hunter2") {
		t.Fatalf("problem %v", got)
	}
}

// --- redis ---

func TestRedisServes(t *testing.T) {
	addr := testserver.Addr(t, testserver.Redis)
	prefix := testserver.Prefix(t)
	dir := t.TempDir()
	keys := map[string]server.KeyConfig{
		"msg":   {Strategy: "redis", Options: map[string]string{"redis": "redis://" + addr + "/0", "counter_key": prefix + ":msg", "block": "1000"}},
		"other": {Strategy: "redis", Options: map[string]string{"redis": "cache", "counter_key": prefix + ":other"}},
		"plain": {Strategy: "redis", Options: map[string]string{"redis": addr}}, // host:port, default counter key
	}
	st := setup{dir: dir, stores: map[string]string{"cache": "redis://" + addr}}
	s, h := serveWith(t, keys, st)
	first := ints(t, hammer(t, h, "msg", 250, 10))
	// One request's values are consecutive (one INCRBY).
	for i := 0; i < len(first); i += 250 {
		for j := i + 1; j < i+250; j++ {
			if first[j] != first[j-1]+1 {
				t.Fatalf("request values not consecutive: %d then %d", first[j-1], first[j])
			}
		}
	}
	hammer(t, h, "other", 10, 2)
	hammer(t, h, "plain", 10, 2)
	if code, body := get(t, h, "GET", "/readyz", ""); code != 200 {
		t.Fatalf("readyz: %d %s", code, body)
	}
	_, metrics := get(t, h, "GET", "/metrics", "")
	if !regexp.MustCompile(`idmint_redis_counter_ceiling\{key="msg",strategy="redis"\} [1-9]`).MatchString(metrics) {
		t.Errorf("no ceiling metric:\n%s", grepLines(metrics, "redis"))
	}
	// The runway: every value up to the persisted mark is claimed, and Lua
	// counts exactly to 2^53-1 only.
	mark := mustSample(t, metrics, "idmint_redis_counter_ceiling", `key="msg",strategy="redis"`)
	if c, h := mustSample(t, metrics, "idmint_counter_ceiling", `key="msg",strategy="redis"`), mustSample(t, metrics, "idmint_counter_headroom", `key="msg",strategy="redis"`); c != 1<<53-1 || h != c-mark {
		t.Errorf("redis ceiling %v headroom %v, want 2^53-1 and %v", c, h, c-mark)
	}
	var top int64
	for _, v := range first {
		top = max(top, v)
	}
	// The marks went to the default (SQLite) store: a restart on the same
	// data directory goes on above everything issued, even though the
	// counter itself lives in Redis.
	s.Close(context.Background())
	_, h = serveWith(t, keys, st)
	for _, v := range ints(t, hammer(t, h, "msg", 10, 1)) {
		if v <= top {
			t.Fatalf("after restart: %d, not above %d", v, top)
		}
	}
}

func TestRedisChecks(t *testing.T) {
	t.Parallel()
	got := problemsOf(t, map[string]server.KeyConfig{
		"a": {Strategy: "redis"},
		"b": {Strategy: "redis", Options: map[string]string{"redis": "mysql://x/y", "block": "0", "counter_key": ""}},
		"c": {Strategy: "redis", Store: "cache", Options: map[string]string{"redis": "cache"}},
		"d": {Strategy: "redis", Step: 5, Options: map[string]string{"redis": "no-port"}},
	}, map[string]string{"cache": "redis://127.0.0.1:1/0"}, nil)
	wantProblems(t, got, "keys.a.options.redis", "keys.b.options.redis", "keys.b.options.block", "keys.b.options.counter_key",
		"keys.c.store", "keys.d.step", "keys.d.options.redis")
	if _, bad := got["keys.c.options.redis"]; bad {
		t.Errorf("a stores: name is a valid redis option: %v", got["keys.c.options.redis"])
	}
}

// --- ordernum ---

const (
	orderKey1 = "000102030405060708090a0b0c0d0e0f"
	orderKey2 = "101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f"
	orderKey3 = "303132333435363738393a3b3c3d3e3f"
)

// describeRow reads a segment row of the sqlite store serveWith made in
// dir (order-number keys show their rows on no page: that is their volume).
func describeRow(t *testing.T, dir, row string) (segment.KeyInfo, error) {
	t.Helper()
	a, err := stores.OpenAllocator(context.Background(), "sqlite://"+filepath.Join(dir, "seg.db"), segment.Options{CloseStore: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	return a.Describe(context.Background(), row)
}

// The sequence of a date format is per day, in the configured zone: the
// row is ordernum.SequenceKey's (the one the CLI uses), and a new day
// starts a new sequence.
func TestOrdernumSequencePerDay(t *testing.T) {
	t.Parallel()
	// 15:30 UTC is 23:30 in Shanghai: half an hour before its midnight.
	clk := clock.NewFake(time.Date(2025, 8, 17, 15, 30, 0, 0, time.UTC))
	const spec = "length=16,date=yyMMdd"
	dir := t.TempDir()
	_, h := serveWith(t, map[string]server.KeyConfig{
		"inv": {Strategy: "ordernum", Step: 10, Options: map[string]string{"format": spec, "key": orderKey1, "tz": "Asia/Shanghai"}},
		"utc": {Strategy: "ordernum", Step: 10, Options: map[string]string{"format": spec, "key": orderKey3}},
	}, setup{clk: clk, dir: dir})
	key, _ := ordernum.ParseKey(0, orderKey1)
	codec, err := ordernum.New(ordernum.MustParseFormat(spec), key)
	if err != nil {
		t.Fatal(err)
	}
	key3, _ := ordernum.ParseKey(0, orderKey3)
	codec3, err := ordernum.New(ordernum.MustParseFormat(spec), key3)
	if err != nil {
		t.Fatal(err)
	}
	decode := func(ids []string) (days map[string]bool, seqs []uint64) {
		t.Helper()
		c := codec
		if len(ids) > 0 && ids[0] == "utc" {
			c, ids = codec3, ids[1:]
		}
		days = map[string]bool{}
		for _, id := range ids {
			p, err := c.Decode(id)
			if err != nil {
				t.Fatalf("decode %s: %v", id, err)
			}
			days[p.Date.Format("2006-01-02")] = true
			seqs = append(seqs, p.Seq)
		}
		return days, seqs
	}
	hasRow := func(row string) bool {
		t.Helper()
		_, err := describeRow(t, dir, row)
		return err == nil
	}
	f := ordernum.MustParseFormat(spec)
	sh, _ := time.LoadLocation("Asia/Shanghai")
	before := hammer(t, h, "inv", 7, 3)
	utcBefore := hammer(t, h, "utc", 7, 1)
	// The row is SequenceRow's, in the namespace no segment key can name.
	if row, _ := ordernum.SequenceRow("inv", f, clk.Now().In(sh)); row != "ordernum/inv/20250817" || !hasRow(row) {
		t.Errorf("before midnight: row %s missing", row)
	}
	clk.Advance(time.Hour) // 00:30 on the 18th in Shanghai, still the 17th in UTC
	after := hammer(t, h, "inv", 7, 3)
	utcAfter := hammer(t, h, "utc", 7, 1)
	if row, _ := ordernum.SequenceRow("inv", f, clk.Now().In(sh)); row != "ordernum/inv/20250818" || !hasRow(row) || !hasRow("ordernum/utc/20250817") {
		t.Errorf("after midnight: row %s or ordernum/utc/20250817 missing", row)
	}
	// Neither /db nor /cache shows an order-number key: its row is its volume.
	for _, page := range []string{"/db", "/cache", "/v1/keys", "/v1/keys/inv"} {
		if _, body := get(t, h, "GET", page, ""); strings.Contains(body, "ordernum/") || strings.Contains(body, "maxId") || strings.Contains(body, "value0") {
			t.Errorf("%s shows an order-number sequence: %s", page, body)
		}
	}

	days, seqBefore := decode(before)
	if len(days) != 1 || !days["2025-08-17"] {
		t.Fatalf("before midnight in Shanghai: days %v", days)
	}
	days, seqAfter := decode(after)
	if len(days) != 1 || !days["2025-08-18"] {
		t.Fatalf("after midnight in Shanghai: days %v", days)
	}
	// The new day's sequence starts again from the bottom (capacity is per
	// day): its numbers are as small as the first day's were.
	if minOf(seqAfter) > uint64(len(after)) || minOf(seqBefore) > uint64(len(before)) {
		t.Fatalf("sequences did not start afresh: %d.. then %d..", minOf(seqBefore), minOf(seqAfter))
	}
	if days, _ := decode(append([]string{"utc"}, append(utcBefore, utcAfter...)...)); len(days) != 1 || !days["2025-08-17"] {
		t.Fatalf("UTC key: days %v", days)
	}
	// /metrics is readable by anyone who reaches the listener: it must not
	// count order numbers, or it would publish the volume they hide.
	if _, m := get(t, h, "GET", "/metrics", ""); strings.Contains(m, `idmint_ids_issued_total{key="inv"`) || strings.Contains(m, `idmint_ids_issued_total{key="utc"`) {
		t.Fatal("/metrics counts order numbers (idmint_ids_issued_total has an ordernum key)")
	}
}

func minOf(s []uint64) uint64 {
	m := s[0]
	for _, v := range s {
		m = min(m, v)
	}
	return m
}

// Key material from a file (several versions: the highest issues) and from
// the environment.
func TestOrdernumKeySources(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "order.keys")
	if err := os.WriteFile(file, []byte("# rotated\n1:"+orderKey1+"\n2:"+orderKey2+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const spec = "length=16,version"
	_, h := serveWith(t, map[string]server.KeyConfig{
		"fromfile": {Strategy: "ordernum", Options: map[string]string{"format": spec, "key_file": file}},
		"fromenv":  {Strategy: "ordernum", Options: map[string]string{"format": spec, "key_env": "ORDER_KEYS"}},
	}, setup{env: map[string]string{"ORDER_KEYS": "1:" + orderKey3}})
	keys, err := ordernum.ParseKeys("1:" + orderKey1 + ";2:" + orderKey2)
	if err != nil {
		t.Fatal(err)
	}
	codecs := map[string]*ordernum.Codec{}
	if codecs["fromfile"], err = ordernum.New(ordernum.MustParseFormat(spec), keys[0], keys[1:]...); err != nil {
		t.Fatal(err)
	}
	k3, _ := ordernum.ParseKey(1, orderKey3)
	if codecs["fromenv"], err = ordernum.New(ordernum.MustParseFormat(spec), k3); err != nil {
		t.Fatal(err)
	}
	for key, version := range map[string]int{"fromfile": 2, "fromenv": 1} {
		codec := codecs[key]
		for _, id := range hammer(t, h, key, 5, 2) {
			p, err := codec.Decode(id)
			if err != nil || p.Version != version {
				t.Fatalf("%s: %s decodes to %+v, %v; want key version %d", key, id, p, err, version)
			}
		}
	}
}

func TestOrdernumKeyChecks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	twoVersions := write("two", "1:"+orderKey1+"\n2:"+orderKey2+"\n")
	badKey := write("bad", "1:"+orderKey1[:30]+"\n")
	empty := write("empty", "# nothing yet\n")
	env := map[string]string{"NOT_VERSIONED": orderKey2}
	f := map[string]string{"format": "length=16"}
	with := func(kv ...string) map[string]string {
		o := map[string]string{}
		for k, v := range f {
			o[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			o[kv[i]] = kv[i+1]
		}
		return o
	}
	got := problemsOf(t, map[string]server.KeyConfig{
		"none":    {Strategy: "ordernum", Options: with()},
		"two":     {Strategy: "ordernum", Options: with("key_file", twoVersions, "key", orderKey1)},
		"ver":     {Strategy: "ordernum", Options: with("key_file", twoVersions, "key_version", "1")},
		"rotate":  {Strategy: "ordernum", Options: with("key_file", twoVersions)}, // two keys, no version character
		"missing": {Strategy: "ordernum", Options: with("key_file", filepath.Join(dir, "nope"))},
		"short":   {Strategy: "ordernum", Options: with("key_file", badKey)},
		"empty":   {Strategy: "ordernum", Options: with("key_file", empty)},
		"unset":   {Strategy: "ordernum", Options: with("key_env", "NO_SUCH_VAR")},
		"bare":    {Strategy: "ordernum", Options: with("key_env", "NOT_VERSIONED")},
		"tz":      {Strategy: "ordernum", Options: with("key", orderKey1, "tz", "Mars/Olympus")},
	}, nil, env)
	wantProblems(t, got, "keys.none.options.key_file", "keys.two.options.key_file", "keys.ver.options.key_version",
		"keys.rotate.options.key_file", "keys.missing.options.key_file", "keys.short.options.key_file",
		"keys.empty.options.key_file", "keys.unset.options.key_env", "keys.bare.options.key_env", "keys.tz.options.tz")
	for _, p := range got {
		s := p.String()
		for _, secret := range []string{orderKey1, orderKey2, orderKey1[:30]} {
			if strings.Contains(s, secret) {
				t.Errorf("problem prints key material: %s", s)
			}
		}
	}
}

// --- snowflake observability ---

func TestSnowflakeMetrics(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2025, 8, 17, 12, 0, 0, 0, time.UTC))
	_, h := serveWith(t, map[string]server.KeyConfig{"snowflake": {Strategy: "snowflake"}}, setup{clk: clk})
	hammer(t, h, "snowflake", 100, 2)
	_, m := get(t, h, "GET", "/metrics", "")
	for _, re := range []string{
		`idmint_snowflake_ahead_seconds\{key="snowflake",strategy="snowflake"\} 0\n`,
		`idmint_snowflake_horizon_seconds\{key="snowflake",strategy="snowflake"\} [0-9.e+]+\n`,
		`idmint_clock_rollback_total\{key="snowflake",strategy="snowflake"\} 0\n`,
	} {
		if !regexp.MustCompile(re).MatchString(m) {
			t.Errorf("no %s in\n%s", re, grepLines(m, "snowflake"))
		}
	}
	// A rollback larger than the generator waits out is refused, with
	// Retry-After, and counted.
	clk.Step(-time.Hour)
	for i := 0; i < 3; i++ {
		if code, body := get(t, h, "GET", "/v1/keys/snowflake/ids", ""); code != 503 || !strings.Contains(body, "backwards") {
			t.Fatalf("after a rollback: %d %s", code, body)
		}
	}
	_, m = get(t, h, "GET", "/metrics", "")
	if !strings.Contains(m, `idmint_clock_rollback_total{key="snowflake",strategy="snowflake"} 3`) {
		t.Errorf("rollbacks not counted:\n%s", grepLines(m, "rollback"))
	}
	clk.Step(time.Hour)
	if code, body := get(t, h, "GET", "/v1/keys/snowflake/ids", ""); code != 200 {
		t.Fatalf("after the clock caught up: %d %s", code, body)
	}
}

func grepLines(text, word string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// FuzzChecks feeds arbitrary option values to the checks of the strategies
// this file serves: they must report problems, never panic.
func FuzzChecks(f *testing.F) {
	f.Add("ticket", "servers", "a,b,mysql://x@y/z", "offsets", "1,2")
	f.Add("ticket", "step", "-1", "conns", "999")
	f.Add("redis", "redis", "redis://h:1/0", "block", "0")
	f.Add("redis", "redis", "h", "counter_key", "")
	f.Add("ordernum", "format", "length=16,date=yyMMdd", "tz", "Asia/Shanghai")
	f.Add("ordernum", "key_env", "X", "key_version", "3")
	reg := server.NewRegistry()
	if err := Register(reg); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, strategy, k1, v1, k2, v2 string) {
		st, ok := reg.Strategy(strategy)
		if !ok {
			return
		}
		cfg := &server.Config{DataDir: "/nonexistent", Stores: map[string]string{"a": "mysql://r@h:1/d", "b": "postgres://r@h:2/d", "c": "redis://h:3/0"}}
		cfg.Override(func(string) string { return v2 })
		cfg.SetDefaults()
		k := server.KeyConfig{Strategy: strategy, Store: "default", Options: map[string]string{k1: v1, k2: v2}}
		for _, p := range st.Check(k, cfg) {
			if p.Field == "" || p.Message == "" {
				t.Fatalf("problem without field or message: %+v", p)
			}
		}
	})
}

func benchServed(b *testing.B, keys map[string]server.KeyConfig, o setup, target string) {
	_, h := serveWith(b, keys, o)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := httptestRequest(target)
		for pb.Next() {
			w := newRecorder()
			h.ServeHTTP(w, r)
			if w.Code != 200 {
				b.Errorf("%d %s", w.Code, w.Body)
				return
			}
		}
	})
}

func BenchmarkOrdernumBatch1000(b *testing.B) {
	benchServed(b, map[string]server.KeyConfig{"o": {Strategy: "ordernum", Step: 100000,
		Options: map[string]string{"format": "length=16,date=yyMMdd", "key": orderKey1}}}, setup{}, "/v1/keys/o/ids?count=1000")
}

func BenchmarkRedisBatch1000(b *testing.B) {
	addr := testserver.Addr(b, testserver.Redis)
	benchServed(b, map[string]server.KeyConfig{"r": {Strategy: "redis",
		Options: map[string]string{"redis": addr, "counter_key": testserver.Prefix(b) + ":bench", "block": "1000000"}}}, setup{}, "/v1/keys/r/ids?count=1000")
}

func BenchmarkTicketPostgresBatch1000(b *testing.B) {
	pg := testserver.Database(b, testserver.Postgres)
	benchServed(b, map[string]server.KeyConfig{"t": {Strategy: "ticket", Store: "pg"}},
		setup{stores: map[string]string{"pg": pg}}, "/v1/keys/t/ids?count=1000")
}

func BenchmarkTicketMariaDBSingle(b *testing.B) {
	dsn := testserver.Database(b, testserver.MariaDB)
	benchServed(b, map[string]server.KeyConfig{"t": {Strategy: "ticket", Options: map[string]string{"servers": dsn}}},
		setup{}, "/v1/keys/t/ids")
}

func httptestRequest(target string) *http.Request {
	r := httptest.NewRequest("GET", target, nil)
	r.RemoteAddr = "127.0.0.1:1"
	return r
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }
