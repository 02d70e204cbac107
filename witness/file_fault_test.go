package witness_test

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idmint/idmint/witness"
)

// disk is a data directory that fails on purpose: writes past a budget of
// bytes (a full disk: the bytes before it are written, the rest refused),
// fsyncs, truncates, and the directory's fsync.
type disk struct {
	mu        sync.Mutex
	budget    int // bytes left before writes fail; <0: no limit
	syncErrs  int // the next n file fsyncs fail
	truncErr  bool
	dirErr    bool
	syncGate  chan struct{} // non-nil: a file fsync waits for it to close
	syncIn    chan struct{} // non-nil: told when a file fsync waits at the gate
	wrote     chan struct{} // non-nil: told of every write
	truncates int
	flaky     *rand.Rand // non-nil: a write or fsync fails one time in four
}

func newDisk() *disk { return &disk{budget: -1} }

func (d *disk) set(f func(d *disk)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f(d)
}

func (d *disk) ops() witness.Ops {
	return witness.Ops{
		Open: func(name string, flag int) (witness.LogFile, error) {
			f, err := witness.RealOpen(name, flag)
			if err != nil {
				return nil, err
			}
			return &faultyLog{LogFile: f, d: d, name: name}, nil
		},
		SyncDir: func(dir string) error {
			d.mu.Lock()
			fail := d.dirErr
			d.mu.Unlock()
			if fail {
				return &fs.PathError{Op: "fsync", Path: dir, Err: syscall.EIO}
			}
			f, err := os.Open(dir)
			if err != nil {
				return err
			}
			defer f.Close()
			return f.Sync()
		},
	}
}

type faultyLog struct {
	witness.LogFile
	d    *disk
	name string
}

func (l *faultyLog) Write(p []byte) (int, error) {
	l.d.mu.Lock()
	if l.d.wrote != nil {
		l.d.wrote <- struct{}{}
	}
	b := l.d.budget
	if l.d.flaky != nil && l.d.flaky.IntN(4) == 0 {
		b = l.d.flaky.IntN(len(p))
	} else if b >= 0 && len(p) > b {
		l.d.budget = 0 // full: later writes fail too
	}
	if b >= 0 && len(p) > b {
		l.d.mu.Unlock()
		n, _ := l.LogFile.Write(p[:b])
		return n, &fs.PathError{Op: "write", Path: l.name, Err: syscall.ENOSPC}
	}
	if b >= 0 {
		l.d.budget -= len(p)
	}
	l.d.mu.Unlock()
	return l.LogFile.Write(p)
}

func (l *faultyLog) Sync() error {
	l.d.mu.Lock()
	gate, in := l.d.syncGate, l.d.syncIn
	l.d.mu.Unlock()
	if gate != nil {
		if in != nil {
			in <- struct{}{}
		}
		<-gate
	}
	l.d.mu.Lock()
	fail := l.d.syncErrs > 0 || (l.d.flaky != nil && l.d.flaky.IntN(4) == 0)
	if l.d.syncErrs > 0 {
		l.d.syncErrs--
	}
	l.d.mu.Unlock()
	if fail {
		return &fs.PathError{Op: "fsync", Path: l.name, Err: syscall.EIO}
	}
	return l.LogFile.Sync()
}

func (l *faultyLog) Truncate(size int64) error {
	l.d.mu.Lock()
	l.d.truncates++
	fail := l.d.truncErr
	l.d.mu.Unlock()
	if fail {
		return &fs.PathError{Op: "truncate", Path: l.name, Err: syscall.EIO}
	}
	return l.LogFile.Truncate(size)
}

