package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
)

// KeyStore persists the keys created through the admin API, so they
// survive a restart. Keys from the config file are never written to it.
type KeyStore interface {
	Load(ctx context.Context) (map[string]KeyConfig, error)
	Save(ctx context.Context, keys map[string]KeyConfig) error
}

// KeyJournal is a KeyStore that also records one key's change at a time,
// so that creating, re-stepping or deleting a key costs the same with 10
// keys or 10,000. The server uses Put and Remove when its KeyStore has
// them, Save otherwise.
type KeyJournal interface {
	KeyStore
	// Put records key name as k (created, or its step changed).
	Put(ctx context.Context, name string, k KeyConfig) error
	// Remove records that key name is gone.
	Remove(ctx context.Context, name string) error
}

// FileKeyStore keeps keys in a JSON file (Path) and a journal beside it
// (Path + ".log"). Put and Remove append one line to the journal and
// fsync it; when the journal holds more lines than the file holds keys
// (and at least 1,024), the whole state is written to Path and the
// journal emptied. Writing Path is atomic (a temporary file, fsync,
// rename, fsync of the directory); a crash between that and emptying the
// journal only replays changes already in the file, since each line
// records a key's whole state. Load reads the file, then the journal's
// lines in order; a last line cut short by a crash was never
// acknowledged, so it is dropped (and logged with the key's name). Both
// files are created with mode 0600 because they hold the keys' tokens.
//
// A change that fails (a full disk, an I/O error, a failed fsync) leaves
// nothing behind: the journal is cut back to its length before the line,
// so a create the caller was told failed does not exist after a restart
// and a failed delete has not happened. When the cut fails too, every
// call fails and tries it again until it succeeds. When the directory
// cannot be synced after Path is rewritten, the journal is kept. Compact
// folds the journal into Path; the server calls it on a clean Close.
type FileKeyStore struct {
	Path string
	// Logger receives what Load drops (a journal line cut short by a
	// crash); nil: slog.Default().
	Logger *slog.Logger

	// open and syncDir replace the file operations in the package's
	// tests (nil: the real ones).
	open    func(name string, flag int) (journalFile, error)
	syncDir func(dir string) error

	mu      sync.Mutex
	state   map[string]persistedKey // nil until read
	lines   int                     // lines in the journal
	size    int64                   // bytes in the journal
	mustCut bool                    // a failed change could not be cut away: cut to cutTo first
	cutTo   int64
}

var _ KeyJournal = (*FileKeyStore)(nil)

// journalFile is what the journal is written through: an *os.File, or a
// double that fails on purpose in the package's tests.
type journalFile interface {
	Write(p []byte) (int, error)
	Sync() error
	Truncate(size int64) error
	Close() error
}

func (s *FileKeyStore) openFile(name string, flag int) (journalFile, error) {
	if s.open != nil {
		return s.open(name, flag)
	}
	f, err := os.OpenFile(name, flag, 0o600)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return f, nil
}

