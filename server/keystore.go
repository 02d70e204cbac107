package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
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
// acknowledged, so it is dropped. Both files are created with mode 0600
// because they hold the keys' tokens.
type FileKeyStore struct {
	Path string

	mu    sync.Mutex
	state map[string]persistedKey // nil until read
	lines int                     // lines in the journal
}

var _ KeyJournal = (*FileKeyStore)(nil)

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

// Load returns the keys last saved (none when the file does not exist).
func (s *FileKeyStore) Load(ctx context.Context) (map[string]KeyConfig, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
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
		if err := os.Truncate(s.journalPath(), int64(end)); err != nil {
			return fmt.Errorf("server: load keys: drop the cut-short last line of %s: %w", s.journalPath(), err)
		}
	}
	s.state, s.lines = state, lines
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
	f, err := os.OpenFile(s.journalPath(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("server: save keys: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// Perhaps part of a line: read both files again before the
		// next change, which drops it.
		s.state = nil
		return fmt.Errorf("server: save keys: append to %s: %w", s.journalPath(), err)
	}
	apply()
	s.lines++
	if s.lines > max(journalCompact, len(s.state)) {
		// The change is durable in the journal already: a rewrite that
		// fails is tried again at the next change.
		_ = s.writeFile(s.state)
	}
	return nil
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
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	// The file now holds every change the journal held: empty it.
	f, err := os.OpenFile(s.journalPath(), os.O_WRONLY|os.O_TRUNC|os.O_CREATE, 0o600)
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
	s.lines = 0
	return nil
}
