package server

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The key journal's torn-line rules, each with the mistake it keeps out:
// a last line without its newline was never acknowledged (its append did
// not finish) and is dropped; a damaged line with lines after it is no
// crash's doing, and the journal is refused, as it stands, naming the
// line: skipping it would drop an acknowledged change silently, and
// treating it as the end would drop every change after it.

// journalWith writes a journal whose lines are keys a, b, c put in that
// order, with line i (0-based; -1 for none) cut short, keeping its
// newline unless it is the last.
func journalWith(t *testing.T, torn int) (path string, journal []byte) {
	t.Helper()
	ctx := context.Background()
	path = filepath.Join(t.TempDir(), "keys.json")
	s := &FileKeyStore{Path: path}
	for _, name := range []string{"a", "b", "c"} {
		if err := s.Put(ctx, name, KeyConfig{Strategy: "segment", Step: 10}); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path + ".log")
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	lines = lines[:len(lines)-1] // the empty tail after the last newline
	if len(lines) != 3 {
		t.Fatalf("journal of 3 puts has %d lines: %q", len(lines), b)
	}
	if torn >= 0 {
		cut := lines[torn][:len(lines[torn])/2]
		if torn < len(lines)-1 {
			cut = append(cut[:len(cut):len(cut)], '\n')
		}
		lines[torn] = cut
	}
	journal = bytes.Join(lines, nil)
	if err := os.WriteFile(path+".log", journal, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, journal
}

func TestKeyJournalTornLastLineDropped(t *testing.T) {
	path, _ := journalWith(t, 2)
	got := loadKeys(t, path)
	if len(got) != 2 || got["a"].Step != 10 || got["b"].Step != 10 {
		t.Fatalf("Load of a journal whose last line was cut short: %v; want a and b, acknowledged, and c's unfinished put dropped", got)
	}
	// The next change starts a line of its own, and both survive.
	if err := (&FileKeyStore{Path: path}).Put(context.Background(), "d", KeyConfig{Strategy: "uuid"}); err != nil {
		t.Fatal(err)
	}
	if got := loadKeys(t, path); len(got) != 3 || got["d"].Strategy != "uuid" {
		t.Fatalf("after a change following the dropped line: %v; want a, b and d", got)
	}
}

func TestKeyJournalTornMiddleLineRefused(t *testing.T) {
	for _, torn := range []int{0, 1} {
		path, journal := journalWith(t, torn)
		_, err := (&FileKeyStore{Path: path}).Load(context.Background())
		want := path + ".log line " + string(rune('1'+torn))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Load of a journal with line %d damaged and lines after it: %v; want an error naming %s", torn+1, err, want)
		}
		// Refused as it stands: nothing truncated, so the lines after the
		// damaged one are there for whoever repairs it.
		if b, err := os.ReadFile(path + ".log"); err != nil || !bytes.Equal(b, journal) {
			t.Fatalf("the refused journal changed: %q, %v; want it as it was, %q", b, err, journal)
		}
	}
}
