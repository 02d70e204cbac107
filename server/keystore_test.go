package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
)

func loadKeys(t *testing.T, path string) map[string]KeyConfig {
	t.Helper()
	got, err := (&FileKeyStore{Path: path}).Load(context.Background())
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return got
}

// TestFileKeyStoreJournal: Put and Remove append to the journal only (the
// key file is not rewritten, so a change costs the same with 10 keys or
// 10,000), and a new store, as after a restart, reads them back with
// their tokens and steps.
func TestFileKeyStoreJournal(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "keys.json")
	s := &FileKeyStore{Path: path}
	want := map[string]KeyConfig{}
	for i := range 50 {
		name := fmt.Sprintf("k%d", i)
		k := KeyConfig{Strategy: "segment", Step: int64(100 + i), Tokens: []string{"token-" + name}}
		if err := s.Put(ctx, name, k); err != nil {
			t.Fatal(err)
		}
		want[name] = k
	}
	k3 := want["k3"]
	k3.Step = 5000
	if err := s.Put(ctx, "k3", k3); err != nil {
		t.Fatal(err)
	}
	want["k3"] = k3
	for _, name := range []string{"k7", "k8"} {
		if err := s.Remove(ctx, name); err != nil {
			t.Fatal(err)
		}
		delete(want, name)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the key file was written by Put/Remove (%v); want the journal alone until it grows", err)
	}
	if got := loadKeys(t, path); !reflect.DeepEqual(got, want) {
		t.Errorf("after a restart: %d keys %v; want %d %v", len(got), got["k3"], len(want), want["k3"])
	}
	info, err := os.Stat(path + ".log")
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("journal mode %v; want 0600 (it holds tokens)", info.Mode().Perm())
	}
}

// TestFileKeyStoreCutShort: a crash in the middle of an append leaves a
// last line without its newline; it was never acknowledged, so Load drops
// it, and the next change starts a line of its own. A damaged line before
// the last is refused, naming the file and the line.
func TestFileKeyStoreCutShort(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "keys.json")
	s := &FileKeyStore{Path: path}
	if err := s.Put(ctx, "a", KeyConfig{Strategy: "segment"}); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path+".log", os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"put":"b","key":{"strat`)
	f.Close()
	s2 := &FileKeyStore{Path: path}
	got, err := s2.Load(ctx)
	if err != nil || len(got) != 1 || got["a"].Strategy != "segment" {
		t.Fatalf("Load after a cut-short line: %v, %v; want key a alone", got, err)
	}
	if err := s2.Put(ctx, "c", KeyConfig{Strategy: "uuid"}); err != nil {
		t.Fatal(err)
	}
	if got := loadKeys(t, path); len(got) != 2 || got["c"].Strategy != "uuid" {
		t.Errorf("after the next change: %v; want a and c", got)
	}

	b, _ := os.ReadFile(path + ".log")
	os.WriteFile(path+".log", append([]byte("{\"put\":\"x\"}\n"), b...), 0o600)
	_, err = (&FileKeyStore{Path: path}).Load(ctx)
	if err == nil || !strings.Contains(err.Error(), path+".log line 1") {
		t.Errorf("Load of a journal with a damaged first line: %v; want an error naming %s line 1", err, path+".log")
	}
}

