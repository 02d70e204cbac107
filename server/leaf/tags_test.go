package leaf

import (
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/server/internal/reqtest"
	"github.com/idmint/idmint/server/internal/servertest"
	"github.com/idmint/idmint/testkit/testserver"

	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeTable is a LeafTable over an in-memory list of rows whose issuers
// are counters.
type fakeTable struct {
	mu   sync.Mutex
	rows []string
	fail error
	n    int // listings
}

func (f *fakeTable) set(rows []string, fail error) {
	f.mu.Lock()
	f.rows, f.fail = rows, fail
	f.mu.Unlock()
}

func (f *fakeTable) Rows(ctx context.Context) ([]server.StoreRow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if f.fail != nil {
		return nil, f.fail
	}
	out := make([]server.StoreRow, len(f.rows))
	for i, r := range f.rows {
		out[i] = server.StoreRow{Key: r, MaxID: 1, Step: 1000}
	}
	return out, nil
}

func (f *fakeTable) listings() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func (f *fakeTable) Open(tag string) (server.Issuer, error) {
	c := &servertest.Counter{Name: tag}
	c.Next.Store(100)
	c.Size.Store(1000)
	return c, nil
}
func (f *fakeTable) Close(context.Context) error { return nil }

func tagsFixture(t *testing.T, tbl *fakeTable) *servertest.Fixture {
	t.Helper()
	reg, _ := servertest.Registry()
	servertest.Must(reg.Register(server.Strategy{Name: "segment", New: func(ctx context.Context, env *server.Env, name string, k server.KeyConfig) (server.Issuer, error) {
		if k.Options[server.LeafTableOption] == "true" {
			return tbl, nil
		}
		return &servertest.Counter{Name: name}, nil
	}}))
	return newFixtureReg(t, reg, nil)
}

// get asks Leaf's segment route for tag and returns status and body.
func get(f *servertest.Fixture, tag string) (int, string) {
	w := reqtest.Do(f.H, reqtest.Req{Target: "/api/segment/get/" + tag})
	return w.Code, w.Body.String()
}

func wantLeafCode(t *testing.T, f *servertest.Fixture, tag, code string) {
	t.Helper()
	st, body := get(f, tag)
	if st != 500 || !strings.Contains(body, `"message":"Result{id=`+code+`, status=EXCEPTION}"`) {
		t.Fatalf("%s: %d %s; want 500 Result{id=%s}", tag, st, body, code)
	}
}

// reloaded advances the fake clock past the next reload and waits for it.
func reloaded(t *testing.T, f *servertest.Fixture, tbl *fakeTable, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.Clk.WaitForSleepers(ctx, 1); err != nil {
		t.Fatalf("the tag reloader never waited for its next round: %v", err)
	}
	n := tbl.listings()
	f.Clk.Advance(d)
	testserver.Eventually(t, fmt.Sprintf("a reload %v after the last one", d), 10*time.Second, func() bool {
		return tbl.listings() != n && f.Clk.Sleepers() > 0
	})
}

// TestLeafTags: rows of the default store no key is configured for are
// served on Leaf's segment route, as Leaf serves every biz_tag of
// leaf_alloc; the list is reloaded every 60 s (updateCacheFromDb), adding
// new rows and dropping deleted ones.
func TestLeafTags(t *testing.T) {
	tbl := &fakeTable{rows: []string{"legacy", "order", "inv:20250817", "ordernum/inv/20250817", "_bad"}}
	f := tagsFixture(t, tbl)
	if st, body := get(f, "legacy"); st != 200 || body != "101" {
		t.Fatalf("legacy: %d %q, want 200 101 from the table's row", st, body)
	}
	if st, body := get(f, "order"); st != 200 || body != "1" {
		t.Fatalf("order: %d %q, want the configured key's 1", st, body)
	}
	// Order-number sequences and names idmint cannot serve stay hidden.
	for _, tag := range []string{"inv:20250817", "_bad", "nosuch"} {
		wantLeafCode(t, f, tag, "-2")
	}
	// /cache lists every servable tag, loaded or not, as Leaf does.
	w := reqtest.Do(f.H, reqtest.Req{Target: "/cache"})
	if !strings.Contains(w.Body.String(), `"legacy":{"key":"legacy"`) || strings.Contains(w.Body.String(), "inv:2025") {
		t.Fatalf("/cache: %s", w.Body)
	}
	// /db lists every row but order-number sequences (their max_id is
	// the order volume).
	if w := reqtest.Do(f.H, reqtest.Req{Target: "/db"}); strings.Contains(w.Body.String(), "20250817") || !strings.Contains(w.Body.String(), `"key":"legacy"`) {
		t.Fatalf("/db: %s", w.Body)
	}

	// A row added to the table is served from the next reload on.
	tbl.set([]string{"legacy", "fresh"}, nil)
	wantLeafCode(t, f, "fresh", "-2")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.Clk.WaitForSleepers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	f.Clk.Advance(59 * time.Second)
	wantLeafCode(t, f, "fresh", "-2") // 59 s: not reloaded yet
	reloaded(t, f, tbl, time.Second)
	if st, body := get(f, "fresh"); st != 200 || body != "101" {
		t.Fatalf("fresh after the reload: %d %q", st, body)
	}
	// legacy keeps its buffer across reloads.
	if st, body := get(f, "legacy"); st != 200 || body != "102" {
		t.Fatalf("legacy after the reload: %d %q, want 102", st, body)
	}

	// A table that reads empty is ignored (updateCacheFromDb returns
	// early); a deleted row stops being served.
	tbl.set(nil, nil)
	reloaded(t, f, tbl, 60*time.Second)
	if st, _ := get(f, "legacy"); st != 200 {
		t.Fatalf("legacy after an empty listing: %d", st)
	}
	tbl.set([]string{"fresh"}, nil)
	reloaded(t, f, tbl, 60*time.Second)
	wantLeafCode(t, f, "legacy", "-2")
	if st, _ := get(f, "fresh"); st != 200 {
		t.Fatalf("fresh: %d", st)
	}
}

// TestLeafTagsFirstListingFails: until the table has been listed once, an
// unconfigured tag gets Leaf's -1 (its cache is not initialised); the
// listing is retried and the tag served once it succeeds.
func TestLeafTagsFirstListingFails(t *testing.T) {
	tbl := &fakeTable{rows: []string{"legacy"}, fail: errors.New("store down")}
	f := tagsFixture(t, tbl)
	wantLeafCode(t, f, "legacy", "-1")
	if st, _ := get(f, "order"); st != 200 {
		t.Fatalf("a configured key must not wait for the table: %d", st)
	}
	tbl.set([]string{"legacy"}, nil)
	reloaded(t, f, tbl, time.Second)
	if st, body := get(f, "legacy"); st != 200 || body != "101" {
		t.Fatalf("legacy after the store came back: %d %q", st, body)
	}
}

// TestLeafTagsWithoutSegment: a registry without the segment strategy
// (tests, custom builds) answers -2 for unconfigured tags, as before.
func TestLeafTagsWithoutSegment(t *testing.T) {
	f := newFixture(t, nil)
	for i := range 3 {
		wantLeafCode(t, f, fmt.Sprint("tag", i), "-2")
	}
}

// A segment key deleted through the admin API leaves its row in the
// default store, which Leaf's tag route serves by name: the row stays the
// deleted key's, served only with one of its tokens, after a restart too
// (the digests are kept in the data directory). It used to be served to
// anyone.
func TestLeafTagsDeletedKeyKeepsTokens(t *testing.T) {
	dir := t.TempDir()
	tbl := &fakeTable{rows: []string{"legacy", "paid"}}
	start := func() *servertest.Fixture {
		reg, _ := servertest.Registry()
		servertest.Must(reg.Register(server.Strategy{Name: "segment", New: func(ctx context.Context, env *server.Env, name string, k server.KeyConfig) (server.Issuer, error) {
			if k.Options[server.LeafTableOption] == "true" {
				return tbl, nil
			}
			return &servertest.Counter{Name: name}, nil
		}}))
		return servertest.NewReg(t, reg, nil, func(c *server.Config) { c.DataDir = dir }, New)
	}
	f := start()
	ctx := context.Background()
	if _, err := f.S.CreateKey(ctx, "paid", server.KeyConfig{Strategy: "segment", Tokens: []string{servertest.KeyToken}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.S.CreateKey(ctx, "open", server.KeyConfig{Strategy: "segment"}); err != nil {
		t.Fatal(err)
	}
	reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Target: "/api/segment/get/paid"}), 401, server.CodeUnauthorized, "Authorization")
	for _, name := range []string{"paid", "open"} {
		if err := f.S.DeleteKey(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	check := func(f *servertest.Fixture, when string) {
		t.Helper()
		reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Target: "/api/segment/get/paid"}), 401, server.CodeUnauthorized, "Authorization")
		reqtest.WantError(t, reqtest.Do(f.H, reqtest.Req{Target: "/api/segment/get/paid/", Hdr: reqtest.Bearer("wrong-token-0123456789")}), 403, server.CodeForbidden, "Authorization")
		if w := reqtest.Do(f.H, reqtest.Req{Target: "/api/segment/get/paid", Hdr: reqtest.Bearer(servertest.KeyToken)}); w.Code != 200 {
			t.Fatalf("%s: the row with the deleted key's token: %d %s", when, w.Code, w.Body)
		}
		if st, body := get(f, "legacy"); st != 200 {
			t.Fatalf("%s: legacy: %d %s", when, st, body)
		}
		wantLeafCode(t, f, "open", "-2") // no row: Leaf's answer, tokens or not
	}
	check(f, "after the delete")
	f.S.Close(ctx)
	check(start(), "after a restart")
}
