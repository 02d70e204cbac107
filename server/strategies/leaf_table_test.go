package strategies

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/segment/sqlstore"
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/testkit/testserver"
)

func leafGet(h http.Handler, path string) (int, string) {
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.RemoteAddr, r.Host = "127.0.0.1:4000", "127.0.0.1:8080"
	h.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// TestLeafTableSQLite: a row that exists only in the default store's
// leaf_alloc is served on Leaf's route from its max_id on, shows on /cache
// with its first segment in slot 0 and on /db; a row deleted from the
// table is never created again (that would restart it at max_id 1).
func TestLeafTableSQLite(t *testing.T) {
	dir := t.TempDir()
	url := "sqlite://" + filepath.Join(dir, "seg.db")
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Create(ctx, segment.KeyInfo{Key: "legacy", MaxID: 5000, Step: 100}); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Now())
	_, h := serveWith(t, map[string]server.KeyConfig{}, setup{dir: dir, clk: clk, stores: map[string]string{"default": url}})
	for want := 5000; want < 5003; want++ {
		if code, body := leafGet(h, "/api/segment/get/legacy"); code != 200 || body != strconv.Itoa(want) {
			t.Fatalf("legacy: %d %q, want 200 %d", code, body, want)
		}
	}
	if _, body := leafGet(h, "/cache"); !strings.Contains(body, `"legacy":{"key":"legacy","value0":5003,"step0":100,"max0":5100,`) || !strings.Contains(body, `"pos":0`) {
		t.Fatalf("/cache: %s; want legacy's first segment [5000,5100) in slot 0", body)
	}
	if _, body := leafGet(h, "/db"); !strings.Contains(body, `"key":"legacy","maxId":5100,"step":100`) {
		t.Fatalf("/db: %s", body)
	}
	if err := st.Delete(ctx, "legacy"); err != nil {
		t.Fatal(err)
	}
	for range 200 { // past the buffered segments: the next load finds no row
		leafGet(h, "/api/segment/get/legacy")
	}
	if _, err := st.Get(ctx, "legacy"); !errors.Is(err, segment.ErrUnknownKey) {
		t.Fatalf("the deleted row came back: %v", err)
	}
}

// leafDDL is Leaf's scripts/leaf_alloc.sql (Meituan-Dianping/Leaf).
const leafDDL = "CREATE TABLE `leaf_alloc` (" +
	"`biz_tag` varchar(128) NOT NULL DEFAULT ''," +
	"`max_id` bigint(20) NOT NULL DEFAULT '1'," +
	"`step` int(11) NOT NULL," +
	"`description` varchar(256) DEFAULT NULL," +
	"`update_time` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP," +
	"PRIMARY KEY (`biz_tag`)) ENGINE=InnoDB"

// leafAllocate is one segment as a Leaf node takes it: IDAllocDaoImpl.
// updateMaxIdAndGetLeafAlloc runs IDAllocMapper.updateMaxId and
// getLeafAlloc in one transaction; SegmentIDGenImpl.updateSegmentFromDb
// serves [max_id - step, max_id).
func leafAllocate(db *sql.DB, tag string) (lo, hi int64, err error) {
	tx, err := db.Begin()
	if err != nil {
		return 0, 0, err
	}
	defer tx.Rollback()
	if _, err := tx.Exec("UPDATE leaf_alloc SET max_id = max_id + step WHERE biz_tag = ?", tag); err != nil {
		return 0, 0, err
	}
	var maxID, step int64
	if err := tx.QueryRow("SELECT max_id, step FROM leaf_alloc WHERE biz_tag = ?", tag).Scan(&maxID, &step); err != nil {
		return 0, 0, err
	}
	return maxID - step, maxID, tx.Commit()
}

