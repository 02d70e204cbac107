package segment_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/testkit/testserver"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func setup(t *testing.T, step int64, opts segment.Options) (*fakeStore, *segment.Allocator, *clock.Fake) {
	t.Helper()
	f := newFake()
	if err := f.Create(context.Background(), segment.KeyInfo{Key: "k", Step: step}); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(epoch)
	if opts.Clock == nil {
		opts.Clock = clk
	}
	a, err := segment.New(f, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return f, a, clk
}

func take(t *testing.T, k *segment.Key, n int) []int64 {
	t.Helper()
	out := make([]int64, 0, n)
	for range n {
		id, err := k.Next(context.Background())
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if len(out) > 0 && id <= out[len(out)-1] {
			t.Fatalf("Next = %d after %d", id, out[len(out)-1])
		}
		out = append(out, id)
	}
	return out
}

func TestNextSequential(t *testing.T) {
	t.Parallel()
	_, a, _ := setup(t, 10, segment.Options{Step: segment.StepPolicy{Fixed: true}})
	k, err := a.Key("k")
	if err != nil {
		t.Fatal(err)
	}
	got := take(t, k, 35)
	for i, id := range got {
		if id != int64(i+1) {
			t.Fatalf("ID %d = %d; with one allocator and step 10 the IDs are 1, 2, 3, ...", i, id)
		}
	}
}

// TestDynamicStep follows Leaf's rule on a fake clock: a segment that
// lasted under 15 min doubles the step, 15-30 min keeps it, 30 min or more
// halves it, never below the configured step, never above Max.
func TestDynamicStep(t *testing.T) {
	t.Parallel()
	f, a, clk := setup(t, 100, segment.Options{})
	k, _ := a.Key("k")
	// lasted: how long each segment lasts before the next is loaded.
	lasted := []time.Duration{time.Minute, 20 * time.Minute, 31 * time.Minute, 31 * time.Minute, 0, 0}
	take(t, k, 1) // first load: the key's own step (0 = row step)
	for _, d := range lasted {
		clk.Advance(d)
		st := k.Stats()
		// Use the rest of the current buffer, then the next one's first
		// ID: the load triggered at 10 % has finished by then.
		take(t, k, int(st.Buffers[st.Slot].Max-st.Buffers[st.Slot].Pos)+1)
	}
	want := []int64{0, 200, 200, 100, 100, 200, 400}
	if got := f.requested(); !slices.Equal(got[:len(want)], want) {
		t.Fatalf("steps asked of the store = %v, want %v", got, want)
	}
	// An operator's SetStep raises the floor at once.
	if err := a.SetStep(context.Background(), "k", 1000); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	st := k.Stats()
	take(t, k, int(st.Buffers[st.Slot].Max-st.Buffers[st.Slot].Pos)+1)
	st = k.Stats()
	take(t, k, int(st.Buffers[st.Slot].Max-st.Buffers[st.Slot].Pos)+1)
	got := f.requested()
	if got[len(want)] != 1000 || got[len(want)+1] != 2000 {
		t.Fatalf("steps after SetStep(1000), a slow and a fast segment = %v, want 1000 then 2000", got[len(want):])
	}
}

func TestStepCap(t *testing.T) {
	t.Parallel()
	f, a, _ := setup(t, 300, segment.Options{Step: segment.StepPolicy{Max: 1000}})
	k, _ := a.Key("k")
	take(t, k, 5000)
	for _, s := range f.requested() {
		if s > 1000 {
			t.Fatalf("step %d asked, above Max 1000 (%v)", s, f.requested())
		}
	}
	if got := f.requested(); !slices.Contains(got, 600) {
		t.Fatalf("steps %v never doubled", got)
	}
}

