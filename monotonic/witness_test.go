package monotonic

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idmint/idmint/testkit/testserver"
	"github.com/idmint/idmint/witness"
)

// memWitness is a Witness in memory; fail makes every call fail.
type memWitness struct {
	mu    sync.Mutex
	marks map[string]int64
	fail  error
}

func (m *memWitness) Mark(_ context.Context, space string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return 0, m.fail
	}
	return m.marks[space], nil
}

func (m *memWitness) Claim(_ context.Context, space string, from, to int64) (int64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return 0, false, m.fail
	}
	if m.marks == nil {
		m.marks = map[string]int64{}
	}
	if v := m.marks[space]; v > from {
		return v, false, nil
	}
	m.marks[space] = to
	return to, true, nil
}

func (m *memWitness) down(err error) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fail != nil && errors.Is(err, m.fail)
}

func (m *memWitness) set(fail error) { m.mu.Lock(); m.fail = fail; m.mu.Unlock() }

func (m *memWitness) mark(space string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.marks[space]
}

// take draws n single values from src and returns them.
func take(t *testing.T, src Source, n int) []int64 {
	t.Helper()
	out := make([]int64, n)
	for i := range out {
		v, err := src.Next(ctxT(t), 1)
		if err != nil {
			t.Fatalf("Next %d: %v", i, err)
		}
		out[i] = v
	}
	return out
}

func lastOf(vs []int64) int64 { return vs[len(vs)-1] }

// logBuffer is a Logger writing to a buffer safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *logBuffer) String() string       { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }
func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

const startedAbove = "monotonic: source starts above a bound known elsewhere"