func openFaulty(t *testing.T, dir string, d *disk) *witness.File {
	t.Helper()
	w, err := witness.OpenFileOps(dir, d.ops())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// reopen closes w and opens its directory again, as a restart does, and
// returns the marks of the spaces asked for.
func reopen(t *testing.T, w *witness.File, dir string, spaces ...string) map[string]int64 {
	t.Helper()
	w.Close()
	r, err := witness.OpenFile(dir)
	if err != nil {
		t.Fatalf("reopen after the faults: %v (the log needs a hand edit)", err)
	}
	defer r.Close()
	out := map[string]int64{}
	for _, sp := range spaces {
		m, err := r.Mark(ctx(t), sp)
		if err != nil {
			t.Fatal(err)
		}
		out[sp] = m
	}
	return out
}

func logText(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, witness.FileName))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestFileAppendFailsHalfWay: the disk fills in the middle of a claim's
// line. The claim fails, the part written is cut away (a later line is
// never glued to it), the mark stays where it was in memory, and a retry
// once there is room writes the line whole: after a restart every
// acknowledged mark is there and the log opens without a hand edit.
func TestFileAppendFailsHalfWay(t *testing.T) {
	dir := t.TempDir()
	d := newDisk()
	w := openFaulty(t, dir, d)
	c := ctx(t)
	if _, ok, err := w.Claim(c, "k", 0, 1000); !ok || err != nil {
		t.Fatal(ok, err)
	}
	before := logText(t, dir)
	d.set(func(d *disk) { d.budget = 3 }) // "k 2" of "k 2000\n"
	if _, ok, err := w.Claim(c, "k", 1000, 2000); err == nil || ok {
		t.Fatalf("claim on a full disk = %v, %v; want an error", ok, err)
	} else if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("claim on a full disk: %v; want the ENOSPC it met", err)
	}
	if got := logText(t, dir); got != before {
		t.Fatalf("log after the failed append = %q; want %q (nothing of the failed line)", got, before)
	}
	if m, err := w.Mark(c, "k"); err != nil || m != 1000 {
		t.Fatalf("mark after the failed claim = %d, %v; want 1000 (the raise undone)", m, err)
	}
	d.set(func(d *disk) { d.budget = -1 })
	if _, ok, err := w.Claim(c, "other", 0, 7); !ok || err != nil {
		t.Fatalf("claim of another space after room came back = %v, %v", ok, err)
	}
	if _, ok, err := w.Claim(c, "k", 1000, 2000); !ok || err != nil {
		t.Fatalf("retry once there is room = %v, %v", ok, err)
	}
	if got := reopen(t, w, dir, "k", "other"); got["k"] != 2000 || got["other"] != 7 {
		t.Fatalf("marks after a restart = %v; want k 2000, other 7", got)
	}
}

// TestFileRetryAfterFailedClaim: a claim whose append failed is retried
// while the disk is still full. The retry must fail too: answering ok
// because the mark is "already there" in memory would acknowledge a mark
// that is on no disk.
func TestFileRetryAfterFailedClaim(t *testing.T) {
	dir := t.TempDir()
	d := newDisk()
	w := openFaulty(t, dir, d)
	c := ctx(t)
	d.set(func(d *disk) { d.budget = 0 })
	for i := range 3 {
		if m, ok, err := w.Claim(c, "k", 0, 500); err == nil {
			t.Fatalf("claim %d on a full disk = %d, %v, nil; want an error", i+1, m, ok)
		}
	}
	if _, err := witness.Raise(c, w, "k", 500); err == nil {
		t.Fatal("Raise on a full disk succeeded")
	}
	if got := reopen(t, w, dir, "k"); got["k"] != 0 {
		t.Fatalf("mark after a restart = %d; want 0 (no claim succeeded)", got["k"])
	}
}

// TestFileFsyncFails: a failed fsync fails the claim, its line is cut
// away, the raise is undone; a retry that fsyncs is acknowledged.
func TestFileFsyncFails(t *testing.T) {
	dir := t.TempDir()
	d := newDisk()
	w := openFaulty(t, dir, d)
	c := ctx(t)
	if _, ok, err := w.Claim(c, "k", 0, 10); !ok || err != nil {
		t.Fatal(ok, err)
	}
	before := logText(t, dir)
	d.set(func(d *disk) { d.syncErrs = 1 })
	if _, ok, err := w.Claim(c, "k", 10, 20); err == nil || ok || !errors.Is(err, syscall.EIO) {
		t.Fatalf("claim whose fsync failed = %v, %v; want the EIO", ok, err)
	}
	if got := logText(t, dir); got != before {
		t.Errorf("log after the failed fsync = %q; want %q", got, before)
	}
	if m, _ := w.Mark(c, "k"); m != 10 {
		t.Errorf("mark after the failed fsync = %d; want 10", m)
	}
	if _, ok, err := w.Claim(c, "k", 10, 20); !ok || err != nil {
		t.Fatalf("retry = %v, %v", ok, err)
	}
	if got := reopen(t, w, dir, "k"); got["k"] != 20 {
		t.Fatalf("mark after a restart = %d; want 20", got["k"])
	}
}

