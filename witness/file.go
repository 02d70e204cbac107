package witness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// FileName is the log a File witness keeps in its directory, and LockName
// the file it holds an exclusive flock on while open.
const (
	FileName = "marks.log"
	LockName = "marks.lock"
)

// File keeps marks in one append-only log in a directory (a node's data
// directory): one line "space mark" per raise, the largest per space wins.
// Every change is fsync'd before Claim returns; concurrent claims share one
// fsync (group commit), so a node starting thousands of keys pays for a
// few. The directory is locked (flock) for as long as the File is open: a
// second process on the same directory fails to open it. The log is
// rewritten compactly when it holds many more lines than spaces.
//
// A log whose last line was torn by a crash loses that line only (its claim
// had not returned). Any other unreadable line makes OpenFile fail with
// ErrCorrupt naming the line: the marks are not guessed.
type File struct {
	dir  string
	lock *os.File
	ops  fileOps

	mu     sync.Mutex
	marks  map[string]int64
	f      logFile
	lines  int    // lines in the log
	wrote  uint64 // lines appended so far (sequence)
	closed bool

	syncMu sync.Mutex    // one fsync at a time; taken before mu, never after
	synced atomic.Uint64 // appended lines known durable
}

// logFile is what the File writes its log through: an *os.File, or a
// double that fails on purpose in the package's tests.
type logFile interface {
	Write(p []byte) (int, error)
	Sync() error
	Truncate(size int64) error
	Close() error
}

// fileOps opens the log's files and syncs its directory.
type fileOps struct {
	open    func(name string, flag int) (logFile, error)
	syncDir func(dir string) error
}

var osOps = fileOps{
	open: func(name string, flag int) (logFile, error) {
		f, err := os.OpenFile(name, flag, 0o600)
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		return f, nil
	},
	syncDir: syncDir,
}

// OpenFile opens (creating if needed) the File witness in dir.
func OpenFile(dir string) (*File, error) { return openFile(dir, osOps) }

func openFile(dir string, ops fileOps) (*File, error) {
	if dir == "" {
		return nil, fmt.Errorf("witness: file: directory is empty")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("witness: file: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, LockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("witness: file: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("witness: file: %s is in use by another process (flock: %v): one process per data directory", dir, err)
	}
	w := &File{dir: dir, lock: lock, ops: ops, marks: map[string]int64{}}
	if err := w.load(); err != nil {
		lock.Close()
		return nil, err
	}
	if err := w.compactLocked(); err != nil {
		lock.Close()
		return nil, err
	}
	return w, nil
}

func (w *File) path() string { return filepath.Join(w.dir, FileName) }

// load reads the log into marks.
func (w *File) load() error {
	f, err := os.Open(w.path())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("witness: file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("witness: file: read %s: %w", w.path(), err)
	}
	// The part after the last newline is a torn line (a claim that never
	// returned) or nothing: it is dropped.
	lines := strings.Split(string(data), "\n")
	for i, ln := range lines[:len(lines)-1] {
		space, v, err := parseLine(ln)
		if err != nil {
			return fmt.Errorf("%w: %s line %d: %v", ErrCorrupt, w.path(), i+1, err)
		}
		w.marks[space] = max(w.marks[space], v)
		w.lines++
	}
	return nil
}

func parseLine(ln string) (string, int64, error) {
	sp, val, ok := strings.Cut(ln, " ")
	if !ok {
		return "", 0, fmt.Errorf("%q is not \"space mark\"", ln)
	}
	space, err := url.QueryUnescape(sp)
	if err != nil {
		return "", 0, fmt.Errorf("space %q: %v", sp, err)
	}
	v, err := strconv.ParseInt(val, 10, 64)
	if err != nil || v < 0 {
		return "", 0, fmt.Errorf("mark %q is not a non-negative integer", val)
	}
	return space, v, nil
}

// compactLocked rewrites the log with one line per space and reopens it
// for appending. The caller holds mu (or is OpenFile).
func (w *File) compactLocked() error {
	tmp := w.path() + ".tmp"
	f, err := w.ops.open(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return fmt.Errorf("witness: file: %w", err)
	}
	bw := bufio.NewWriter(f)
	for s, v := range w.marks {
		fmt.Fprintf(bw, "%s %d\n", url.QueryEscape(s), v)
	}
	if err := bw.Flush(); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, w.path())
	}
	if err == nil {
		err = w.ops.syncDir(w.dir)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("witness: file: rewrite %s: %w", w.path(), err)
	}
	nf, err := w.ops.open(w.path(), os.O_WRONLY|os.O_APPEND)
	if err != nil {
		return fmt.Errorf("witness: file: %w", err)
	}
	if w.f != nil {
		w.f.Close()
	}
	w.f = nf
	w.lines = len(w.marks)
	storeMax(&w.synced, w.wrote) // everything appended so far is in the rewritten file, fsync'd
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Mark returns the space's mark from memory: the File is the only writer
// of its directory.
func (w *File) Mark(ctx context.Context, space string) (int64, error) {
	if err := ValidateSpace(space); err != nil {
		return 0, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, ErrClosed
	}
	return w.marks[space], nil
}

// Claim appends the new mark and returns once it is fsync'd.
func (w *File) Claim(ctx context.Context, space string, from, to int64) (int64, bool, error) {
	if err := checkClaim(space, from, to); err != nil {
		return 0, false, err
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return 0, false, ErrClosed
	}
	if m := w.marks[space]; m > from {
		w.mu.Unlock()
		return m, false, nil
	}
	if w.marks[space] == to {
		// Already there (perhaps not yet durable: wait for its fsync).
		seq := w.wrote
		w.mu.Unlock()
		return to, true, w.syncUpTo(seq)
	}
	// Raised in memory before it is durable: a concurrent claim below it
	// is refused (a gap at worst), and this one returns only after fsync.
	w.marks[space] = to
	if _, err := fmt.Fprintf(w.f, "%s %d\n", url.QueryEscape(space), to); err != nil {
		w.mu.Unlock()
		return 0, false, fmt.Errorf("witness: file: append %s: %w", w.path(), err)
	}
	w.wrote++
	w.lines++
	seq := w.wrote
	if w.lines > 8*len(w.marks)+4096 {
		err := w.compactLocked()
		w.mu.Unlock()
		if err != nil {
			return 0, false, err
		}
		return to, true, nil
	}
	w.mu.Unlock()
	if err := w.syncUpTo(seq); err != nil {
		return 0, false, err
	}
	return to, true, nil
}

// syncUpTo returns once line seq is durable, fsyncing if nobody has.
func (w *File) syncUpTo(seq uint64) error {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	if w.synced.Load() >= seq {
		return nil
	}
	w.mu.Lock()
	f, upto := w.f, w.wrote
	w.mu.Unlock()
	if err := f.Sync(); err != nil {
		if w.synced.Load() >= seq {
			return nil // a compaction replaced f and made the line durable
		}
		return fmt.Errorf("witness: file: fsync %s: %w", w.path(), err)
	}
	storeMax(&w.synced, upto)
	return nil
}

func storeMax(a *atomic.Uint64, v uint64) {
	for {
		old := a.Load()
		if old >= v || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// String names the directory.
func (w *File) String() string { return "data directory " + w.dir }

// Close closes the log and drops the lock.
func (w *File) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	err := w.f.Close()
	if lerr := w.lock.Close(); err == nil {
		err = lerr
	}
	return err
}
