package server

import (
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

// FileKeyStore keeps keys in one JSON file, replaced atomically (write to a
// temporary file, fsync, rename, fsync the directory) on every Save. The
// file is created with mode 0600 because it holds the keys' tokens.
type FileKeyStore struct {
	Path string
	mu   sync.Mutex
}

type keyFile struct {
	Keys map[string]persistedKey `json:"keys"`
}

// persistedKey is KeyConfig with its tokens (which the API never shows).
type persistedKey struct {
	KeyConfig
	Tokens []string `json:"tokens,omitempty"`
}

// Load returns the stored keys; a missing file is an empty set.
func (s *FileKeyStore) Load(ctx context.Context) (map[string]KeyConfig, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := os.ReadFile(s.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]KeyConfig{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("server: load keys: %w", err)
	}
	var f keyFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("server: load keys from %s: %w", s.Path, err)
	}
	out := make(map[string]KeyConfig, len(f.Keys))
	for n, k := range f.Keys {
		k.KeyConfig.Tokens = k.Tokens
		out[n] = k.KeyConfig
	}
	return out, nil
}

// Save replaces the stored keys with keys, durably.
func (s *FileKeyStore) Save(ctx context.Context, keys map[string]KeyConfig) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := keyFile{Keys: make(map[string]persistedKey, len(keys))}
	for n, k := range keys {
		f.Keys[n] = persistedKey{KeyConfig: k, Tokens: k.Tokens}
	}
	b, err := json.MarshalIndent(f, "", "  ")
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
	return nil
}