func (s *FileKeyStore) syncDirectory(dir string) error {
	if s.syncDir != nil {
		return s.syncDir(dir)
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

type keyFile struct {
	Keys map[string]persistedKey `json:"keys"`
}

// persistedKey is a KeyConfig with its tokens, which KeyConfig's own
// JSON form leaves out.
type persistedKey struct {
	KeyConfig
	Tokens []string `json:"tokens,omitempty"`
}

// journalLine is one line of the journal: a key put, or removed.
type journalLine struct {
	Put    string        `json:"put,omitempty"`
	Key    *persistedKey `json:"key,omitempty"`
	Remove string        `json:"remove,omitempty"`
}

// journalCompact is the fewest journal lines that make Put and Remove
// rewrite the file (more when the file holds more keys).
const journalCompact = 1024

func (s *FileKeyStore) journalPath() string { return s.Path + ".log" }

// KeyCompactor is a KeyStore that keeps changes apart from its main file
// and can fold them into it. The server calls Compact on a clean Close,
// so that a build that reads only the main file (an older release, after
// a rollback) finds every key.
type KeyCompactor interface {
	Compact(ctx context.Context) error
}

var _ KeyCompactor = (*FileKeyStore)(nil)

func (s *FileKeyStore) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

// Load returns the keys last saved (none when the file does not exist).
func (s *FileKeyStore) Load(ctx context.Context) (map[string]KeyConfig, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.healLocked(); err != nil {
		return nil, err
	}
	if err := s.read(); err != nil {
		return nil, err
	}
	out := make(map[string]KeyConfig, len(s.state))
	for n, k := range s.state {
		k.KeyConfig.Tokens = k.Tokens
		out[n] = k.KeyConfig
	}
	return out, nil
}

// read loads the file and replays the journal into s.state, dropping a
// journal's last line cut short by a crash (and truncating it away, so
// the next line appended starts a line of its own).
func (s *FileKeyStore) read() error {
	state := map[string]persistedKey{}
	b, err := os.ReadFile(s.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("server: load keys: %w", err)
	default:
		var f keyFile
		if err := json.Unmarshal(b, &f); err != nil {
			return fmt.Errorf("server: load keys from %s: %w", s.Path, err)
		}
		for n, k := range f.Keys {
			state[n] = k
		}
	}
	j, err := os.ReadFile(s.journalPath())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("server: load keys: %w", err)
	}
	lines, end := 0, 0
	for end < len(j) {
		nl := bytes.IndexByte(j[end:], '\n')
		if nl < 0 {
			break // cut short by a crash: never acknowledged
		}
		line := j[end : end+nl]
		var l journalLine
		if err := json.Unmarshal(line, &l); err != nil || (l.Put == "") == (l.Remove == "") || (l.Put != "" && l.Key == nil) {
			return fmt.Errorf("server: load keys: %s line %d: not a key change: %.80q", s.journalPath(), lines+1, line)
		}
		if l.Put != "" {
			state[l.Put] = *l.Key
		} else {
			delete(state, l.Remove)
		}
		lines++
		end += nl + 1
	}
	if end < len(j) {
		change, name := tornChange(j[end:])
		s.logger().Warn("key store: the journal's last line was cut short by a crash before its change was acknowledged; "+
			"that change is dropped (create the key again, or delete it again, if it is missing or back)",
			"file", s.journalPath(), "change", change, "key", name)
		if err := os.Truncate(s.journalPath(), int64(end)); err != nil {
			return fmt.Errorf("server: load keys: drop the cut-short last line of %s: %w", s.journalPath(), err)
		}
	}
	s.state, s.lines, s.size = state, lines, int64(end)
	return nil
}

// tornChange reads what it can of a journal line cut short: the change
// ("put" or "remove") and the key's name, "(cut short)" when the name
// itself was cut. Nothing else of the line is returned: it may hold the
// key's tokens.
func tornChange(b []byte) (change, name string) {
	change, name = "(cut short)", "(cut short)"
	d := json.NewDecoder(bytes.NewReader(b))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return change, name
	}
	for {
		t, err := d.Token()
		f, ok := t.(string)
		if err != nil || !ok {
			return change, name
		}
		if f != "put" && f != "remove" {
			var skip json.RawMessage
			if d.Decode(&skip) != nil {
				return change, name
			}
			continue
		}
		change = f
		if t, err := d.Token(); err == nil {
			if n, ok := t.(string); ok {
				name = n
			}
		}
		return change, name
	}
}

// healLocked cuts the journal back when a failed change could not be cut
// away when it failed; until that succeeds every call fails, since the
// journal may hold a change its caller was told failed. The caller holds
// mu.
func (s *FileKeyStore) healLocked() error {
	if !s.mustCut {
		return nil
	}
	f, err := s.openFile(s.journalPath(), os.O_WRONLY|os.O_CREATE)
	if err == nil {
		err = f.Truncate(s.cutTo)
		if err == nil {
			err = f.Sync()
		}
		f.Close()
	}
	if err != nil {
		return fmt.Errorf("server: save keys: %s may still hold a key change that failed; cut it back to %d bytes: %w", s.journalPath(), s.cutTo, err)
	}
	s.mustCut, s.size = false, s.cutTo
	return nil
}

// Put records key name as k: one line appended to the journal.
func (s *FileKeyStore) Put(ctx context.Context, name string, k KeyConfig) error {
	pk := persistedKey{KeyConfig: k, Tokens: k.Tokens}
	return s.record(journalLine{Put: name, Key: &pk}, func() { s.state[name] = pk })
}

