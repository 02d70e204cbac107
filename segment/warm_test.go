package segment_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/idmint/idmint/segment"
)

// TestWarm: Warm loads the first segment of 3,000 keys in a handful of
// batches; afterwards each key's first ID comes from memory (no store
// call) and is the key's first number.
func TestWarm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 3000
	f := newBatchFake()
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("w%d", i))
		if err := f.Create(ctx, segment.KeyInfo{Key: names[i], Step: 10}); err != nil {
			t.Fatal(err)
		}
	}
	a, err := segment.New(f, segment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.Warm(names)
	poll(t, "every key's first segment to be loaded", func() bool { return a.BatchStats().Requests == n && callsOf(f.fakeStore) == n })
	poll(t, "the last load to be published", func() bool {
		for _, st := range a.Stats() {
			if !st.NextReady && !st.InitOK {
				return false
			}
		}
		return true
	})
	if st := a.BatchStats(); st.Batches > 3*n/512 {
		t.Errorf("warm-up of %d keys took %d batches (largest %d); want them gathered", n, st.Batches, st.Largest)
	}
	for _, name := range names {
		if id, err := a.Next(ctx, name); err != nil || id != 1 {
			t.Fatalf("%s: first ID %d, %v; want 1", name, id, err)
		}
	}
	if c := callsOf(f.fakeStore); c != n {
		t.Fatalf("%d store allocations after warm-up and one ID per key, want %d (the IDs came from memory)", c, n)
	}
}

// TestWarmStoreDown: with the store down, the warm-up stops at its first
// failure instead of timing out key after key, says so once, and the keys
// load on their first call once the store is back.
func TestWarmStoreDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newBatchFake()
	var names []string
	for i := range 5000 {
		names = append(names, fmt.Sprintf("w%d", i))
		if err := f.Create(ctx, segment.KeyInfo{Key: names[i], Step: 10}); err != nil {
			t.Fatal(err)
		}
	}
	f.set(func(f *fakeStore) { f.fail = errDown })
	var logs logBuffer
	a, err := segment.New(f, segment.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.Warm(names)
	poll(t, "the warm-up to give up", func() bool { return logs.count("warm-up stopped") == 1 })
	if c := callsOf(f.fakeStore); c > 2000 {
		t.Errorf("%d allocations tried with the store down; want the warm-up to stop after the lots in flight (2,000)", c)
	}
	f.set(func(f *fakeStore) { f.fail = nil })
	if id, err := a.Next(ctx, "w4999"); err != nil || id != 1 {
		t.Fatalf("first ID after the store is back = %d, %v; want 1", id, err)
	}
	if bytes.Count([]byte(logs.String()), []byte("level=WARN")) != 1 {
		t.Errorf("log:\n%s\nwant one warning", logs.String())
	}
}
