// Package segmenttest is the contract every segment.Store passes: the
// store's own operations (Leaf's allocation semantics, key admin, bad
// input, overflow, concurrent allocation) and Allocators running on it
// (three sharing one store, restart after close and after a crash).
package segmenttest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idmint/idmint/segment"
)

// Opener returns a new handle on one fresh, empty store each time it is
// called: separate connections to the same data, as separate processes
// would have. The suite closes the handles it opens.
type Opener func() segment.Store

// Run runs the contract. fresh must return an Opener for an empty store
// that no other test uses.
func Run(t *testing.T, fresh func(t *testing.T) Opener) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"Admin", testAdmin},
		{"LeafSemantics", testLeafSemantics},
		{"BadInput", testBadInput},
		{"Overflow", testOverflow},
		{"ConcurrentAllocate", testConcurrentAllocate},
		{"ThreeAllocators", testThreeAllocators},
		{"Restart", testRestart},
		{"UnknownKey", testUnknownKey},
		{"Remainder", testRemainder},
		{"Raise", testRaise},
		{"EnsureKeys", testEnsureKeys},
		{"BatchAllocate", testBatchAllocate},
		{"BatchConcurrent", testBatchConcurrent},
		{"ManyKeysAllocators", testManyKeysAllocators},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, fresh(t))
		})
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func openStore(t *testing.T, open Opener) segment.Store {
	s := open()
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func mustCreate(t *testing.T, s segment.Store, k segment.KeyInfo) {
	t.Helper()
	if err := s.Create(ctxT(t), k); err != nil {
		t.Fatalf("Create(%+v): %v", k, err)
	}
}

func maxID(t *testing.T, s segment.Store, key string) int64 {
	t.Helper()
	k, err := s.Get(ctxT(t), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return k.MaxID
}

func testAdmin(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := openStore(t, open)
	if rows, err := s.List(ctx); err != nil || len(rows) != 0 {
		t.Fatalf("List on an empty store = %v, %v", rows, err)
	}
	mustCreate(t, s, segment.KeyInfo{Key: "order", Step: 1000, Description: "orders"})
	mustCreate(t, s, segment.KeyInfo{Key: "msg", Step: 10, MaxID: 500})
	if err := s.Create(ctx, segment.KeyInfo{Key: "order", Step: 5}); !errors.Is(err, segment.ErrKeyExists) {
		t.Fatalf("second Create(order) = %v, want ErrKeyExists", err)
	}
	k, err := s.Get(ctx, "order")
	if err != nil {
		t.Fatal(err)
	}
	if k.Key != "order" || k.MaxID != segment.DefaultMaxID || k.Step != 1000 || k.Description != "orders" {
		t.Fatalf("Get(order) = %+v", k)
	}
	if k.UpdateTime.IsZero() {
		t.Errorf("Get(order).UpdateTime is zero")
	}
	rows, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Key != "msg" || rows[1].Key != "order" || rows[0].MaxID != 500 {
		t.Fatalf("List = %+v", rows)
	}
	if err := s.SetStep(ctx, "order", 2000); err != nil {
		t.Fatal(err)
	}
	if err := s.SetStep(ctx, "order", 2000); err != nil {
		t.Fatalf("SetStep to the same value: %v", err)
	}
	if k, _ := s.Get(ctx, "order"); k.Step != 2000 || k.MaxID != 1 {
		t.Fatalf("after SetStep: %+v", k)
	}
	if err := s.Delete(ctx, "msg"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "msg"); !errors.Is(err, segment.ErrUnknownKey) {
		t.Fatalf("Get(deleted) = %v, want ErrUnknownKey", err)
	}
	for name, err := range map[string]error{
		"Delete":  s.Delete(ctx, "msg"),
		"SetStep": s.SetStep(ctx, "nope", 5),
	} {
		if !errors.Is(err, segment.ErrUnknownKey) {
			t.Errorf("%s(unknown) = %v, want ErrUnknownKey", name, err)
		}
	}
	if _, err := s.Allocate(ctx, "nope", 0); !errors.Is(err, segment.ErrUnknownKey) {
		t.Errorf("Allocate(unknown) = %v, want ErrUnknownKey", err)
	}
}

// testLeafSemantics checks max_id moves as Leaf moves it: each allocation
// adds the step (the row's, or the one asked for) and the segment is
// [old max_id, new max_id); asking for a custom step leaves the step
// column alone (Leaf's updateMaxIdByCustomStepAndGetLeafAlloc).
func testLeafSemantics(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := openStore(t, open)
	mustCreate(t, s, segment.KeyInfo{Key: "leaf-test", Step: 2000})
	want := []struct {
		step           int64
		start, end, st int64
	}{
		{0, 1, 2001, 2000},
		{0, 2001, 4001, 2000},
		{4000, 4001, 8001, 2000},
		{1, 8001, 8002, 2000},
	}
	for _, w := range want {
		seg, err := s.Allocate(ctx, "leaf-test", w.step)
		if err != nil {
			t.Fatal(err)
		}
		if seg != (segment.Segment{Start: w.start, End: w.end, Step: w.st}) {
			t.Fatalf("Allocate(step %d) = %+v, want [%d, %d) step %d", w.step, seg, w.start, w.end, w.st)
		}
		if m := maxID(t, s, "leaf-test"); m != w.end {
			t.Fatalf("max_id = %d after Allocate, want %d", m, w.end)
		}
	}
}

func testBadInput(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := openStore(t, open)
	mustCreate(t, s, segment.KeyInfo{Key: "k", Step: 100})
	long := strings.Repeat("x", segment.MaxKeyLen+1)
	exact := strings.Repeat("y", segment.MaxKeyLen)
	mustCreate(t, s, segment.KeyInfo{Key: exact, Step: 1})
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"create empty key", s.Create(ctx, segment.KeyInfo{Key: "", Step: 1}), segment.ErrBadKey},
		{"create long key", s.Create(ctx, segment.KeyInfo{Key: long, Step: 1}), segment.ErrBadKey},
		{"create control char", s.Create(ctx, segment.KeyInfo{Key: "a\nb", Step: 1}), segment.ErrBadKey},
		{"create step 0", s.Create(ctx, segment.KeyInfo{Key: "z", Step: 0}), segment.ErrBadStep},
		{"create step -1", s.Create(ctx, segment.KeyInfo{Key: "z", Step: -1}), segment.ErrBadStep},
		{"create step 2^31", s.Create(ctx, segment.KeyInfo{Key: "z", Step: math.MaxInt32 + 1}), segment.ErrBadStep},
		{"create max_id -1", s.Create(ctx, segment.KeyInfo{Key: "z", Step: 1, MaxID: -1}), segment.ErrBadMaxID},
		{"set step 0", s.SetStep(ctx, "k", 0), segment.ErrBadStep},
		{"set step 2^62", s.SetStep(ctx, "k", 1<<62), segment.ErrBadStep},
		{"set step empty key", s.SetStep(ctx, "", 5), segment.ErrBadKey},
		{"delete long key", s.Delete(ctx, long), segment.ErrBadKey},
	}
	_, err := s.Allocate(ctx, "k", -5)
	cases = append(cases, struct {
		name      string
		err, want error
	}{"allocate step -5", err, segment.ErrBadStep})
	_, err = s.Allocate(ctx, "k", math.MaxInt64)
	cases = append(cases, struct {
		name      string
		err, want error
	}{"allocate step 2^63-1", err, segment.ErrBadStep})
	_, err = s.Allocate(ctx, "", 0)
	cases = append(cases, struct {
		name      string
		err, want error
	}{"allocate empty key", err, segment.ErrBadKey})
	_, err = s.Get(ctx, long)
	cases = append(cases, struct {
		name      string
		err, want error
	}{"get long key", err, segment.ErrBadKey})
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, c.err, c.want)
		}
	}
	// No state changed.
	rows, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Key != "k" || rows[0].MaxID != 1 || rows[0].Step != 100 {
		t.Fatalf("rows after bad input = %+v", rows)
	}
	if _, err := s.Allocate(ctx, exact, 0); err != nil {
		t.Fatalf("Allocate on a %d-byte key: %v", segment.MaxKeyLen, err)
	}
}