// TestFileKeyStoreCompaction: once the journal holds more lines than the
// file holds keys (and at least journalCompact), the state goes to the
// file and the journal is emptied; a crash between the two (the old
// journal still there beside the new file) loads the same keys.
func TestFileKeyStoreCompaction(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "keys.json")
	s := &FileKeyStore{Path: path}
	var journal []byte
	for i := range journalCompact + 1 {
		if i == journalCompact {
			journal, _ = os.ReadFile(path + ".log") // the journal just before it is folded in
		}
		if err := s.Put(ctx, fmt.Sprintf("k%d", i%600), KeyConfig{Strategy: "segment", Step: int64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	if info, err := os.Stat(path + ".log"); err != nil || info.Size() != 0 {
		t.Fatalf("journal after %d changes: %v, %v; want it emptied", journalCompact+1, info, err)
	}
	want := loadKeys(t, path)
	if len(want) != 600 || want["k0"].Step != 601 {
		t.Fatalf("after compaction: %d keys, k0 step %d; want 600 keys, k0 step 601", len(want), want["k0"].Step)
	}
	// The journal as it stood when it was folded in: with its last line,
	// the change that made it long enough.
	last, _ := json.Marshal(journalLine{Put: "k424", Key: &persistedKey{KeyConfig: KeyConfig{Strategy: "segment", Step: journalCompact + 1}}})
	os.WriteFile(path+".log", append(journal, append(last, '\n')...), 0o600)
	if got := loadKeys(t, path); !reflect.DeepEqual(got, want) {
		t.Errorf("the file beside the journal it folded in: %d keys, k0 step %d; want %d keys, k0 step %d", len(got), got["k0"].Step, len(want), want["k0"].Step)
	}
	// Save replaces everything and empties the journal too.
	if err := s.Save(ctx, map[string]KeyConfig{"only": {Strategy: "ulid"}}); err != nil {
		t.Fatal(err)
	}
	if got := loadKeys(t, path); len(got) != 1 || got["only"].Strategy != "ulid" {
		t.Errorf("after Save: %v; want the key saved alone", got)
	}
}

// badDisk makes the key store's files fail on purpose: writes past a
// budget of bytes (a full disk), fsyncs, truncates, the directory's fsync.
type badDisk struct {
	mu       sync.Mutex
	budget   int // bytes left before writes fail; <0: no limit
	syncErr  bool
	truncErr bool
	dirErr   bool
}

func (d *badDisk) set(f func(d *badDisk)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f(d)
}

type badFile struct {
	*os.File
	d *badDisk
}

func (f *badFile) Write(p []byte) (int, error) {
	f.d.mu.Lock()
	b := f.d.budget
	if b >= 0 && len(p) > b {
		f.d.budget = 0
		f.d.mu.Unlock()
		n, _ := f.File.Write(p[:b])
		return n, &fs.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	if b >= 0 {
		f.d.budget -= len(p)
	}
	f.d.mu.Unlock()
	return f.File.Write(p)
}

func (f *badFile) Sync() error {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	if f.d.syncErr {
		return &fs.PathError{Op: "fsync", Path: f.Name(), Err: syscall.EIO}
	}
	return f.File.Sync()
}

func (f *badFile) Truncate(n int64) error {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	if f.d.truncErr {
		return &fs.PathError{Op: "truncate", Path: f.Name(), Err: syscall.EIO}
	}
	return f.File.Truncate(n)
}

// badStore is a FileKeyStore at path whose files fail as d says.
func badStore(path string, d *badDisk) *FileKeyStore {
	return &FileKeyStore{Path: path,
		open: func(name string, flag int) (journalFile, error) {
			f, err := os.OpenFile(name, flag, 0o600)
			if err != nil {
				return nil, err
			}
			return &badFile{File: f, d: d}, nil
		},
		syncDir: func(dir string) error {
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
		}}
}

func readJournal(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path + ".log")
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

func keyNames(m map[string]KeyConfig) []string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// TestFileKeyStoreFailedAppend: a change whose append fails half-way or
// whose fsync fails leaves the journal as it was: after a restart a
// create the API reported as failed does not exist, and a delete it
// reported as failed has not happened. The next change is written whole.
func TestFileKeyStoreFailedAppend(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(d *badDisk)
	}{
		{"write fails half-way", func(d *badDisk) { d.budget = 9 }},
		{"fsync fails", func(d *badDisk) { d.syncErr = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "keys.json")
			d := &badDisk{budget: -1}
			s := badStore(path, d)
			if err := s.Put(ctx, "a", KeyConfig{Strategy: "segment"}); err != nil {
				t.Fatal(err)
			}
			before := readJournal(t, path)
			d.set(tc.fault)
			if err := s.Put(ctx, "b", KeyConfig{Strategy: "segment"}); err == nil {
				t.Fatal("Put on a failing disk succeeded")
			}
			if err := s.Remove(ctx, "a"); err == nil {
				t.Fatal("Remove on a failing disk succeeded")
			}
			if got := readJournal(t, path); got != before {
				t.Fatalf("journal after the failed changes = %q; want %q", got, before)
			}
			if got := keyNames(loadKeys(t, path)); !reflect.DeepEqual(got, []string{"a"}) {
				t.Fatalf("keys after a restart = %v; want [a]: the failed create absent, the failed delete not done", got)
			}
			d.set(func(d *badDisk) { d.budget, d.syncErr = -1, false })
			if err := s.Put(ctx, "c", KeyConfig{Strategy: "uuid"}); err != nil {
				t.Fatalf("Put once the disk works: %v", err)
			}
			if got := keyNames(loadKeys(t, path)); !reflect.DeepEqual(got, []string{"a", "c"}) {
				t.Fatalf("keys after a restart = %v; want [a c]", got)
			}
		})
	}
}

// TestFileKeyStoreCutFails: the failed line cannot be cut away. Every
// change (and a Load by the same store) fails, saying so, until the cut
// succeeds; then the failed create is gone and changes go on.
func TestFileKeyStoreCutFails(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "keys.json")
	d := &badDisk{budget: -1}
	s := badStore(path, d)
	if err := s.Put(ctx, "a", KeyConfig{Strategy: "segment"}); err != nil {
		t.Fatal(err)
	}
	d.set(func(d *badDisk) { d.syncErr, d.truncErr = true, true })
	if err := s.Put(ctx, "b", KeyConfig{Strategy: "segment"}); err == nil {
		t.Fatal("Put whose fsync failed succeeded")
	}
	d.set(func(d *badDisk) { d.syncErr = false })
	if err := s.Put(ctx, "c", KeyConfig{Strategy: "segment"}); err == nil || !strings.Contains(err.Error(), "cut") {
		t.Fatalf("Put while the failed line is still there: %v; want an error saying it could not be cut", err)
	}
	if _, err := s.Load(ctx); err == nil {
		t.Fatal("Load while the failed line is still there succeeded")
	}
	d.set(func(d *badDisk) { d.truncErr = false })
	if err := s.Put(ctx, "c", KeyConfig{Strategy: "segment"}); err != nil {
		t.Fatalf("Put once the cut works: %v", err)
	}
	if got := keyNames(loadKeys(t, path)); !reflect.DeepEqual(got, []string{"a", "c"}) {
		t.Fatalf("keys after a restart = %v; want [a c]", got)
	}
}

