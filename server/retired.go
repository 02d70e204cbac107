package server

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
)

// Retired keys: a key deleted through the admin API leaves its row in its
// store (so a key created again under the name continues after it), and
// Leaf's tag route serves every row of the default store by name. Without
// a record of the key, that row was served to anyone once the key was
// gone, tokens or not. The server remembers each deleted key's token
// digests (SHA-256, never the tokens) in RetiredFile in the data
// directory, and AuthorizeRetired applies them to the row's tag.

// RetiredFile is the file in the data directory holding the token
// digests of keys deleted through the admin API.
const RetiredFile = "retired-keys.json"

type retiredFile struct {
	// Keys maps a deleted key's name to the hex SHA-256 digests of its
	// tokens.
	Keys map[string][]string `json:"keys"`
}

func (s *Server) retiredPath() string {
	if s.cfg.DataDir == "" {
		return ""
	}
	return filepath.Join(s.cfg.DataDir, RetiredFile)
}

// loadRetired reads RetiredFile; a missing file is no retired key.
func (s *Server) loadRetired() error {
	m := map[string][]tokenHash{}
	if p := s.retiredPath(); p != "" {
		b, err := os.ReadFile(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return fmt.Errorf("read the tokens of deleted keys: %w", err)
		default:
			var f retiredFile
			if err := json.Unmarshal(b, &f); err != nil {
				return fmt.Errorf("read the tokens of deleted keys: %s: %w", p, err)
			}
			for name, ds := range f.Keys {
				for _, d := range ds {
					var h tokenHash
					if n, err := hex.Decode(h[:], []byte(d)); err != nil || n != len(h) {
						return fmt.Errorf("read the tokens of deleted keys: %s: key %q: %q is not a SHA-256 digest", p, name, d)
					}
					m[name] = append(m[name], h)
				}
			}
		}
	}
	s.retired.Store(&m)
	return nil
}

// retire records that key k is deleted: its tokens now guard its row on
// Leaf's tag route (none: the row is as open as the key was). Called
// under persistMu, before the deletion is persisted: a crash in between
// leaves a record for a key that still exists, which is harmless.
func (s *Server) retireKey(k *Key) error {
	old := *s.retired.Load()
	if len(k.tokens) == 0 && old[k.name] == nil {
		return nil
	}
	next := maps.Clone(old)
	if len(k.tokens) == 0 {
		delete(next, k.name) // the latest key of the name was open
	} else {
		next[k.name] = k.tokens
	}
	if p := s.retiredPath(); p != "" {
		f := retiredFile{Keys: map[string][]string{}}
		for name, hs := range next {
			for _, h := range hs {
				f.Keys[name] = append(f.Keys[name], hex.EncodeToString(h[:]))
			}
		}
		b, err := json.MarshalIndent(f, "", "  ")
		if err != nil {
			return err
		}
		if err := writeFileSync(p, b); err != nil {
			return fmt.Errorf("record the tokens of deleted key %q: %w", k.name, err)
		}
	}
	s.retired.Store(&next)
	return nil
}

// AuthorizeRetired checks r against the tokens of the key called name when
// that key was deleted through the admin API with tokens: 0 when r may
// use the row the key left in its store (or no such key was deleted),
// otherwise 401 or 403 (see WriteAuthError). Leaf's tag route calls it
// for rows no served key claims.
func (s *Server) AuthorizeRetired(r *http.Request, name string) int {
	p := s.retired.Load()
	if p == nil {
		return 0
	}
	if ts := (*p)[name]; len(ts) > 0 {
		return authorize(r, ts)
	}
	return 0
}

// writeFileSync replaces path with b, owner-only: a temporary file
// synced, renamed over path, then the directory synced.
func writeFileSync(path string, b []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+"-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