// TestLeafMigration is the README's migration from Leaf: idmint pointed at
// a Leaf deployment's leaf_alloc (Leaf's own DDL and example row, on
// MariaDB) and ZooKeeper tree (/snowflake/{leaf.name}/forever/
// {ip:port}-{seq}), serving while a Leaf node keeps serving the same tags:
// no ID repeats, on the segment or the snowflake route.
func TestLeafMigration(t *testing.T) {
	dsn := testserver.Database(t, testserver.MariaDB)
	zkAddr := testserver.Addr(t, testserver.ZooKeeper)
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{leafDDL,
		"INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES ('leaf-segment-test', 1, 2000, 'Test leaf Segment Mode Get Id')"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	// Leaf's ZooKeeper tree with one running Leaf node.
	conn, _, err := zk.Connect([]string{zkAddr}, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	root := "/" + testserver.Prefix(t) + "/snowflake/com.sankuai.leaf.opensource.test"
	parts := strings.Split(strings.TrimPrefix(root+"/forever", "/"), "/")
	for i := range parts {
		if _, err := conn.Create("/"+strings.Join(parts[:i+1], "/"), nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	p, err := conn.Create(root+"/forever/10.0.0.1:8080-", []byte(fmt.Sprintf(`{"ip":"10.0.0.1","port":"8080","timestamp":%d}`, time.Now().UnixMilli())), zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	leafWorker, _ := strconv.ParseInt(p[len(p)-10:], 10, 64)

	reg := server.NewRegistry()
	if err := Register(reg); err != nil {
		t.Fatal(err)
	}
	cfg := &server.Config{DataDir: t.TempDir(), Coordinator: "zk://" + zkAddr + root + "?endpoint=10.0.0.2:8080",
		Stores: map[string]string{"default": mysqlURL(t, dsn)},
		Keys:   map[string]server.KeyConfig{"snowflake": {Strategy: "snowflake", Layout: "leaf"}}}
	cfg.SetDefaults()
	s, err := server.New(context.Background(), server.Options{Config: cfg, Registry: reg, Surfaces: surfaces, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	h := s.Handler()

	// Side by side: idmint serves the tag while the Leaf node leases
	// segments of it with Leaf's own SQL.
	seen := map[int64]string{}
	var mu sync.Mutex
	add := func(id int64, who string) {
		mu.Lock()
		defer mu.Unlock()
		if prev, dup := seen[id]; dup {
			t.Errorf("ID %d issued by %s and %s", id, prev, who)
		}
		seen[id] = who
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 5 {
			lo, hi, err := leafAllocate(db, "leaf-segment-test")
			if err != nil {
				t.Errorf("Leaf's allocation: %v", err)
				return
			}
			for id := lo; id < hi; id++ {
				add(id, "Leaf")
			}
		}
	}()
	for range 6000 {
		code, body := leafGet(h, "/api/segment/get/leaf-segment-test")
		id, err := strconv.ParseInt(body, 10, 64)
		if code != 200 || err != nil {
			t.Fatalf("idmint: %d %q", code, body)
		}
		add(id, "idmint")
	}
	wg.Wait()

	// Snowflake: idmint's node got a worker ID of its own from Leaf's
	// tree, so its IDs and the Leaf node's (same layout, other worker)
	// cannot meet; a Leaf client decodes them with Leaf's formula.
	for range 2000 {
		code, body := leafGet(h, "/api/snowflake/get/leaf-segment-test")
		id, err := strconv.ParseInt(body, 10, 64)
		if code != 200 || err != nil {
			t.Fatalf("idmint snowflake: %d %q", code, body)
		}
		if w := (id >> 12) & 0x3ff; w == leafWorker {
			t.Fatalf("idmint issued under the Leaf node's worker ID %d", w)
		}
		if ms := (id >> 22) + 1288834974657; time.Since(time.UnixMilli(ms)).Abs() > time.Minute {
			t.Fatalf("ID %d decodes with Leaf's epoch to %v", id, time.UnixMilli(ms))
		}
		add(id, "idmint snowflake")
	}
}