// TestFileKeyStoreDirSyncFails: when the directory cannot be synced after
// keys.json is rewritten, the rename may not survive a crash: the journal
// is kept (emptying it could lose every change since the last rewrite),
// and folding it in is tried again at the next change.
func TestFileKeyStoreDirSyncFails(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "keys.json")
	d := &badDisk{budget: -1, dirErr: true}
	s := badStore(path, d)
	for i := range journalCompact + 1 {
		if err := s.Put(ctx, fmt.Sprintf("k%d", i%600), KeyConfig{Strategy: "segment", Step: int64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(readJournal(t, path), "\n"); n != journalCompact+1 {
		t.Fatalf("journal after a rewrite whose directory fsync failed holds %d lines; want all %d kept", n, journalCompact+1)
	}
	if got := loadKeys(t, path); len(got) != 600 || got["k0"].Step != 601 {
		t.Fatalf("after a restart: %d keys, k0 step %d; want 600, step 601", len(got), got["k0"].Step)
	}
	d.set(func(d *badDisk) { d.dirErr = false })
	if err := s.Put(ctx, "last", KeyConfig{Strategy: "segment"}); err != nil {
		t.Fatal(err)
	}
	if j := readJournal(t, path); j != "" {
		t.Errorf("journal once the directory syncs holds %d lines; want it folded into the file", strings.Count(j, "\n"))
	}
	if got := loadKeys(t, path); len(got) != 601 || got["k0"].Step != 601 {
		t.Fatalf("after a restart: %d keys, k0 step %d; want 601, step 601", len(got), got["k0"].Step)
	}
}

// TestFileKeyStoreTornLineNamesKey: a journal line cut short by a crash is
// dropped, and the log names the key it would have created or deleted,
// so an operator knows which key to create again; never its tokens.
func TestFileKeyStoreTornLineNamesKey(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ torn, want string }{
		{`{"put":"invoice","key":{"strategy":"segment","tok`, `key=invoice`},
		{`{"remove":"old-orders"`, `key=old-orders`},
		{`{"put":"inv`, `key="(cut short)"`},
	} {
		path := filepath.Join(t.TempDir(), "keys.json")
		if err := (&FileKeyStore{Path: path}).Put(ctx, "a", KeyConfig{Strategy: "segment", Tokens: []string{"secret-token-123456"}}); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(path+".log", os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(tc.torn)
		f.Close()
		var buf bytes.Buffer
		got, err := (&FileKeyStore{Path: path, Logger: slog.New(slog.NewTextHandler(&buf, nil))}).Load(ctx)
		if err != nil || len(got) != 1 {
			t.Fatalf("Load: %v, %v; want key a alone", got, err)
		}
		if !strings.Contains(buf.String(), tc.want) || strings.Contains(buf.String(), "tok") {
			t.Errorf("log of the torn line %q:\n%s\nwant %s and no token", tc.torn, buf.String(), tc.want)
		}
	}
}
