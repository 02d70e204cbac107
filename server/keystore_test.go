package server

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
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
