package snowflake

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// fileHorizonMagic starts every horizon file, so a wrong path is detected
// instead of being overwritten or misread.
const fileHorizonMagic = "idmint-horizon v1 "

// FileHorizon is a Horizon kept in one file on local disk, for a single
// process on one machine (a restart of the same worker). Every Extend writes
// a new file beside the old one, fsyncs it, renames it over the old one and
// fsyncs the directory, so after a crash the file holds either the old or the
// new horizon, never a torn one. Extend never lowers the recorded horizon;
// Release (a clean Close) lowers it to the last ID actually issued.
//
// A FileHorizon does not stop two processes from using the same file at
// once; workers on several machines need a coordinator-backed Horizon (the
// worker package). It is safe for concurrent use.
type FileHorizon struct {
	path string

	mu   sync.Mutex // serialises file writes; held during I/O, never by a Generator
	cur  time.Time  // last recorded horizon
	read bool       // cur reflects the file
}

// NewFileHorizon returns a FileHorizon stored at path. The file is created by
// the first Extend; its directory must exist.
func NewFileHorizon(path string) *FileHorizon { return &FileHorizon{path: path} }

// Path returns the file the horizon is stored in.
func (f *FileHorizon) Path() string { return f.path }

// Load returns the recorded horizon, or the zero time when the file does not
// exist. A file that exists but cannot be parsed is an error, never read as
// "no horizon".
func (f *FileHorizon) Load(ctx context.Context) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.readLocked(); err != nil {
		return time.Time{}, err
	}
	return f.cur, nil
}

func (f *FileHorizon) readLocked() error {
	if f.read {
		return nil
	}
	b, err := os.ReadFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		f.read = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("snowflake: read horizon: %w", err)
	}
	t, err := parseHorizonFile(string(b))
	if err != nil {
		return fmt.Errorf("snowflake: horizon file %s: %w", f.path, err)
	}
	f.cur, f.read = t, true
	return nil
}

func parseHorizonFile(s string) (time.Time, error) {
	rest, ok := strings.CutPrefix(s, fileHorizonMagic)
	if !ok {
		return time.Time{}, fmt.Errorf("does not start with %q", strings.TrimSpace(fileHorizonMagic))
	}
	rest, ok = strings.CutSuffix(rest, "\n")
	if !ok {
		return time.Time{}, errors.New("is truncated (no final newline)")
	}
	t, err := time.Parse(time.RFC3339Nano, rest)
	if err != nil {
		return time.Time{}, fmt.Errorf("bad time %q: %w", rest, err)
	}
	return t.UTC(), nil
}

// Extend records a horizon of at least until, durably, and returns the
// horizon now recorded (the later of until and the previous one). When the
// recorded horizon already covers until, it returns it without writing.
func (f *FileHorizon) Extend(ctx context.Context, until time.Time) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.readLocked(); err != nil {
		return time.Time{}, err
	}
	if !until.After(f.cur) {
		return f.cur, nil
	}
	until = until.UTC()
	if err := writeFileAtomic(f.path, []byte(fileHorizonMagic+until.Format(time.RFC3339Nano)+"\n")); err != nil {
		return time.Time{}, fmt.Errorf("snowflake: write horizon: %w", err)
	}
	f.cur = until
	return f.cur, nil
}

// Release records last as the horizon even when it is below the recorded
// one: Generator.Close calls it with the time of the last ID it issued, so
// the next run starts right after that ID rather than after the whole lead.
func (f *FileHorizon) Release(ctx context.Context, last time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	last = last.UTC()
	if err := writeFileAtomic(f.path, []byte(fileHorizonMagic+last.Format(time.RFC3339Nano)+"\n")); err != nil {
		return fmt.Errorf("snowflake: write horizon: %w", err)
	}
	f.cur, f.read = last, true
	return nil
}

// writeFileAtomic writes data to a temporary file in path's directory,
// fsyncs it, renames it over path and fsyncs the directory.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(name)
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(name, path); err != nil {
		return err
	}
	ok = true
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
