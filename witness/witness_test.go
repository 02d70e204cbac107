package witness_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idmint/idmint/testkit/testserver"
	"github.com/idmint/idmint/witness"
)

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// backends opens every witness the suite has a server for; each open is
// fresh (its own directory, database, prefix or root).
func backends() map[string]func(t testing.TB) witness.Witness {
	open := func(t testing.TB, u string) witness.Witness {
		w, err := witness.Open(ctx(t), u, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		return w
	}
	return map[string]func(t testing.TB) witness.Witness{
		"file":   func(t testing.TB) witness.Witness { return open(t, "file://"+t.TempDir()) },
		"sqlite": func(t testing.TB) witness.Witness { return open(t, "sqlite://"+filepath.Join(t.TempDir(), "w.db")) },
		"postgres": func(t testing.TB) witness.Witness {
			return open(t, testserver.Database(t, testserver.Postgres))
		},
		"mariadb": func(t testing.TB) witness.Witness {
			return open(t, "mysql://"+testserver.Database(t, testserver.MariaDB))
		},
		"etcd": func(t testing.TB) witness.Witness {
			return open(t, "etcd://"+testserver.Addr(t, testserver.Etcd)+"/idmint?name="+testserver.Prefix(t))
		},
		"zookeeper": func(t testing.TB) witness.Witness {
			return open(t, "zk://"+testserver.Addr(t, testserver.ZooKeeper)+"/"+testserver.Prefix(t)+"/snowflake/app")
		},
	}
}

// TestContract runs the same checks against every backend.
func TestContract(t *testing.T) {
	for name, open := range backends() {
		t.Run(name, func(t *testing.T) {
			t.Run("claims", func(t *testing.T) { testClaims(t, open(t)) })
			t.Run("concurrent", func(t *testing.T) { testConcurrent(t, open(t)) })
			t.Run("bad input", func(t *testing.T) { testBadInput(t, open(t)) })
		})
	}
}

func testClaims(t *testing.T, w witness.Witness) {
	c := ctx(t)
	const sp = "segment/order"
	if m, err := w.Mark(c, sp); err != nil || m != 0 {
		t.Fatalf("fresh mark = %d, %v; want 0", m, err)
	}
	if m, ok, err := w.Claim(c, sp, 1, 1001); err != nil || !ok || m != 1001 {
		t.Fatalf("first claim = %d %v %v", m, ok, err)
	}
	// A segment below the mark (the store went back) is refused, and the
	// refusal reports the mark.
	if m, ok, err := w.Claim(c, sp, 1, 1001); err != nil || ok || m != 1001 {
		t.Fatalf("repeated claim = %d %v %v; want refused at 1001", m, ok, err)
	}
	if m, ok, err := w.Claim(c, sp, 500, 1500); err != nil || ok || m != 1001 {
		t.Fatalf("overlapping claim = %d %v %v; want refused at 1001", m, ok, err)
	}
	if m, ok, err := w.Claim(c, sp, 1001, 2001); err != nil || !ok || m != 2001 {
		t.Fatalf("next claim = %d %v %v", m, ok, err)
	}
	// A gap is fine.
	if m, ok, err := w.Claim(c, sp, 5000, 6000); err != nil || !ok || m != 6000 {
		t.Fatalf("claim past a gap = %d %v %v", m, ok, err)
	}
	if m, err := witness.Raise(c, w, sp, 100); err != nil || m != 6000 {
		t.Fatalf("Raise below the mark = %d, %v; want 6000 unchanged", m, err)
	}
	if m, err := witness.Raise(c, w, sp, 7000); err != nil || m != 7000 {
		t.Fatalf("Raise = %d, %v; want 7000", m, err)
	}
	if m, err := w.Mark(c, sp); err != nil || m != 7000 {
		t.Fatalf("mark = %d, %v; want 7000", m, err)
	}
	// Spaces are independent, and names with slashes and spaces work.
	other := "ticket/in voice/ü"
	if m, ok, err := w.Claim(c, other, 0, 10); err != nil || !ok || m != 10 {
		t.Fatalf("other space claim = %d %v %v", m, ok, err)
	}
	if m, _ := w.Mark(c, sp); m != 7000 {
		t.Fatalf("mark of %s moved to %d", sp, m)
	}
}

// testConcurrent has 8 claimers race for segments handed out by a store
// that hands some out twice; the witness must let through only disjoint
// ones.
func testConcurrent(t *testing.T, w witness.Witness) {
	c := ctx(t)
	const sp = "segment/race"
	type seg struct{ s, e int64 }
	var mu sync.Mutex
	var served []seg
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				// Every claimer tries the same segments: as if the store
				// forgot every allocation.
				s := int64(i) * 100
				_ = g
				_, ok, err := w.Claim(c, sp, s, s+100)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					mu.Lock()
					served = append(served, seg{s, s + 100})
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	sort.Slice(served, func(i, j int) bool { return served[i].s < served[j].s })
	for i := 1; i < len(served); i++ {
		if served[i].s < served[i-1].e {
			t.Fatalf("segments %v and %v both served", served[i-1], served[i])
		}
	}
	if len(served) == 0 {
		t.Fatal("no claim succeeded")
	}
}

func testBadInput(t *testing.T, w witness.Witness) {
	c := ctx(t)
	for _, tc := range []struct {
		space    string
		from, to int64
		want     error
	}{
		{"", 0, 1, witness.ErrBadSpace},
		{"a\nb", 0, 1, witness.ErrBadSpace},
		{string(make([]byte, 300)), 0, 1, witness.ErrBadSpace},
		{"down", 10, 5, witness.ErrBadClaim},
		{"neg", -1, 5, witness.ErrBadClaim},
	} {
		if _, _, err := w.Claim(c, tc.space, tc.from, tc.to); !errors.Is(err, tc.want) {
			t.Errorf("Claim(%q, %d, %d) = %v; want %v", tc.space, tc.from, tc.to, err, tc.want)
		}
	}
	if m, err := w.Mark(c, "down"); err != nil || m != 0 {
		t.Errorf("a refused claim changed the mark: %d, %v", m, err)
	}
}

func TestFileSurvivesReopenAndTornLine(t *testing.T) {
	dir := t.TempDir()
	c := ctx(t)
	w, err := witness.OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := w.Claim(c, "k", 0, 1000); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, err := witness.OpenFile(dir); err == nil {
		t.Fatal("a second OpenFile on a locked directory succeeded")
	}
	w.Close()
	// A crash in the middle of an append leaves a torn last line: dropped.
	f, _ := os.OpenFile(filepath.Join(dir, witness.FileName), os.O_APPEND|os.O_WRONLY, 0)
	fmt.Fprint(f, "k 99999")
	f.Close()
	w, err = witness.OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := w.Mark(c, "k"); m != 1000 {
		t.Fatalf("mark after reopen = %d; want 1000", m)
	}
	if _, ok, _ := w.Claim(c, "k", 500, 600); ok {
		t.Fatal("claim below the reopened mark succeeded")
	}
	w.Close()
	// A corrupt line that is not the last refuses to open.
	os.WriteFile(filepath.Join(dir, witness.FileName), []byte("k 1000\nk x\nk 2000\n"), 0o600)
	if _, err := witness.OpenFile(dir); !errors.Is(err, witness.ErrCorrupt) {
		t.Fatalf("corrupt log: %v; want ErrCorrupt", err)
	}
}

func TestFileCompacts(t *testing.T) {
	dir := t.TempDir()
	c := ctx(t)
	w, err := witness.OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(6000) {
		if _, ok, err := w.Claim(c, "k", i, i+1); !ok || err != nil {
			t.Fatal(i, ok, err)
		}
	}
	data, _ := os.ReadFile(filepath.Join(dir, witness.FileName))
	if n := strings.Count(string(data), "\n"); n >= 5000 {
		t.Fatalf("log holds %d lines after 6000 raises of one space: not compacted", n)
	}
	w.Close()
	w, err = witness.OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if m, _ := w.Mark(c, "k"); m != 6000 {
		t.Fatalf("mark after compaction = %d; want 6000", m)
	}
}

func TestMulti(t *testing.T) {
	c := ctx(t)
	a, _ := witness.OpenFile(t.TempDir())
	b, _ := witness.OpenFile(t.TempDir())
	m := witness.Multi{a, b}
	defer m.Close()
	if _, ok, err := m.Claim(c, "k", 0, 100); !ok || err != nil {
		t.Fatal(ok, err)
	}
	// b alone forgets (a restored snapshot): a still refuses.
	b2, _ := witness.OpenFile(t.TempDir())
	m2 := witness.Multi{a, b2}
	if v, ok, _ := m2.Claim(c, "k", 0, 100); ok || v != 100 {
		t.Fatalf("claim over a forgotten witness = %d %v; want refused at 100", v, ok)
	}
	if v, _ := m2.Mark(c, "k"); v != 100 {
		t.Fatalf("Multi mark = %d; want the largest, 100", v)
	}
	// Raise to a target the largest member already holds still raises the
	// member that forgot.
	if v, err := witness.Raise(c, m2, "k", 50); err != nil || v != 100 {
		t.Fatalf("Raise(50) over marks 100 and 0 = %d, %v; want 100", v, err)
	}
	if v, _ := b2.Mark(c, "k"); v != 100 {
		t.Fatalf("the forgetful member's mark after Raise = %d; want 100", v)
	}
}

// BenchmarkClaim is one claim (a segment's, a ceiling's) on each backend
// the suite has a server for: what a segment load or a ceiling raise adds.
func BenchmarkClaim(b *testing.B) {
	for name, open := range backends() {
		b.Run(name, func(b *testing.B) {
			w := open(b)
			c := context.Background()
			var m int64
			for b.Loop() {
				if _, ok, err := w.Claim(c, "segment/bench", m, m+1000); err != nil || !ok {
					b.Fatal(ok, err)
				}
				m += 1000
			}
		})
	}
}