// TestFileFsyncFailsItsGroup: claims that share one fsync (group commit)
// all fail when it fails, including those appended while it ran: their
// lines are cut away with it, and no raise survives in memory.
func TestFileFsyncFailsItsGroup(t *testing.T) {
	dir := t.TempDir()
	d := newDisk()
	w := openFaulty(t, dir, d)
	c := ctx(t)
	if _, ok, err := w.Claim(c, "base", 0, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	before := logText(t, dir)
	gate, in := make(chan struct{}), make(chan struct{}, 1)
	wrote := make(chan struct{}, 16)
	d.set(func(d *disk) { d.syncGate, d.syncIn, d.syncErrs, d.wrote = gate, in, 1, wrote })
	spaces := []string{"a", "b", "c", "d"}
	errs := make(chan error, len(spaces))
	claim := func(sp string) {
		_, ok, err := w.Claim(c, sp, 0, 100)
		if err == nil && ok {
			errs <- errors.New(sp + ": acknowledged")
			return
		}
		errs <- err
	}
	go claim(spaces[0])
	select {
	case <-in:
	case <-time.After(time.Minute):
		t.Fatal("the first claim never reached its fsync")
	}
	for _, sp := range spaces[1:] {
		go claim(sp)
	}
	for i := range spaces {
		select {
		case <-wrote:
		case <-time.After(time.Minute):
			t.Fatalf("%d of %d claims appended within a minute", i, len(spaces))
		}
	}
	d.set(func(d *disk) { d.syncGate, d.syncIn = nil, nil })
	close(gate)
	for range spaces {
		select {
		case err := <-errs:
			if err == nil || !errors.Is(err, syscall.EIO) {
				t.Errorf("a claim of the failed group: %v; want the fsync's EIO", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("a claim of the group did not return within a minute")
		}
	}
	for _, sp := range spaces {
		if m, _ := w.Mark(c, sp); m != 0 {
			t.Errorf("mark of %s after its group's fsync failed = %d; want 0", sp, m)
		}
	}
	if got := logText(t, dir); got != before {
		t.Errorf("log after the group's fsync failed = %q; want %q", got, before)
	}
	if _, ok, err := w.Claim(c, "b", 0, 100); !ok || err != nil {
		t.Fatalf("retry = %v, %v", ok, err)
	}
	if got := reopen(t, w, dir, "a", "b", "base"); got["a"] != 0 || got["b"] != 100 || got["base"] != 1 {
		t.Fatalf("marks after a restart = %v; want a 0, b 100, base 1", got)
	}
}

// TestFileCutBackFailsThenHeals: the failed line cannot be cut away (the
// truncate fails too). Every later call fails, naming why, until the cut
// succeeds; then the File serves again without a restart, and the log
// opens after one without a hand edit.
func TestFileCutBackFailsThenHeals(t *testing.T) {
	dir := t.TempDir()
	d := newDisk()
	w := openFaulty(t, dir, d)
	c := ctx(t)
	if _, ok, err := w.Claim(c, "k", 0, 10); !ok || err != nil {
		t.Fatal(ok, err)
	}
	d.set(func(d *disk) { d.budget, d.truncErr = 2, true })
	if _, _, err := w.Claim(c, "k", 10, 20); err == nil {
		t.Fatal("claim on a full disk succeeded")
	}
	d.set(func(d *disk) { d.budget = -1 }) // room again, but still no truncate
	for i := range 2 {
		if _, ok, err := w.Claim(c, "other", 0, 5); err == nil || ok {
			t.Fatalf("claim %d while the partial line is still there = %v, %v; want an error", i+1, ok, err)
		} else if !strings.Contains(err.Error(), "cut") {
			t.Errorf("claim while broken: %q; want it to say the log could not be cut back", err)
		}
		if _, err := w.Mark(c, "k"); err == nil {
			t.Fatal("Mark while the partial line is still there succeeded")
		}
	}
	d.set(func(d *disk) { d.truncErr = false })
	if m, err := w.Mark(c, "k"); err != nil || m != 10 {
		t.Fatalf("Mark once the cut works = %d, %v; want 10", m, err)
	}
	if _, ok, err := w.Claim(c, "k", 10, 20); !ok || err != nil {
		t.Fatalf("retry once healed = %v, %v", ok, err)
	}
	if _, ok, err := w.Claim(c, "other", 0, 5); !ok || err != nil {
		t.Fatalf("claim of another space once healed = %v, %v", ok, err)
	}
	if got := reopen(t, w, dir, "k", "other"); got["k"] != 20 || got["other"] != 5 {
		t.Fatalf("marks after a restart = %v; want k 20, other 5", got)
	}
}

// TestFileDirSyncFails: the log's rewrite renames a new file over the old
// one; when the directory's fsync fails, the rename may not survive a
// crash. The claim that triggered it fails, and so does every call until
// the directory syncs; then claims go on, into the new file, and a
// restart finds every acknowledged mark.
func TestFileDirSyncFails(t *testing.T) {
	dir := t.TempDir()
	d := newDisk()
	if _, err := witness.OpenFileOps(dir, func() witness.Ops {
		o := d.ops()
		o.SyncDir = func(string) error { return &fs.PathError{Op: "fsync", Path: dir, Err: syscall.EIO} }
		return o
	}()); err == nil || !errors.Is(err, syscall.EIO) {
		t.Fatalf("OpenFile whose directory fsync fails: %v; want the EIO", err)
	}
	w := openFaulty(t, dir, d)
	c := ctx(t)
	d.set(func(d *disk) { d.dirErr = true })
	var failed int64 = -1
	for i := range int64(6000) {
		_, ok, err := w.Claim(c, "k", i, i+1)
		if err != nil {
			if !errors.Is(err, syscall.EIO) {
				t.Fatalf("claim %d: %v; want the directory fsync's EIO", i, err)
			}
			failed = i
			break
		}
		if !ok {
			t.Fatalf("claim %d refused", i)
		}
	}
	if failed < 0 {
		t.Fatal("6000 claims of one space never rewrote the log")
	}
	if _, ok, err := w.Claim(c, "k", failed, failed+1); err == nil || ok {
		t.Fatalf("retry while the directory does not sync = %v, %v; want an error", ok, err)
	}
	if _, err := w.Mark(c, "k"); err == nil {
		t.Fatal("Mark while the directory does not sync succeeded")
	}
	d.set(func(d *disk) { d.dirErr = false })
	for i := failed; i < failed+10; i++ {
		if _, ok, err := w.Claim(c, "k", i, i+1); !ok || err != nil {
			t.Fatalf("claim %d once the directory syncs = %v, %v", i, ok, err)
		}
	}
	if got := reopen(t, w, dir, "k"); got["k"] != failed+10 {
		t.Fatalf("mark after a restart = %d; want %d", got["k"], failed+10)
	}
}

// TestFileFlakyDisk: eight claimers raise four spaces while one write or
// fsync in four fails (a write part-way). Every claim acknowledged is in
// the log after a restart, and the log opens without a hand edit.
func TestFileFlakyDisk(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	dir := t.TempDir()
	d := newDisk()
	w := openFaulty(t, dir, d)
	d.set(func(d *disk) { d.flaky = rand.New(rand.NewPCG(uint64(seed), 0)) })
	c := ctx(t)
	spaces := []string{"a", "b", "c", "d"}
	var mu sync.Mutex
	acked := map[string]int64{}
	failed := 0
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			sp := spaces[g%len(spaces)]
			for range 300 {
				m, err := w.Mark(c, sp)
				if err != nil {
					t.Errorf("Mark: %v", err) // truncates never fail here: never broken
					return
				}
				_, ok, err := w.Claim(c, sp, m, m+10)
				mu.Lock()
				if err != nil {
					failed++
				} else if ok {
					acked[sp] = max(acked[sp], m+10)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	d.set(func(d *disk) { d.flaky = nil })
	got := reopen(t, w, dir, spaces...)
	for _, sp := range spaces {
		if got[sp] < acked[sp] {
			t.Errorf("space %s: mark %d after a restart; a claim to %d was acknowledged", sp, got[sp], acked[sp])
		}
	}
	if failed == 0 {
		t.Error("no claim failed: the disk was not flaky")
	}
	t.Logf("acknowledged %v, %d claims failed, after a restart %v", acked, failed, got)
}
