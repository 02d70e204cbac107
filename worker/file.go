package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// fileState is the on-disk record of the file assigner, one JSON object.
type fileState struct {
	WorkerID   int64     `json:"worker_id"`
	Generation int64     `json:"generation"`
	Holder     string    `json:"holder"`
	Since      time.Time `json:"since"`
	Horizon    time.Time `json:"horizon"` // highest time the holder may have stamped
}

// fileAssigner keeps the worker ID and its horizon in one file, like Leaf's
// local workerID.properties cache but with the horizon beside the ID. An
// exclusive flock on path+".lock" keeps a second process on the same
// machine from sharing it.
type fileAssigner struct {
	s      settings
	path   string
	initID int64

	mu   sync.Mutex
	lock *os.File // non-nil while a lease is open
}

// NewFile returns an Assigner that keeps its worker ID in the file at path
// (created with its directory on first use, holding initialID), reuses it on
// every restart and records the horizon in the same file, fsync'd before
// Extend returns. Acquire fails with ErrHeld while another process (or
// another lease in this one) holds the file, and with a *RangeError when
// the stored ID does not fit the layout.
func NewFile(path string, initialID int64, opts ...Option) (Assigner, error) {
	s, err := newSettings(opts)
	if err != nil {
		return nil, err
	}
	if path == "" {
		return nil, fmt.Errorf("%w: file path is empty (file:///var/lib/idmint/worker)", ErrBadURL)
	}
	if initialID < 0 {
		return nil, fmt.Errorf("%w: file initial id %d is negative", ErrBadURL, initialID)
	}
	return &fileAssigner{s: s, path: filepath.Clean(path), initID: initialID}, nil
}

func (f *fileAssigner) Acquire(ctx context.Context, max int64) (*Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lock != nil {
		return nil, fmt.Errorf("%w: %s is already leased in this process", ErrHeld, f.path)
	}
	lk, st, err := claimFile(f.path, f.s, func(st *fileState, fresh bool) error {
		if fresh {
			st.WorkerID = f.initID
		}
		return checkRange(st.WorkerID, max, "file "+f.path)
	})
	if err != nil {
		return nil, err
	}
	f.lock = lk
	return newLease(f.s, st.WorkerID, st.Generation, st.Horizon, &fileBackend{path: f.path, st: st, unlock: f.unlock}, 0, false), nil
}

// unlock drops the file lock of the open lease.
func (f *fileAssigner) unlock() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lock == nil {
		return nil
	}
	err := f.lock.Close()
	f.lock = nil
	return err
}

// claimFile locks path+".lock" (ErrHeld when another process holds it),
// reads the state at path (fresh when there is none yet), lets adjust set
// or check the worker ID, and writes the state back, durably, with the next
// generation and this holder. It returns the held lock and the state
// written.
func claimFile(path string, s settings, adjust func(st *fileState, fresh bool) error) (*os.File, fileState, error) {
	var st fileState
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, st, fmt.Errorf("worker: file: %w", err)
	}
	lk, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, st, fmt.Errorf("worker: file: %w", err)
	}
	if err := syscall.Flock(int(lk.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lk.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, st, fmt.Errorf("%w: %s is locked by another process", ErrHeld, path)
		}
		return nil, st, fmt.Errorf("worker: file: lock %s: %w", path, err)
	}
	st, err = readFileState(path)
	fresh := errors.Is(err, fs.ErrNotExist)
	if fresh {
		st, err = fileState{}, nil
	}
	if err == nil {
		err = adjust(&st, fresh)
	}
	if err != nil {
		lk.Close()
		return nil, st, err
	}
	st.Generation++
	st.Holder = s.holder
	st.Since = s.clock.Now()
	if err := writeFileState(path, st); err != nil {
		lk.Close()
		return nil, st, err
	}
	return lk, st, nil
}

func (f *fileAssigner) List(ctx context.Context) ([]Holder, error) {
	f.mu.Lock()
	here := f.lock != nil
	f.mu.Unlock()
	h, ok, err := listFile(f.path, here)
	if !ok || err != nil {
		return nil, err
	}
	return []Holder{h}, nil
}

// listFile describes the state at path; ok is false when there is none.
// heldHere says whether this process holds its lock.
func listFile(path string, heldHere bool) (h Holder, ok bool, err error) {
	st, err := readFileState(path)
	if errors.Is(err, fs.ErrNotExist) {
		return h, false, nil
	}
	if err != nil {
		return h, false, err
	}
	live := heldHere
	if !live {
		if lk, err := os.OpenFile(path+".lock", os.O_RDWR, 0); err == nil {
			live = syscall.Flock(int(lk.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil
			lk.Close() // closing drops a lock we took just to test
		}
	}
	return Holder{ID: st.WorkerID, Generation: st.Generation, Holder: st.Holder, Since: st.Since, Horizon: st.Horizon, Live: live}, true, nil
}

func (f *fileAssigner) Close() error { return nil }

// fileBackend records a lease's horizon in a state file (the file
// assigner's, or the horizon file of a static, ip or mac assigner).
type fileBackend struct {
	path   string
	unlock func() error // drops the file lock; called once, by release
	mu     sync.Mutex
	st     fileState
}

func (b *fileBackend) keepalive(context.Context) error { return nil }

func (b *fileBackend) store(_ context.Context, until time.Time) (time.Time, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.st
	st.Horizon = until.UTC()
	if err := writeFileState(b.path, st); err != nil {
		return time.Time{}, err
	}
	b.st = st
	return st.Horizon, nil
}

func (b *fileBackend) lower(ctx context.Context, last time.Time) (time.Time, error) {
	return b.store(ctx, last) // store writes exactly what it is given
}

func (b *fileBackend) release(context.Context) error { return b.unlock() }

// fileFields are the fields a state file must hold: without the worker ID
// it would silently become worker 0, without the generation fencing would
// restart, and without the horizon a restart with the clock set back could
// repeat IDs the previous holder stamped.
var fileFields = []string{"worker_id", "generation", "horizon"}

func readFileState(path string) (fileState, error) {
	var st fileState
	data, err := os.ReadFile(path)
	if err != nil {
		return st, err
	}
	var fields map[string]json.RawMessage
	if err = json.Unmarshal(data, &fields); err == nil {
		err = json.Unmarshal(data, &st)
	}
	if err != nil {
		return st, fmt.Errorf("worker: file %s is corrupt (%v); it holds the worker id and horizon, restore it or remove it to start afresh", path, err)
	}
	for _, k := range fileFields {
		if v, ok := fields[k]; !ok || len(v) == 0 || string(v) == "null" {
			return st, fmt.Errorf("worker: file %s has no %q field; it holds the worker id and the horizon a restart must start after: "+
				"restore it from a backup, or write the field back (\"horizon\": an RFC 3339 time after the last ID issued under worker %d)", path, k, st.WorkerID)
		}
	}
	if st.WorkerID < 0 || st.Generation < 0 {
		return st, fmt.Errorf("worker: file %s is corrupt: worker_id %d, generation %d", path, st.WorkerID, st.Generation)
	}
	return st, nil
}

// writeFileState replaces path atomically and durably: write a temporary
// file, fsync it, rename it over path, fsync the directory.
func writeFileState(path string, st fileState) error {
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("worker: file: %w", err)
	}
	tmp := path + ".tmp"
	w, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("worker: file: %w", err)
	}
	_, err = w.Write(append(data, '\n'))
	if err == nil {
		err = w.Sync()
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		var d *os.File
		if d, err = os.Open(filepath.Dir(path)); err == nil {
			err = d.Sync()
			d.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("worker: file: write %s: %w", path, err)
	}
	return nil
}