// Remove records that key name is gone.
func (s *FileKeyStore) Remove(ctx context.Context, name string) error {
	return s.record(journalLine{Remove: name}, func() { delete(s.state, name) })
}

// record appends l to the journal, fsyncs it, applies it to the state
// with apply, and rewrites the file when the journal has grown.
func (s *FileKeyStore) record(l journalLine, apply func()) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.healLocked(); err != nil {
		return err
	}
	if s.state == nil {
		if err := s.read(); err != nil {
			return err
		}
	}
	b, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("server: save keys: %w", err)
	}
	// Opened for each change (a KeyStore has no Close, and changes are
	// rare next to the fsync each one costs).
	f, err := s.openFile(s.journalPath(), os.O_WRONLY|os.O_APPEND|os.O_CREATE)
	if err != nil {
		return fmt.Errorf("server: save keys: %w", err)
	}
	line := append(b, '\n')
	_, err = f.Write(line)
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		// Part of the line, or all of it, may be in the file: cut it
		// away (and make the cut durable), so that a change the caller
		// is told failed is not found after a restart.
		err = fmt.Errorf("server: save keys: append to %s: %w", s.journalPath(), err)
		cerr := f.Truncate(s.size)
		if cerr == nil {
			cerr = f.Sync()
		}
		f.Close()
		if cerr != nil {
			s.mustCut, s.cutTo = true, s.size
			return fmt.Errorf("%w; then cut it back to %d bytes: %v (no key change is saved until that succeeds)", err, s.size, cerr)
		}
		return err
	}
	// fsync'd: the change is durable whatever Close says.
	f.Close()
	apply()
	s.lines++
	s.size += int64(len(line))
	if s.lines > max(journalCompact, len(s.state)) {
		// The change is durable in the journal already: a rewrite that
		// fails is tried again at the next change.
		_ = s.writeFile(s.state)
	}
	return nil
}

// Compact folds the journal into the file and empties it (nothing when
// the journal is empty).
func (s *FileKeyStore) Compact(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.healLocked(); err != nil {
		return err
	}
	if s.state == nil {
		if err := s.read(); err != nil {
			return err
		}
	}
	if s.size == 0 {
		return nil
	}
	return s.writeFile(s.state)
}

// Save replaces every key: the file is rewritten and the journal emptied.
func (s *FileKeyStore) Save(ctx context.Context, keys map[string]KeyConfig) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	state := make(map[string]persistedKey, len(keys))
	for n, k := range keys {
		state[n] = persistedKey{KeyConfig: k, Tokens: k.Tokens}
	}
	if err := s.writeFile(state); err != nil {
		return err
	}
	s.state = state
	return nil
}

// writeFile writes state to Path atomically, then empties the journal.
func (s *FileKeyStore) writeFile(state map[string]persistedKey) error {
	b, err := json.MarshalIndent(keyFile{Keys: state}, "", "  ")
	if err != nil {
		return fmt.Errorf("server: save keys: %w", err)
	}
	dir := filepath.Dir(s.Path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("server: save keys: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".keys-*.tmp")
	if err != nil {
		return fmt.Errorf("server: save keys: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("server: save keys: %w", err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("server: save keys: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("server: save keys: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("server: save keys: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.Path); err != nil {
		return fmt.Errorf("server: save keys: %w", err)
	}
	if err := s.syncDirectory(dir); err != nil {
		// The rename may not survive a crash: the old file would come
		// back, so the journal is kept (folding it in is tried again).
		return fmt.Errorf("server: save keys: sync directory %s after writing %s: %w", dir, s.Path, err)
	}
	// The file now holds every change the journal held: empty it.
	f, err := s.openFile(s.journalPath(), os.O_WRONLY|os.O_TRUNC|os.O_CREATE)
	if err != nil {
		s.state = nil // read both again before the next change
		return fmt.Errorf("server: save keys: empty %s: %w", s.journalPath(), err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		s.state = nil
		return fmt.Errorf("server: save keys: empty %s: %w", s.journalPath(), err)
	}
	f.Close()
	s.lines, s.size, s.mustCut = 0, 0, false
	return nil
}
