package witness

import (
	"bytes"
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
// A failed write leaves nothing behind. Before each append the File knows
// the log's length; when the write fails (a full disk, an I/O error) the
// part written is cut away, and when an fsync fails every claim it covered
// fails, the log is cut back to its last fsync'd length and their marks go
// back in memory: a retry writes its line again, and no later line is
// glued to a part of one. When the cut itself fails, or the directory
// cannot be synced after a rewrite, every call fails with ErrBroken until
// the same step, tried again at each call, succeeds.
//
// A log whose last line was torn by a crash loses that line only (its claim
// had not returned). Any other unreadable line makes OpenFile fail with
// ErrCorrupt naming the line: the marks are not guessed.
type File struct {
	dir  string
	lock *os.File
	ops  fileOps

	mu      sync.Mutex
	marks   map[string]int64
	f       logFile             // nil only while broken by a failed open
	size    int64               // bytes in the log: every line appended
	durable int64               // bytes of the log known to be on disk (fsync'd)
	lines   int                 // lines in the log
	queue   []*pending          // lines appended since the last fsync, in order
	last    map[string]*pending // a space's latest line in queue
	broken  *breakage           // non-nil: the log is not in a known state
	closed  bool

	syncMu sync.Mutex // one fsync at a time; taken before mu, never after
}

// ErrBroken: a File's log could not be put back in a known state after a
// failed write (the cut back failed, or the directory did not sync after
// a rewrite). Every call fails with it until the step that failed,
// tried again at each call, succeeds.
var ErrBroken = errors.New("witness: file: log not in a known state")

// pending is a claim's line appended but not yet fsync'd.
type pending struct {
	space string
	prev  int64 // the space's mark before the line
	done  bool  // fsync'd (err nil), or failed and its raise undone
	err   error
}

// breakage says why a File is broken and what heals it.
type breakage struct {
	err error // what failed
	cut int64 // >= 0: reopen the log and cut it back to this length
	dir bool  // sync the directory (a rewrite's rename)
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
	w := &File{dir: dir, lock: lock, ops: ops, marks: map[string]int64{}, last: map[string]*pending{}}
	if err := w.load(); err != nil {
		lock.Close()
		return nil, err
	}
	if err := w.compactLocked(); err != nil {
		if w.f != nil {
			w.f.Close()
		}
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
// for appending; every queued line is then durable. The caller holds mu
// (or is OpenFile). Until the rename the old log is untouched, and a
// failure leaves the queued lines to their fsync; after it, the new log is
// the one written to, and when it cannot be opened or the directory
// cannot be synced (the rename may not survive a crash) the queued claims
// fail and the File is broken until both succeed.
func (w *File) compactLocked() error {
	var buf bytes.Buffer
	for s, v := range w.marks {
		fmt.Fprintf(&buf, "%s %d\n", url.QueryEscape(s), v)
	}
	tmp := w.path() + ".tmp"
	f, err := w.ops.open(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err == nil {
		_, err = f.Write(buf.Bytes())
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp, w.path())
		}
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("witness: file: rewrite %s: %w", w.path(), err)
	}
	if w.f != nil {
		w.f.Close() // the old log, unlinked by the rename
	}
	size := int64(buf.Len())
	w.size, w.durable, w.lines = size, size, len(w.marks)
	nf, oerr := w.ops.open(w.path(), os.O_WRONLY|os.O_APPEND)
	if oerr != nil {
		nf = nil
	}
	w.f = nf
	derr := w.ops.syncDir(w.dir)
	if oerr == nil && derr == nil {
		w.settleLocked(len(w.queue), nil)
		return nil
	}
	err = fmt.Errorf("witness: file: rewrite %s: %w", w.path(), errors.Join(oerr, derr))
	w.dropLocked(err)
	cut := int64(-1)
	if oerr != nil {
		cut = size
	}
	w.breakLocked(breakage{err: err, cut: cut, dir: derr != nil})
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// usableLocked returns nil when the log is in a known state, healing it
// first when it was broken. The caller holds mu.
func (w *File) usableLocked() error {
	if w.closed {
		return ErrClosed
	}
	b := w.broken
	if b == nil {
		return nil
	}
	if b.cut >= 0 {
		f, err := w.ops.open(w.path(), os.O_WRONLY|os.O_APPEND)
		if err == nil {
			if err = f.Truncate(b.cut); err != nil {
				f.Close()
			}
		}
		if err != nil {
			return fmt.Errorf("%w: %v; tried again: %v", ErrBroken, b.err, err)
		}
		if w.f != nil {
			w.f.Close()
		}
		w.f, w.size = f, b.cut
		b.cut = -1
	}
	if b.dir {
		if err := w.ops.syncDir(w.dir); err != nil {
			return fmt.Errorf("%w: %v; tried again: %v", ErrBroken, b.err, err)
		}
		b.dir = false
	}
	w.broken = nil
	return nil
}

// breakLocked records that the log needs b's steps before any other call.
func (w *File) breakLocked(b breakage) {
	if w.broken == nil {
		w.broken = &b
		return
	}
	o := w.broken
	o.err = b.err
	if b.cut >= 0 && (o.cut < 0 || b.cut < o.cut) {
		o.cut = b.cut
	}
	o.dir = o.dir || b.dir
}

// cutLocked cuts the log back to size after a failed write or fsync
// (cause); when it cannot, the File is broken until it can.
func (w *File) cutLocked(size int64, cause error) {
	err := errors.New("the log is not open")
	if w.f != nil {
		err = w.f.Truncate(size)
	}
	if err != nil {
		w.breakLocked(breakage{cut: size, err: fmt.Errorf("%v; then cut %s back to %d bytes: %w", cause, w.path(), size, err)})
		return
	}
	w.size = size
}

// settleLocked marks the first n queued lines durable (err nil) or failed.
func (w *File) settleLocked(n int, err error) {
	for _, p := range w.queue[:n] {
		p.done, p.err = true, err
		if w.last[p.space] == p {
			delete(w.last, p.space)
		}
	}
	w.queue = append(w.queue[:0:0], w.queue[n:]...)
}

// dropLocked fails every queued line with err and puts the marks they
// raised back, latest first.
func (w *File) dropLocked(err error) {
	for i := len(w.queue) - 1; i >= 0; i-- {
		p := w.queue[i]
		if p.prev == 0 {
			delete(w.marks, p.space)
		} else {
			w.marks[p.space] = p.prev
		}
	}
	w.lines -= len(w.queue)
	w.settleLocked(len(w.queue), err)
}

// Mark returns the space's mark from memory: the File is the only writer
// of its directory.
func (w *File) Mark(ctx context.Context, space string) (int64, error) {
	if err := ValidateSpace(space); err != nil {
		return 0, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usableLocked(); err != nil {
		return 0, err
	}
	return w.marks[space], nil
}

// Claim appends the new mark and returns once it is fsync'd.
func (w *File) Claim(ctx context.Context, space string, from, to int64) (int64, bool, error) {
	if err := checkClaim(space, from, to); err != nil {
		return 0, false, err
	}
	w.mu.Lock()
	if err := w.usableLocked(); err != nil {
		w.mu.Unlock()
		return 0, false, err
	}
	m := w.marks[space]
	if m > from {
		w.mu.Unlock()
		return m, false, nil
	}
	if m == to {
		// Already there: durable, or waiting for the fsync of the line
		// that raised it (and failing with it).
		p := w.last[space]
		w.mu.Unlock()
		if p != nil {
			if err := w.await(p); err != nil {
				return 0, false, err
			}
		}
		return to, true, nil
	}
	n, err := w.f.Write([]byte(url.QueryEscape(space) + " " + strconv.FormatInt(to, 10) + "\n"))
	if err != nil {
		// Perhaps part of the line is written: cut it away, so that the
		// next line starts a line of its own.
		err = fmt.Errorf("witness: file: append to %s: %w", w.path(), err)
		w.cutLocked(w.size, err)
		w.mu.Unlock()
		return 0, false, err
	}
	// Raised in memory before it is durable: a concurrent claim below it
	// is refused (a gap at worst), and this one returns only after fsync,
	// or undoes the raise if the fsync fails.
	p := &pending{space: space, prev: m}
	w.size += int64(n)
	w.marks[space] = to
	w.queue = append(w.queue, p)
	w.last[space] = p
	w.lines++
	if w.lines > 8*len(w.marks)+4096 {
		// A failure settles p or leaves it to its fsync.
		_ = w.compactLocked()
	}
	w.mu.Unlock()
	if err := w.await(p); err != nil {
		return 0, false, err
	}
	return to, true, nil
}

// await returns once p's line is durable, fsyncing every line queued so
// far if nobody has; when that fsync fails, every queued line fails with
// it (those appended while it ran too): the log is cut back to its last
// durable length and their raises undone.
func (w *File) await(p *pending) error {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	w.mu.Lock()
	if p.done || w.closed || w.f == nil {
		err := p.err
		if !p.done {
			err = fmt.Errorf("%w: %s before its line was fsync'd", ErrClosed, w.path())
		}
		w.mu.Unlock()
		return err
	}
	f, n, end := w.f, len(w.queue), w.size
	w.mu.Unlock()
	err := f.Sync()
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case p.done: // a rewrite made it durable, or failed it, meanwhile
		return p.err
	case err == nil:
		w.durable = end
		w.settleLocked(n, nil)
		return nil
	case w.closed:
		return fmt.Errorf("%w: %s before its line was fsync'd", ErrClosed, w.path())
	}
	// Whether the lines reached the disk is unknown (after a failed fsync
	// Linux may drop the dirty pages and report the next fsync clean).
	err = fmt.Errorf("witness: file: fsync %s: %w", w.path(), err)
	w.dropLocked(err)
	w.cutLocked(w.durable, err)
	return p.err
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
	var err error
	if w.f != nil {
		err = w.f.Close()
	}
	if lerr := w.lock.Close(); err == nil {
		err = lerr
	}
	return err
}