// TestOutageFakeStore: buffers keep serving while the store is down; past
// them calls fail at once with ErrUnavailable (wrapping the store's error);
// the loader backs off on the injected clock and recovers alone.
func TestOutageFakeStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, a, clk := setup(t, 10, segment.Options{
		Step:     segment.StepPolicy{Fixed: true},
		RetryMin: time.Second, RetryMax: 4 * time.Second,
	})
	k, _ := a.Key("k")
	take(t, k, 11) // [1,11) used up, [11,21) current, ID 11 below its 10 % trigger (12)
	f.set(func(f *fakeStore) { f.fail = errDown })
	ids := take(t, k, 9) // 12..20: the trigger fires, the load fails, the buffer serves on
	if ids[len(ids)-1] != 20 {
		t.Fatalf("last buffered ID = %d, want 20", ids[len(ids)-1])
	}
	for range 3 {
		_, err := k.Next(ctx)
		if !errors.Is(err, segment.ErrUnavailable) || !errors.Is(err, errDown) {
			t.Fatalf("Next past the buffers = %v, want ErrUnavailable wrapping the store's error", err)
		}
	}
	st := k.Stats()
	if st.LoadErrors == 0 || st.LastError == "" || st.Remaining != 0 {
		t.Fatalf("stats during the outage: %+v", st)
	}
	// Backoff: 1 s, 2 s, 4 s, 4 s ... on the fake clock.
	for _, d := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		if err := clk.WaitForSleepers(ctx, 1); err != nil {
			t.Fatal(err)
		}
		before := callsOf(f)
		clk.Advance(d - time.Millisecond)
		if callsOf(f) != before {
			t.Fatalf("retried before the %v backoff ended", d)
		}
		clk.Advance(time.Millisecond)
		waitCalls(t, f, before+1)
	}
	ok := make(chan struct{}, 1)
	f.set(func(f *fakeStore) { f.fail = nil; f.allocated = ok })
	if err := clk.WaitForSleepers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(4 * time.Second)
	recv(t, ok, "the store's answer after the outage")
	if id := nextAfterLoad(t, k); id <= 20 {
		t.Fatalf("ID after recovery = %d, repeats", id)
	}
	f.set(func(f *fakeStore) { f.allocated = nil })
	take(t, k, 50)
}

func callsOf(f *fakeStore) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// waitTimeout bounds every wait in these tests for something another
// goroutine does in real time (the loader); far above what it takes.
const waitTimeout = 10 * time.Second

func waitCalls(t *testing.T, f *fakeStore, n int) {
	t.Helper()
	poll(t, fmt.Sprintf("store to be called %d times", n), func() bool { return callsOf(f) >= n })
}

// poll waits, idle, until cond holds, failing t after waitTimeout.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testserver.Eventually(t, what, waitTimeout, cond)
}

// recv waits for one value on ch, failing t after waitTimeout.
func recv(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitTimeout):
		t.Fatalf("waited %v for %s", waitTimeout, what)
	}
}

// nextAfterLoad returns k's next ID once the loader has published the
// segment the store just returned (it does so just after the store
// answers); ErrUnavailable until then.
func nextAfterLoad(t *testing.T, k *segment.Key) int64 {
	t.Helper()
	var id int64
	poll(t, "the loaded segment to serve", func() bool {
		var err error
		id, err = k.Next(context.Background())
		if err != nil && !errors.Is(err, segment.ErrUnavailable) {
			t.Fatal(err)
		}
		return err == nil
	})
	return id
}

// TestPreload: the double buffer loads the next segment once LoadAt of the
// current one is used, before it runs out, so crossing into the next
// segment does not wait for the store.
func TestPreload(t *testing.T) {
	t.Parallel()
	f, a, _ := setup(t, 10, segment.Options{Step: segment.StepPolicy{Fixed: true}, LoadAt: 0.5})
	k, _ := a.Key("k")
	take(t, k, 5) // 1..5 from [1,11): below the trigger (6), one load
	if n := callsOf(f); n != 1 {
		t.Fatalf("store called %d times before the trigger, want 1", n)
	}
	take(t, k, 1) // 6: at the trigger
	poll(t, "the next segment to load in the background", func() bool { return k.Stats().NextReady })
	if n := callsOf(f); n != 2 {
		t.Fatalf("store called %d times after the trigger, want 2", n)
	}
	// The store now hangs: the rest of [1,11) and the first ID of [11,21)
	// must come from memory.
	hang := make(chan struct{})
	defer close(hang)
	f.set(func(f *fakeStore) { f.block = hang })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for want := int64(7); want <= 11; want++ {
		id, err := k.Next(ctx)
		if err != nil || id != want {
			t.Fatalf("Next = %d, %v; want %d from the preloaded buffers without the store", id, err, want)
		}
	}
}

