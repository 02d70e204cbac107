package monotonic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/idmint/idmint/clock"
)

// FileConfig configures a File source. Zero values take the defaults.
type FileConfig struct {
	// Path is the bound file (required). Its directory must exist.
	Path string
	// Form is Counter (default) or Timestamp.
	Form Form
	// Window is how far a Counter bound runs ahead. Default DefaultWindow.
	Window int64
	// TimeWindow is how far a Timestamp bound runs ahead of the wall
	// clock. Default DefaultTimeWindow.
	TimeWindow time.Duration
	// Clock defaults to clock.NewReal().
	Clock clock.Clock

	// Witness, when set, also holds the bound, under Space: every bound
	// written to the file is raised there too before a value up to it is
	// issued (a failed raise fails like a failed file write), and the File
	// starts strictly above the larger of the file's bound and the mark.
	Witness Witness
	// Space names the key in the witness; default WitnessSpace(Name).
	// Required with Witness when Name is empty.
	Space string
	// Name names the key in logs.
	Name string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *FileConfig) setDefaults() error {
	if c.Path == "" {
		return fmt.Errorf("%w: path is empty", ErrBadConfig)
	}
	is := issuing{Form: c.Form, Window: c.Window, TimeWindow: c.TimeWindow, Clock: c.Clock}
	if err := is.setDefaults(); err != nil {
		return err
	}
	c.Form, c.Window, c.TimeWindow, c.Clock = is.Form, is.Window, is.TimeWindow, is.Clock
	if c.Witness != nil && c.Space == "" {
		if c.Name == "" {
			return fmt.Errorf("%w: a witness needs a space (or a name)", ErrBadConfig)
		}
		c.Space = WitnessSpace(c.Name)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// File is the single-node Source: the bound lives in a file, written to a
// temporary file, fsync'd and renamed (then the directory fsync'd) before
// any value above the old bound is issued. After a crash or kill -9 the
// next File on the same path starts strictly above the recorded bound. One
// process at a time may use a path (the server's data-directory lock
// ensures it).
type File struct {
	path     string
	witness  Witness
	space    string
	c        *core
	closed   atomic.Bool
	wentBack bool // the bound file was below the witness's mark at open
}

// fileTimeout bounds one bound write (file and witness), and the witness
// read of OpenFile.
const fileTimeout = time.Minute

// OpenFile reads the bound at cfg.Path (none yet: start at 1) and the
// witness's mark, and returns a File issuing above both.
func OpenFile(cfg FileConfig) (*File, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	start, err := readBound(cfg.Path)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), fileTimeout)
	mark, err := readMark(ctx, cfg.Witness, cfg.Space)
	cancel()
	if err != nil {
		return nil, err
	}
	wentBack := mark > start
	if wentBack {
		cfg.Logger.Info("monotonic: source starts above a bound known elsewhere", "key", cfg.Name,
			"source_bound", start, "known_bound", mark, "source", "file "+cfg.Path, "space", cfg.Space)
		start = mark
	}
	f := &File{path: cfg.Path, witness: cfg.Witness, space: cfg.Space, wentBack: wentBack}
	f.c = newCore(cfg.Form, cfg.Clock, cfg.Window, cfg.TimeWindow, fileTimeout, start, f.write, func() bool { return !f.closed.Load() })
	return f, nil
}

func readBound(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("monotonic: read bound: %w", err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("monotonic: bound file %s is corrupt (%q): refusing to guess where to start", path, trunc(string(b)))
	}
	return v, nil
}

func trunc(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// write records bound durably: temp file, fsync, rename, fsync directory,
// then in the witness.
func (f *File) write(ctx context.Context, bound int64) error {
	if f.closed.Load() {
		return ErrClosed
	}
	if err := f.writeFile(bound); err != nil {
		return err
	}
	if f.witness == nil {
		return nil
	}
	return raiseMark(ctx, f.witness, f.space, bound)
}

func (f *File) writeFile(bound int64) error {
	dir := filepath.Dir(f.path)
	tmp, err := os.CreateTemp(dir, filepath.Base(f.path)+".tmp*")
	if err != nil {
		return fmt.Errorf("monotonic: write bound: %w", err)
	}
	_, err = tmp.WriteString(strconv.FormatInt(bound, 10) + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), f.path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("monotonic: write bound: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("monotonic: sync bound directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("monotonic: sync bound directory: %w", err)
	}
	return nil
}

// Next reserves n consecutive IDs and returns the first.
func (f *File) Next(ctx context.Context, n int64) (int64, error) { return f.c.next(ctx, n) }

// Bounds returns the last issued value and the persisted bound.
func (f *File) Bounds() (last, bound int64) { return f.c.headroom() }

// WentBack reports whether the bound file was found below the witness's
// mark when it was opened (deleted, restored from a backup, the data
// directory replaced): the file started above the mark instead.
func (f *File) WentBack() bool { return f.wentBack }

// Close stops background bound writes. The bound stays for the next open.
func (f *File) Close() error {
	f.closed.Store(true)
	f.c.close()
	return nil
}
