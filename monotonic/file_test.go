package monotonic

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestFileCounterConcurrentUniqueIncreasing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bound")
	f, err := OpenFile(FileConfig{Path: path, Window: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := ctxT(t)
	const workers, each = 8, 2000
	got := make([][]int64, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			prev := int64(0)
			for i := 0; i < each; i++ {
				n := int64(1 + i%3)
				first, err := f.Next(ctx, n)
				if err != nil || first <= prev {
					got[w] = nil
					t.Errorf("worker %d: Next = %d, %v after %d", w, first, err, prev)
					return
				}
				for k := int64(0); k < n; k++ {
					got[w] = append(got[w], first+k)
				}
				prev = first + n - 1
			}
		}(w)
	}
	wg.Wait()
	seen := map[int64]bool{}
	for _, ids := range got {
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("duplicate %d", id)
			}
			seen[id] = true
		}
	}
	// Dense: a counter from one File skips nothing.
	for id := int64(1); id <= int64(len(seen)); id++ {
		if !seen[id] {
			t.Fatalf("counter skipped %d (issued %d)", id, len(seen))
		}
	}
}

// TestFileRestartAboveBound: a File reopened after a crash (no Close)
// starts strictly above everything issued, and the bound file was written
// before the values above the old bound were returned.
func TestFileRestartAboveBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bound")
	ctx := ctxT(t)
	var last int64
	for round := 0; round < 3; round++ {
		f, err := OpenFile(FileConfig{Path: path, Window: 10})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 25; i++ {
			id, err := f.Next(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			if id <= last {
				t.Fatalf("round %d: %d after %d", round, id, last)
			}
			last = id
			onDisk, err := readBound(path)
			if err != nil {
				t.Fatal(err)
			}
			if onDisk < id {
				t.Fatalf("issued %d above the recorded bound %d", id, onDisk)
			}
		}
		// crash: no Close; the background write, if any, may still land.
		f.c.close()
	}
}

func TestFileTimestampNeverBehind(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	path := filepath.Join(t.TempDir(), "bound")
	f, err := OpenFile(FileConfig{Path: path, Form: Timestamp, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	a, err := f.Next(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := Decode(a)
	if !p.Time.Equal(clk.Now()) || p.Logical != 0 {
		t.Fatalf("first ID decodes to %+v, want %v logical 0", p, clk.Now())
	}
	clk.Step(-time.Hour) // wall clock rollback
	b, err := f.Next(ctx, 3)
	if err != nil || b != a+1 {
		t.Fatalf("after rollback Next = %d, %v; want %d", b, err, a+1)
	}
	clk.Advance(2 * time.Hour)
	c, _ := f.Next(ctx, 1)
	if p, _ := Decode(c); !p.Time.Equal(clk.Now()) || c <= b+2 {
		t.Fatalf("after the wall clock passed: %d decodes to %+v, want %v", c, p, clk.Now())
	}
	f.Close()
	// Restart, wall clock far behind: still above everything issued.
	clk.Step(-24 * time.Hour)
	f2, err := OpenFile(FileConfig{Path: path, Form: Timestamp, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	d, err := f2.Next(ctx, 1)
	if err != nil || d <= c {
		t.Fatalf("after restart Next = %d, %v; want above %d", d, err, c)
	}
}

func TestFileBadInput(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bound")
	if err := os.WriteFile(path, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFile(FileConfig{Path: path}); err == nil {
		t.Fatal("a corrupt bound file was accepted")
	}
	for _, c := range []FileConfig{{}, {Path: path, Window: -1}, {Path: path, TimeWindow: time.Microsecond}, {Path: path, Form: 7}} {
		if _, err := OpenFile(c); !errors.Is(err, ErrBadConfig) {
			t.Errorf("OpenFile(%+v) = %v, want ErrBadConfig", c, err)
		}
	}
	f, err := OpenFile(FileConfig{Path: filepath.Join(dir, "b2")})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int64{0, -1, MaxCount + 1} {
		if _, err := f.Next(ctxT(t), n); !errors.Is(err, ErrBadCount) {
			t.Errorf("Next(%d) = %v, want ErrBadCount", n, err)
		}
	}
	f.Close()
	if _, err := f.Next(ctxT(t), 1); err == nil {
		t.Error("Next after Close succeeded")
	}
	if _, err := Decode(-1); err == nil {
		t.Error("Decode(-1) succeeded")
	}
	if _, err := ParseForm("sometimes"); err == nil {
		t.Error("ParseForm accepted sometimes")
	}
}