// TestHungStore: a store that never answers cannot hold a caller past its
// deadline.
func TestHungStore(t *testing.T) {
	t.Parallel()
	f, a, _ := setup(t, 10, segment.Options{Clock: clock.NewReal()})
	f.set(func(f *fakeStore) { f.block = make(chan struct{}) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := a.Next(ctx, "k")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next on a hung store = %v, want DeadlineExceeded", err)
	}
	if err := a.Close(); err != nil { // cancels the hung load
		t.Fatal(err)
	}
	if _, err := a.Next(context.Background(), "k"); !errors.Is(err, segment.ErrClosed) {
		t.Fatalf("Next after Close = %v, want ErrClosed", err)
	}
}

func TestRangeAndNextN(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, a, _ := setup(t, 100, segment.Options{Step: segment.StepPolicy{Fixed: true}})
	b, err := a.Range(ctx, "k", 30)
	if err != nil || b != (segment.Block{Start: 1, End: 31, Step: 1}) || b.Len() != 30 {
		t.Fatalf("Range(30) = %+v, %v", b, err)
	}
	b, err = a.Range(ctx, "k", 1000) // cut at the segment's end
	if err != nil || b != (segment.Block{Start: 31, End: 101, Step: 1}) {
		t.Fatalf("Range(1000) = %+v, %v", b, err)
	}
	dst := make([]int64, 250)
	n, err := a.NextN(ctx, "k", dst)
	if err != nil || n != 250 {
		t.Fatalf("NextN = %d, %v", n, err)
	}
	for i, id := range dst {
		if id != int64(101+i) {
			t.Fatalf("NextN[%d] = %d, want %d", i, id, 101+i)
		}
	}
	for _, bad := range []int64{0, -1} {
		if _, err := a.Range(ctx, "k", bad); !errors.Is(err, segment.ErrBadCount) {
			t.Fatalf("Range(%d) = %v, want ErrBadCount", bad, err)
		}
	}
	if _, err := a.NextN(ctx, "k", nil); !errors.Is(err, segment.ErrBadCount) {
		t.Fatalf("NextN(nil) = %v, want ErrBadCount", err)
	}
}

func TestRemainderSplit(t *testing.T) {
	t.Parallel()
	// Three allocators, each on its own store (its own database), split one
	// number line with Delta 3: no number is issued twice.
	seen := map[int64]int{}
	for rem := range int64(3) {
		_, a, _ := setup(t, 10, segment.Options{Delta: 3, Remainder: rem})
		k, _ := a.Key("k")
		for _, id := range take(t, k, 100) {
			if id%3 != rem {
				t.Fatalf("remainder %d issued %d", rem, id)
			}
			if _, dup := seen[id]; dup {
				t.Fatalf("%d issued twice", id)
			}
			seen[id] = int(rem)
		}
	}
}

func TestBadOptions(t *testing.T) {
	t.Parallel()
	f := newFake()
	for name, o := range map[string]segment.Options{
		"LoadAt 0 < x":      {LoadAt: -0.1},
		"LoadAt > 1":        {LoadAt: 1.5},
		"Delta < 0":         {Delta: -2},
		"Remainder < 0":     {Delta: 2, Remainder: -1},
		"Remainder = Delta": {Delta: 2, Remainder: 2},
		"Step.Max":          {Step: segment.StepPolicy{Max: -1}},
		"Shrink < Grow":     {Step: segment.StepPolicy{Grow: time.Hour, Shrink: time.Minute}},
		"RetryMax < Min":    {RetryMin: time.Second, RetryMax: time.Millisecond},
		"AutoCreateStep":    {AutoCreateStep: -5},
	} {
		if _, err := segment.New(f, o); !errors.Is(err, segment.ErrBadOptions) {
			t.Errorf("%s: New = %v, want ErrBadOptions", name, err)
		}
	}
	if _, err := segment.New(nil, segment.Options{}); !errors.Is(err, segment.ErrBadOptions) {
		t.Errorf("New(nil store) = %v", err)
	}
}

func TestBadKeys(t *testing.T) {
	t.Parallel()
	f, a, _ := setup(t, 10, segment.Options{AutoCreate: true})
	long := string(make([]byte, 129))
	for _, key := range []string{"", long, "a\x00b", "\xff"} {
		if _, err := a.Next(context.Background(), key); !errors.Is(err, segment.ErrBadKey) {
			t.Errorf("Next(%q) = %v, want ErrBadKey", key, err)
		}
	}
	if rows, _ := f.List(context.Background()); len(rows) != 1 {
		t.Fatalf("bad keys changed the store: %+v", rows)
	}
}

func TestStatsAndDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, a, _ := setup(t, 100, segment.Options{Step: segment.StepPolicy{Fixed: true}})
	k, _ := a.Key("k")
	take(t, k, 101) // second buffer current: [101, 201)
	st := a.Stats()
	if len(st) != 1 {
		t.Fatalf("Stats = %+v", st)
	}
	s := st[0]
	cur := s.Buffers[s.Slot]
	if !s.InitOK || s.Key != "k" || s.Step != 100 || s.MinStep != 100 || cur.Pos != 102 || cur.Max != 201 || cur.Step != 100 || !cur.Ready {
		t.Fatalf("Stats = %+v", s)
	}
	if s.Loads < 2 || s.Remaining < 99 {
		t.Fatalf("Stats counters = %+v", s)
	}
	rows, err := a.Keys(ctx)
	if err != nil || len(rows) != 1 || rows[0].MaxID < 201 {
		t.Fatalf("Keys = %+v, %v", rows, err)
	}
	if err := a.DeleteKey(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Next(ctx, "k"); !errors.Is(err, segment.ErrUnknownKey) {
		t.Fatalf("Next after DeleteKey = %v, want ErrUnknownKey", err)
	}
	if _, err := f.Get(ctx, "k"); !errors.Is(err, segment.ErrUnknownKey) {
		t.Fatalf("store row survived DeleteKey: %v", err)
	}
	if err := a.CreateKey(ctx, segment.KeyInfo{Key: "n", Step: 0}); !errors.Is(err, segment.ErrBadStep) {
		t.Fatalf("CreateKey(step 0) = %v", err)
	}
	if _, err := a.Describe(ctx, ""); !errors.Is(err, segment.ErrBadKey) {
		t.Fatalf("Describe(\"\") = %v", err)
	}
}

// TestStoreWentBack: a store whose max_id moves back (restored backup,
// Redis without fsync) would make the Allocator repeat IDs; it refuses the
// segment, raises the store above what it leased at once and goes on:
// no caller sees an error, none sees a repeat.
func TestStoreWentBack(t *testing.T) {
	t.Parallel()
	f, a, _ := setup(t, 10, segment.Options{Step: segment.StepPolicy{Fixed: true}, RetryMin: time.Second, RetryMax: time.Second})
	k, _ := a.Key("k")
	seen := map[int64]bool{}
	for _, id := range take(t, k, 11) { // [1,11) used, [11,21) current, below its trigger
		seen[id] = true
	}
	f.set(func(f *fakeStore) { r := f.rows["k"]; r.MaxID = 5; f.rows["k"] = r }) // a restore from backup
	for _, id := range take(t, k, 30) {                                          // the next load gets [5,15): refused, raised to 21
		if seen[id] {
			t.Fatalf("ID %d issued twice after the store went back", id)
		}
		seen[id] = true
	}
	st := k.Stats()
	if st.WentBack != 1 || st.LastWentBack != [2]int64{15, 21} {
		t.Fatalf("WentBack = %d, LastWentBack = %v; want 1, [15 21] (store max_id 15 after the refused [5,15), mark 21)", st.WentBack, st.LastWentBack)
	}
}

// Readiness over many keys asks the store once a second, not once a key,
// and still says when a row is missing or the store fails.
func TestRowReadyShared(t *testing.T) {
	f, a, clk := setup(t, 10, segment.Options{})
	ctx := context.Background()
	for i := 0; i < 100; i++ {
		if err := a.RowReady(ctx, "k"); err != nil {
			t.Fatal(err)
		}
	}
	if f.lists != 1 {
		t.Fatalf("100 readiness checks listed the store %d times, want 1", f.lists)
	}
	if err := a.RowReady(ctx, "nosuch"); !errors.Is(err, segment.ErrUnknownKey) {
		t.Fatalf("a key without a row: %v, want ErrUnknownKey", err)
	}
	f.set(func(f *fakeStore) { f.listErr = errors.New("store down") })
	if err := a.RowReady(ctx, "k"); err != nil {
		t.Fatalf("within the second the listing is reused: %v", err)
	}
	clk.Advance(time.Second)
	if err := a.RowReady(ctx, "k"); err == nil || !strings.Contains(err.Error(), "store down") {
		t.Fatalf("after a second, with the store down: %v", err)
	}
	if f.lists != 2 {
		t.Fatalf("%d listings, want 2", f.lists)
	}
}

// A listing that outlasts the probe that started it is not thrown away:
// it finishes in the background and the next probe uses it, and a listing
// that took long is kept ten times as long. A probe of 100,000 keys on a
// loaded machine never finished its listing within its 2 s, so the server
// never reported ready.
func TestRowReadySlowListing(t *testing.T) {
	f, a, clk := setup(t, 10, segment.Options{})
	gate := make(chan struct{})
	f.set(func(f *fakeStore) {
		f.onList = func() {
			<-gate
			clk.Advance(500 * time.Millisecond) // the listing took 0.5 s
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.RowReady(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a probe whose context ended during the listing: %v, want context.Canceled", err)
	}
	close(gate)
	for i := 0; i < 3; i++ {
		if err := a.RowReady(context.Background(), "k"); err != nil {
			t.Fatalf("after the listing finished: %v", err)
		}
	}
	if f.lists != 1 {
		t.Fatalf("the store was listed %d times, want 1 (the listing the first probe started)", f.lists)
	}
	clk.Advance(4 * time.Second) // 4 s after the listing: within 10 × 0.5 s
	f.set(func(f *fakeStore) { f.onList = nil; f.listErr = errors.New("store down") })
	if err := a.RowReady(context.Background(), "k"); err != nil {
		t.Fatalf("4 s after a listing that took 0.5 s: %v, want it reused", err)
	}
	clk.Advance(time.Second)
	if err := a.RowReady(context.Background(), "k"); err == nil || !strings.Contains(err.Error(), "store down") {
		t.Fatalf("5 s after a listing that took 0.5 s, with the store down: %v", err)
	}
}

// The rows of many keys are created in calls of a bounded size, each
// under the store's own deadline, so the time allowed grows with the
// number of keys: in one call they ran past a SQL store's 5 s on a loaded
// machine and the server did not start.
func TestEnsureKeysManyUnderConstantDeadline(t *testing.T) {
	// 500 µs a row: 1,000 rows fit a 5 s deadline 10 times over, 20,000
	// rows (10 s) do not fit it at all.
	s := &slowBatchStore{fakeStore: newFake(), perRow: 500 * time.Microsecond, deadline: 5 * time.Second} // sqldb.DefaultTimeout
	a, err := segment.New(s, segment.Options{Clock: clock.NewFake(epoch)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	const n = 20000
	keys := make([]segment.KeyInfo, n)
	for i := range keys {
		keys[i] = segment.KeyInfo{Key: fmt.Sprintf("k%d", i), Step: 10}
	}
	if err := s.Create(context.Background(), keys[n/2]); err != nil { // one exists already
		t.Fatal(err)
	}
	rows, err := a.EnsureKeys(context.Background(), keys)
	if err != nil {
		t.Fatalf("EnsureKeys of %d keys: %v", n, err)
	}
	if len(rows) != n {
		t.Fatalf("%d rows after EnsureKeys of %d keys, want %d", len(rows), n, n)
	}
	for _, k := range keys {
		if _, ok := rows[k.Key]; !ok {
			t.Fatalf("no row for %s", k.Key)
		}
	}
	if s.calls < 2 {
		t.Fatalf("%d CreateMissing calls for %d keys, want them split", s.calls, n)
	}
}

// EnsureKeys hands each prepared row to Known once.
func TestKnownOnce(t *testing.T) {
	_, a, _ := setup(t, 10, segment.Options{})
	if _, err := a.EnsureKeys(context.Background(), []segment.KeyInfo{{Key: "k", Step: 10}, {Key: "new", Step: 5}}); err != nil {
		t.Fatal(err)
	}
	if r, ok := a.Known("new"); !ok || r.Step != 5 {
		t.Fatalf("Known(new) = %+v, %v", r, ok)
	}
	if _, ok := a.Known("new"); ok {
		t.Fatal("Known reported a row twice")
	}
}