// TestMonotonicFileWitnessRecordsEveryBound: each bound the File writes is
// in the witness before a value up to it is returned.
func TestMonotonicFileWitnessRecordsEveryBound(t *testing.T) {
	w := &memWitness{}
	f, err := OpenFile(FileConfig{Path: filepath.Join(t.TempDir(), "b"), Window: 10, Witness: w, Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := 0; i < 95; i++ {
		v, err := f.Next(ctxT(t), 1)
		if err != nil {
			t.Fatal(err)
		}
		if m := w.mark("monotonic/k"); m < v {
			t.Fatalf("value %d returned while the witness's mark is %d", v, m)
		}
	}
	if _, bound := f.Bounds(); w.mark("monotonic/k") < bound {
		t.Fatalf("witness mark %d below the file's bound %d", w.mark("monotonic/k"), bound)
	}
}

// TestMonotonicFileStartsAboveWitness: a bound file that forgot (deleted,
// or an older copy restored) does not make the key issue again: the File
// starts above the witness's mark, and says so.
func TestMonotonicFileStartsAboveWitness(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "monotonic-k.bound")
	w := &memWitness{}
	f, err := OpenFile(FileConfig{Path: path, Window: 10, Witness: w, Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	before := take(t, f, 25)
	f.Close()
	if f.WentBack() {
		t.Error("a new key's first open (no file, no mark) reported its bound file gone back")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	var log logBuffer
	g, err := OpenFile(FileConfig{Path: path, Window: 10, Witness: w, Name: "k", Logger: log.logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if v := take(t, g, 1)[0]; v <= lastOf(before) {
		t.Fatalf("after the bound file was lost the key issued %d again (had issued up to %d)", v, lastOf(before))
	}
	if s := log.String(); !strings.Contains(s, startedAbove) || !strings.Contains(s, "key=k") {
		t.Fatalf("no INFO line naming the key for a start moved up by the witness:\n%s", s)
	}
	if !g.WentBack() {
		t.Error("a bound file deleted below the witness's mark: WentBack false")
	}
	g.Close()
	// Reopened with its file intact (the file and the mark agree): no
	// going back.
	h, err := OpenFile(FileConfig{Path: path, Window: 10, Witness: w, Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if h.WentBack() {
		t.Error("a bound file at the witness's mark reported gone back")
	}
}

// TestMonotonicFileWitnessFailureRefuses: a witness that fails makes the
// new bound unusable: no value above the old bound is returned, and the
// File serves again once the witness answers. One that fails at open fails
// OpenFile.
func TestMonotonicFileWitnessFailureRefuses(t *testing.T) {
	w := &memWitness{}
	down := errors.New("witness down")
	path := filepath.Join(t.TempDir(), "b")
	f, err := OpenFile(FileConfig{Path: path, Window: 10, Witness: w, Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := take(t, f, 10)
	w.set(down)
	served := refusedDown(t, f, w, lastOf(got))
	w.set(nil)
	if v := take(t, f, 1)[0]; v <= served {
		t.Fatalf("after the witness came back: %d after %d", v, served)
	}
	w.set(down)
	if _, err := OpenFile(FileConfig{Path: path, Witness: w, Name: "k"}); !errors.Is(err, down) {
		t.Fatalf("OpenFile with the witness down: %v", err)
	}
	if _, err := OpenFile(FileConfig{Path: path, Witness: w}); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("OpenFile with a witness and neither space nor name: %v", err)
	}
}

// refusedDown draws from src with w failing: every value served is at or
// below the witness's mark, and within 100 draws one is refused with the
// witness's error. It returns the last value served.
func refusedDown(t *testing.T, src Source, w *memWitness, last int64) int64 {
	t.Helper()
	for i := 0; i < 100; i++ {
		v, err := src.Next(ctxT(t), 1)
		if err != nil {
			if !w.down(err) {
				t.Fatalf("Next with the witness down: %v, want its error", err)
			}
			return last
		}
		if m := w.mark("monotonic/k"); v > m {
			t.Fatalf("value %d served above the witness's mark %d while it failed", v, m)
		}
		last = v
	}
	t.Fatal("100 values served with the witness down: no bound write failed")
	return 0
}

func etcdForWitness(t *testing.T) (addr, prefix string) {
	t.Helper()
	return testserver.Addr(t, testserver.Etcd), "/" + testserver.Prefix(t) + "/"
}

// leadAndTake starts a one-node Etcd source, waits for it to lead, draws n
// values and closes it.
func leadAndTake(t *testing.T, addr, prefix string, cfg EtcdConfig, n int) ([]int64, Status) {
	t.Helper()
	nd := startNode(t, addr, prefix, cfg)
	leaderOf(t, []*node{nd}, 15*time.Second)
	vs := take(t, nd.src, n)
	st := nd.src.Status()
	nd.src.Close()
	return vs, st
}

// TestMonotonicEtcdStartsAboveFileSource: a key served from a bound file in
// a data directory, then (the node joined a cluster) from etcd on an empty
// prefix, with the data directory's witness: the first etcd value is above
// every file value. Without a witness the legacy bound file, given as the
// Floor, does the same.
func TestMonotonicEtcdStartsAboveFileSource(t *testing.T) {
	addr, parent := etcdForWitness(t)
	dir := t.TempDir()
	w, err := witness.OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	path := filepath.Join(dir, "monotonic-k.bound")
	f, err := OpenFile(FileConfig{Path: path, Witness: w, Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	fileVals := take(t, f, 5)
	f.Close()
	if lastOf(fileVals) != 5 {
		t.Fatalf("file values %v", fileVals)
	}
	var log logBuffer
	etcdVals, st := leadAndTake(t, addr, parent+"k/", EtcdConfig{Witness: w, Logger: log.logger()}, 3)
	if st.WentBack != 1 {
		t.Errorf("an empty etcd prefix below the witness's mark: WentBack %d, want 1", st.WentBack)
	}
	if etcdVals[0] <= lastOf(fileVals) {
		t.Fatalf("the key moved from its bound file to etcd and answered %v again (the file answered %v)", etcdVals, fileVals)
	}
	if s := log.String(); !strings.Contains(s, startedAbove) || !strings.Contains(s, "known_bound=") {
		t.Fatalf("no INFO line for a start moved up by the witness:\n%s", s)
	}
	// The floor alone: no witness, the bound file read as the legacy floor.
	floor, err := ReadBoundFile(path)
	if err != nil || floor < lastOf(fileVals) {
		t.Fatalf("ReadBoundFile = %d, %v", floor, err)
	}
	vs, st := leadAndTake(t, addr, parent+"floor/", EtcdConfig{Floor: floor}, 1)
	if vs[0] <= floor {
		t.Fatalf("floor %d: first etcd value %d", floor, vs[0])
	}
	if st.WentBack != 0 {
		t.Errorf("a start above the floor alone counted as a source that went back: WentBack %d", st.WentBack)
	}
	if v, err := ReadBoundFile(filepath.Join(dir, "none")); v != 0 || err != nil {
		t.Fatalf("ReadBoundFile of no file = %d, %v", v, err)
	}
}

// TestMonotonicEtcdPrefixChangeAboveWitness: values under prefix A, then a
// source of the same key under prefix B (options.etcd or the coordinator's
// name changed) with the same witness: above them all. The timestamp form
// too.
func TestMonotonicEtcdPrefixChangeAboveWitness(t *testing.T) {
	addr, parent := etcdForWitness(t)
	for _, form := range []Form{Counter, Timestamp} {
		w := &memWitness{}
		a, _ := leadAndTake(t, addr, parent+form.String()+"/a/", EtcdConfig{Witness: w, Form: form, Window: 1000, TimeWindow: time.Hour}, 20)
		b, _ := leadAndTake(t, addr, parent+form.String()+"/b/", EtcdConfig{Witness: w, Form: form}, 1)
		if b[0] <= lastOf(a) {
			t.Fatalf("%v: prefix B answered %d after prefix A answered up to %d", form, b[0], lastOf(a))
		}
		if m := w.mark("monotonic/k"); m < b[0] {
			t.Fatalf("%v: witness mark %d below the served %d", form, m, b[0])
		}
	}
}

// TestMonotonicEtcdRestoredSnapshotAboveWitness: between two leaderships
// the bound in etcd goes back (deleted, as after a restore from a snapshot
// taken before the key existed, or lowered, as after an older one); the
// next leader still starts above everything served.
func TestMonotonicEtcdRestoredSnapshotAboveWitness(t *testing.T) {
	addr, parent := etcdForWitness(t)
	cli := etcdClient(t, addr)
	for _, lower := range []bool{false, true} {
		prefix := parent + map[bool]string{false: "deleted/", true: "lowered/"}[lower]
		w := &memWitness{}
		var served int64
		for term := 0; term < 3; term++ {
			vs, st := leadAndTake(t, addr, prefix, EtcdConfig{Witness: w, Window: 10}, 25)
			if vs[0] <= served {
				t.Fatalf("lowered=%v term %d: first value %d, but %d was served before", lower, term, vs[0], served)
			}
			// The first term finds etcd and the witness agreeing; every
			// later one finds the bound gone back.
			if want := int64(min(term, 1)); st.WentBack != want {
				t.Fatalf("lowered=%v term %d: WentBack %d, want %d", lower, term, st.WentBack, want)
			}
			served = lastOf(vs)
			var err error
			if lower {
				_, err = cli.Put(ctxT(t), prefix+"bound", "3")
			} else {
				_, err = cli.Delete(ctxT(t), prefix+"bound")
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestMonotonicEtcdWitnessFailureRefuses: with the witness down a leader
// serves nothing above a bound the witness does not hold, and a new leader
// does not start until it can read the witness.
func TestMonotonicEtcdWitnessFailureRefuses(t *testing.T) {
	addr, prefix := etcdForWitness(t)
	w := &memWitness{}
	nd := startNode(t, addr, prefix, EtcdConfig{Witness: w, Window: 10})
	leaderOf(t, []*node{nd}, 15*time.Second)
	served := lastOf(take(t, nd.src, 3))
	down := errors.New("witness down")
	w.set(down)
	served = refusedDown(t, nd.src, w, served)
	nd.src.Close()
	var log logBuffer
	nd2 := startNode(t, addr, prefix, EtcdConfig{Witness: w, Window: 10, Logger: log.logger()})
	testserver.Eventually(t, "a campaign refused for the witness", 15*time.Second, func() bool {
		return strings.Contains(log.String(), "witness down")
	})
	if st := nd2.src.Status(); st.Failovers != 0 || st.Leader {
		t.Fatalf("a node led with its witness down: %+v\n%s", st, log.String())
	}
	w.set(nil)
	leaderOf(t, []*node{nd2}, 15*time.Second)
	if v := take(t, nd2.src, 1)[0]; v <= served {
		t.Fatalf("first value %d of the next leader, after %d was served", v, served)
	}
}