func testOverflow(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := openStore(t, open)
	top := int64(math.MaxInt64 - 10)
	mustCreate(t, s, segment.KeyInfo{Key: "edge", Step: 100, MaxID: top})
	for _, step := range []int64{0, 11, segment.MaxStep} {
		if _, err := s.Allocate(ctx, "edge", step); !errors.Is(err, segment.ErrOverflow) {
			t.Fatalf("Allocate(step %d) at max_id 2^63-11 = %v, want ErrOverflow", step, err)
		}
		if m := maxID(t, s, "edge"); m != top {
			t.Fatalf("max_id moved to %d on a refused allocation", m)
		}
	}
	seg, err := s.Allocate(ctx, "edge", 10)
	if err != nil {
		t.Fatal(err)
	}
	if seg.Start != top || seg.End != math.MaxInt64 {
		t.Fatalf("last segment = %+v, want [%d, 2^63-1)", seg, top)
	}
	if _, err := s.Allocate(ctx, "edge", 1); !errors.Is(err, segment.ErrOverflow) {
		t.Fatalf("Allocate past 2^63-1 = %v, want ErrOverflow", err)
	}

	// An Allocator serves the last numbers and then reports the overflow.
	mustCreate(t, s, segment.KeyInfo{Key: "edge2", Step: 4, MaxID: math.MaxInt64 - 6})
	a, err := segment.New(s, segment.Options{Step: segment.StepPolicy{Fixed: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var got []int64
	for {
		id, err := a.Next(ctx, "edge2")
		if err != nil {
			if !errors.Is(err, segment.ErrOverflow) {
				t.Fatalf("Next at the end of int64 = %v, want ErrOverflow", err)
			}
			break
		}
		got = append(got, id)
		if len(got) > 10 {
			t.Fatalf("issued past the end: %v", got)
		}
	}
	want := []int64{math.MaxInt64 - 6, math.MaxInt64 - 5, math.MaxInt64 - 4, math.MaxInt64 - 3}
	if !slices.Equal(got, want) {
		t.Fatalf("IDs at the end = %v, want %v", got, want)
	}
}

func testConcurrentAllocate(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := openStore(t, open)
	const step, workers, each = 7, 6, 15
	mustCreate(t, s, segment.KeyInfo{Key: "c", Step: step})
	var mu sync.Mutex
	var segs []segment.Segment
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := open()
			defer h.Close()
			for range each {
				seg, err := h.Allocate(ctx, "c", 0)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				segs = append(segs, seg)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	slices.SortFunc(segs, func(a, b segment.Segment) int { return int(a.Start - b.Start) })
	next := int64(1)
	for _, sg := range segs {
		if sg.Start != next || sg.End != next+step {
			t.Fatalf("segments overlap or leave a hole at %d: %+v", next, sg)
		}
		next = sg.End
	}
	if m := maxID(t, s, "c"); m != next || next != 1+workers*each*step {
		t.Fatalf("max_id = %d, segments end at %d, want %d", m, next, 1+workers*each*step)
	}
}

// testThreeAllocators runs three Allocators, each on its own store handle,
// with several goroutines each using Next, NextN and Range; every ID is
// collected: no duplicates, and each goroutine sees strictly increasing IDs.
func testThreeAllocators(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := openStore(t, open)
	mustCreate(t, s, segment.KeyInfo{Key: "shared", Step: 50})
	const allocators, goroutines, calls = 3, 4, 400
	results := make([][]int64, allocators*goroutines)
	var wg sync.WaitGroup
	errs := make(chan error, allocators*goroutines)
	for i := range allocators {
		a, err := segment.New(openStore(t, open), segment.Options{LoadAt: 0.2 * float64(i+1)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				k, err := a.Key("shared")
				if err != nil {
					errs <- err
					return
				}
				var ids []int64
				buf := make([]int64, 7)
				for c := range calls {
					switch c % 3 {
					case 0:
						id, err := k.Next(ctx)
						if err != nil {
							errs <- err
							return
						}
						ids = append(ids, id)
					case 1:
						n, err := k.NextN(ctx, buf)
						if err != nil {
							errs <- err
							return
						}
						ids = append(ids, buf[:n]...)
					case 2:
						b, err := k.Range(ctx, 30)
						if err != nil {
							errs <- err
							return
						}
						for v := b.Start; v < b.End; v += b.Step {
							ids = append(ids, v)
						}
					}
				}
				results[i*goroutines+g] = ids
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for gi, ids := range results {
		for j, id := range ids {
			if j > 0 && id <= ids[j-1] {
				t.Fatalf("goroutine %d: ID %d after %d: not increasing", gi, id, ids[j-1])
			}
			if prev, dup := seen[id]; dup {
				t.Fatalf("ID %d issued twice (goroutines %d and %d)", id, prev, gi)
			}
			seen[id] = gi
		}
	}
	if len(seen) == 0 {
		t.Fatal("no IDs")
	}
	t.Logf("%d unique IDs from %d allocators", len(seen), allocators)
}

// testRestart closes one Allocator mid-segment and abandons another
// without closing it (a crash); Allocators started afterwards repeat
// nothing.
func testRestart(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := openStore(t, open)
	mustCreate(t, s, segment.KeyInfo{Key: "r", Step: 1000})
	seen := map[int64]string{}
	take := func(name string, a *segment.Allocator, n int) {
		t.Helper()
		for range n {
			id, err := a.Next(ctx, "r")
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if prev, dup := seen[id]; dup {
				t.Fatalf("%s repeated %d, issued by %s", name, id, prev)
			}
			seen[id] = name
		}
	}
	newA := func() *segment.Allocator {
		a, err := segment.New(openStore(t, open), segment.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	a := newA()
	take("first", a, 150) // mid-segment, next segment loaded in the background
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Next(ctx, "r"); !errors.Is(err, segment.ErrClosed) {
		t.Fatalf("Next after Close = %v, want ErrClosed", err)
	}
	b := newA()
	take("after close", b, 1500)
	// Abandon b without closing (its buffers and loader stay as a crashed
	// process's would), start c, and keep using both.
	t.Cleanup(func() { b.Close() })
	c := newA()
	defer c.Close()
	take("after crash", c, 1200)
	take("abandoned", b, 700)
	take("after crash", c, 300)
}

func testUnknownKey(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := openStore(t, open)
	a, err := segment.New(s, segment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Next(ctx, "ghost"); !errors.Is(err, segment.ErrUnknownKey) {
		t.Fatalf("Next(unknown) = %v, want ErrUnknownKey", err)
	}
	if rows, _ := s.List(ctx); len(rows) != 0 {
		t.Fatalf("Next(unknown) created rows: %+v", rows)
	}
	if st := a.Stats(); len(st) != 0 {
		t.Fatalf("an unknown key stays cached: %+v", st)
	}
	if _, err := a.Next(ctx, ""); !errors.Is(err, segment.ErrBadKey) {
		t.Fatalf("Next(\"\") = %v, want ErrBadKey", err)
	}
	auto, err := segment.New(s, segment.Options{AutoCreate: true, AutoCreateStep: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer auto.Close()
	id, err := auto.Next(ctx, "fresh")
	if err != nil || id != segment.DefaultMaxID {
		t.Fatalf("auto-create Next = %d, %v; want %d", id, err, segment.DefaultMaxID)
	}
	if k, err := s.Get(ctx, "fresh"); err != nil || k.Step != 20 {
		t.Fatalf("auto-created row = %+v, %v", k, err)
	}
}

func testRemainder(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := openStore(t, open)
	mustCreate(t, s, segment.KeyInfo{Key: "odd", Step: 9})
	seen := map[int64]bool{}
	for rem := range int64(2) {
		a, err := segment.New(s, segment.Options{Delta: 2, Remainder: rem})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		prev := int64(-1)
		for range 40 {
			id, err := a.Next(ctx, "odd")
			if err != nil {
				t.Fatal(err)
			}
			if id%2 != rem || id <= prev || seen[id] {
				t.Fatalf("remainder %d: got %d after %d (seen before: %v)", rem, id, prev, seen[id])
			}
			seen[id], prev = true, id
		}
		b, err := a.Range(ctx, "odd", 3)
		if err != nil || b.Step != 2 || b.Start%2 != rem || b.Start <= prev {
			t.Fatalf("Range with Delta 2 = %+v, %v", b, err)
		}
	}
}

// Broken returns a Store whose every call fails with err. An Opener that
// cannot open its store inside a goroutine (where t.Fatal is not allowed)
// reports the error with t.Errorf and returns Broken(err).
func Broken(err error) segment.Store { return broken{err} }

type broken struct{ err error }

func (b broken) Allocate(context.Context, string, int64) (segment.Segment, error) {
	return segment.Segment{}, b.err
}
func (b broken) Create(context.Context, segment.KeyInfo) error { return b.err }
func (b broken) Get(context.Context, string) (segment.KeyInfo, error) {
	return segment.KeyInfo{}, b.err
}
func (b broken) List(context.Context) ([]segment.KeyInfo, error) { return nil, b.err }
func (b broken) SetStep(context.Context, string, int64) error    { return b.err }
func (b broken) Delete(context.Context, string) error            { return b.err }
func (b broken) Close() error                                    { return nil }
func (b broken) Raise(context.Context, string, int64) (int64, error) {
	return 0, b.err
}

// testRaise checks the repair a witness asks of a store that went back:
// max_id moves up, never down, and the next segment starts there.
func testRaise(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := openStore(t, open)
	mustCreate(t, s, segment.KeyInfo{Key: "r", Step: 10})
	if before, err := s.Raise(ctx, "r", 5000); err != nil || before != 1 {
		t.Fatalf("Raise(5000) = %d, %v; want before 1", before, err)
	}
	if got := maxID(t, s, "r"); got != 5000 {
		t.Fatalf("max_id after Raise = %d; want 5000", got)
	}
	if before, err := s.Raise(ctx, "r", 100); err != nil || before != 5000 {
		t.Fatalf("Raise(100) = %d, %v; want before 5000", before, err)
	}
	if got := maxID(t, s, "r"); got != 5000 {
		t.Fatalf("Raise below max_id moved it to %d", got)
	}
	seg, err := s.Allocate(ctx, "r", 0)
	if err != nil || seg.Start != 5000 || seg.End != 5010 {
		t.Fatalf("Allocate after Raise = %+v, %v; want [5000, 5010)", seg, err)
	}
	if _, err := s.Raise(ctx, "nope", 10); !errors.Is(err, segment.ErrUnknownKey) {
		t.Fatalf("Raise of an unknown key: %v; want ErrUnknownKey", err)
	}
	if _, err := s.Raise(ctx, "r", -1); !errors.Is(err, segment.ErrBadMaxID) {
		t.Fatalf("Raise to -1: %v; want ErrBadMaxID", err)
	}
	if _, err := s.Raise(ctx, "", 10); !errors.Is(err, segment.ErrBadKey) {
		t.Fatalf("Raise of an empty key: %v; want ErrBadKey", err)
	}
}

// testEnsureKeys: many keys at once (over several batches), some existing:
// the missing ones are created, the existing ones keep their rows, and a
// second call changes nothing.
func testEnsureKeys(t *testing.T, open Opener) {
	s := openStore(t, open)
	a, err := segment.New(s, segment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, segment.KeyInfo{Key: "k7", MaxID: 5000, Step: 10})
	var want []segment.KeyInfo
	for i := 0; i < 450; i++ {
		want = append(want, segment.KeyInfo{Key: fmt.Sprintf("k%d", i), Step: 100, Description: "batch"})
	}
	rows, err := a.EnsureKeys(ctxT(t), want)
	if err != nil {
		t.Fatalf("EnsureKeys: %v", err)
	}
	if len(rows) != 450 {
		t.Fatalf("%d rows after EnsureKeys of 450 keys, want 450", len(rows))
	}
	if r := rows["k7"]; r.MaxID != 5000 || r.Step != 10 {
		t.Errorf("existing row changed: %+v", r)
	}
	if r := rows["k449"]; r.MaxID != segment.DefaultMaxID || r.Step != 100 || r.Description != "batch" {
		t.Errorf("created row: %+v", r)
	}
	if _, err := a.EnsureKeys(ctxT(t), want); err != nil {
		t.Fatalf("EnsureKeys again: %v", err)
	}
	if got := maxID(t, s, "k7"); got != 5000 {
		t.Errorf("k7 max_id %d after a second EnsureKeys, want 5000", got)
	}
	if _, err := a.EnsureKeys(ctxT(t), []segment.KeyInfo{{Key: "", Step: 1}}); !errors.Is(err, segment.ErrBadKey) {
		t.Errorf("EnsureKeys with an empty key: %v, want ErrBadKey", err)
	}
	// One CreateMissing over more rows than a store puts in one
	// transaction (SQL stores: 1,000), the existing ones among them.
	if b, ok := s.(segment.BatchCreator); ok {
		var more []segment.KeyInfo
		for i := 0; i < 2100; i++ {
			more = append(more, segment.KeyInfo{Key: fmt.Sprintf("k%d", i), Step: 7})
		}
		if err := b.CreateMissing(ctxT(t), more); err != nil {
			t.Fatalf("CreateMissing of 2,100 keys: %v", err)
		}
		list, err := s.List(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2100 {
			t.Fatalf("%d rows after CreateMissing of 2,100 keys, want 2100", len(list))
		}
		if got := maxID(t, s, "k7"); got != 5000 {
			t.Errorf("k7 max_id %d after CreateMissing, want 5000", got)
		}
		if r, err := s.Get(ctxT(t), "k2099"); err != nil || r.Step != 7 {
			t.Errorf("k2099 after CreateMissing: %+v, %v", r, err)
		}
	}
}
