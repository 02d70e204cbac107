package ticket

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/sqldb"
)

// fake is an in-memory ticket server: a counter stepping by step from
// offset, which can be taken down or made to misbehave.
type fake struct {
	mu      sync.Mutex
	next    int64
	step    int64
	down    bool
	calls   int
	forced  []int64 // returned instead of the counter, once each
	openErr error
}

func (f *fake) tickets(ctx context.Context, dst []int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.down {
		return 0, errors.New("fake: connection refused")
	}
	if len(f.forced) > 0 {
		dst[0], f.forced = f.forced[0], f.forced[1:]
		return 1, nil
	}
	for i := range dst {
		dst[i] = f.next
		f.next += f.step
	}
	return len(dst), nil
}

func (f *fake) close() error { return nil }

func (f *fake) raise(_ context.Context, atLeast int64) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	before := f.next
	if f.next < atLeast {
		f.next = firstAtLeast(atLeast, f.next%f.step, f.step)
	}
	return before, nil
}

func (f *fake) set(down bool) { f.mu.Lock(); f.down = down; f.mu.Unlock() }

func openFakes(t *testing.T, clk clock.Clock, n int) (*Ticket, []*fake) {
	t.Helper()
	fakes := make([]*fake, n)
	cfg := Config{Clock: clk}
	for i := range n {
		fakes[i] = &fake{next: int64(i + 1), step: int64(n)}
		cfg.Servers = append(cfg.Servers, Server{URL: "fake://" + string(rune('a'+i))})
	}
	tk, err := open(context.Background(), cfg, func(_ context.Context, _ Config, s Server, _ connHook) (source, error) {
		f := fakes[s.Offset-1]
		if f.openErr != nil {
			return nil, f.openErr
		}
		return f, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tk.Close() })
	return tk, fakes
}

func TestConfigInvalid(t *testing.T) {
	good := "mysql://root@127.0.0.1:1/db"
	for _, tc := range []struct {
		name  string
		cfg   Config
		field string
	}{
		{"no servers", Config{}, "servers"},
		{"step below servers", Config{Servers: []Server{{URL: good}, {URL: good}}, Step: 1}, `step "1" is less than the 2 servers`},
		{"step too large", Config{Servers: []Server{{URL: good}}, Step: 70000}, "step"},
		{"offset above step", Config{Servers: []Server{{URL: good, Offset: 3}}, Step: 2}, "servers[0].offset"},
		{"negative offset", Config{Servers: []Server{{URL: good, Offset: -1}}}, "servers[0].offset"},
		{"duplicate offset", Config{Servers: []Server{{URL: good, Offset: 2}, {URL: good, Offset: 2}}, Step: 3}, "servers[1].offset"},
		{"implicit duplicate", Config{Servers: []Server{{URL: good}, {URL: good, Offset: 1}}}, "servers[1].offset"},
		{"empty url", Config{Servers: []Server{{}}}, "servers[0].url"},
		{"table injection", Config{Servers: []Server{{URL: good}}, Table: "t`; DROP"}, "table"},
		{"sequence injection", Config{Servers: []Server{{URL: good}}, Sequence: "s'); --"}, "sequence"},
		{"long stub", Config{Servers: []Server{{URL: good}}, Stub: "ab"}, "stub"},
		{"quote stub", Config{Servers: []Server{{URL: good}}, Stub: "'"}, "stub"},
		{"conns", Config{Servers: []Server{{URL: good}}, Conns: -1}, "conns"},
		{"backoff", Config{Servers: []Server{{URL: good}}, BackoffMin: time.Second, BackoffMax: time.Millisecond}, "backoff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(context.Background(), tc.cfg)
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("Open = %v, want ErrConfig", err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name %q", err, tc.field)
			}
		})
	}
}

func TestBadURLs(t *testing.T) {
	ctx := context.Background()
	for _, u := range []string{"nonsense", "ftp://host/db", "mysql://", "postgres://host"} {
		if _, err := Open(ctx, Config{Servers: []Server{{URL: u}}}); !errors.Is(err, sqldb.ErrURL) {
			t.Errorf("Open(%q) = %v, want sqldb.ErrURL", u, err)
		}
	}
	_, err := Open(ctx, Config{Servers: []Server{{URL: "sqlite://" + t.TempDir() + "/t.db"}}})
	if !errors.Is(err, ErrConfig) {
		t.Errorf("Open(sqlite) = %v, want ErrConfig", err)
	}
}

func TestRoundRobinUnique(t *testing.T) {
	tk, fakes := openFakes(t, clock.NewFake(time.Unix(0, 0)), 3)
	ctx := context.Background()
	seen := map[int64]bool{}
	for range 300 {
		id, err := tk.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if seen[id] {
			t.Fatalf("duplicate %d", id)
		}
		seen[id] = true
	}
	for i, f := range fakes {
		if f.calls != 100 {
			t.Errorf("server %d served %d of 300, want 100 (round-robin)", i, f.calls)
		}
	}
}

// TestBackoff takes one of two servers down: requests move to the other,
// the down one is skipped for a doubling back-off on the fake clock, and
// serves again once it is back and its back-off has passed.
func TestBackoff(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	tk, fakes := openFakes(t, clk, 2)
	ctx := context.Background()
	fakes[1].set(true)
	for range 10 {
		id, err := tk.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if id%2 != 1 {
			t.Fatalf("got %d from the down server", id)
		}
	}
	if c := fakes[1].calls; c != 1 {
		t.Errorf("down server was tried %d times within its back-off, want 1", c)
	}
	st := tk.Status()
	if st[1].Up || st[1].Failures != 1 || st[1].Err == nil || !st[0].Up {
		t.Errorf("status %+v: want server 1 up, server 2 down with one failure", st)
	}
	clk.Advance(DefaultBackoffMin) // back-off over; still down: it doubles
	for range 4 {
		if _, err := tk.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if c := fakes[1].calls; c != 2 {
		t.Errorf("down server tried %d times, want 2", c)
	}
	clk.Advance(DefaultBackoffMin) // half the doubled back-off: still skipped
	if _, err := tk.Next(ctx); err != nil {
		t.Fatal(err)
	}
	if c := fakes[1].calls; c != 2 {
		t.Errorf("down server tried %d times during its doubled back-off, want 2", c)
	}
	fakes[1].set(false)
	clk.Advance(DefaultBackoffMin)
	even := 0
	for range 10 {
		id, err := tk.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if id%2 == 0 {
			even++
		}
	}
	if even < 4 {
		t.Errorf("returned server served %d of 10, want about half", even)
	}
	if !tk.Status()[1].Up {
		t.Error("server 2 still reported down")
	}
}

func TestAllDown(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	tk, fakes := openFakes(t, clk, 2)
	ctx := context.Background()
	fakes[0].set(true)
	fakes[1].set(true)
	if _, err := tk.Next(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Next = %v, want ErrUnavailable", err)
	}
	// Both backing off: the next request still probes them, so a server
	// that is back serves at once.
	fakes[0].set(false)
	if id, err := tk.Next(ctx); err != nil || id != 1 {
		t.Fatalf("Next = %d, %v; want 1 from the recovered server", id, err)
	}
}

func TestResidueAndWentBack(t *testing.T) {
	tk, fakes := openFakes(t, clock.NewFake(time.Unix(0, 0)), 2)
	ctx := context.Background()
	fakes[1].set(true) // all requests go to server 1 (offset 1, odd IDs)
	fakes[0].forced = []int64{4}
	if _, err := tk.Next(ctx); !errors.Is(err, ErrResidue) {
		t.Fatalf("even ID from the odd server: %v, want ErrResidue", err)
	}
	for range 3 {
		if _, err := tk.Next(ctx); err != nil { // 1, 3, 5
			t.Fatal(err)
		}
	}
	// The server forgets (a failover to a lagging replica): it is raised
	// above what it gave at once, and the caller gets a fresh ID.
	fakes[0].mu.Lock()
	fakes[0].next = 3
	fakes[0].mu.Unlock()
	if id, err := tk.Next(ctx); err != nil || id != 7 {
		t.Fatalf("after the server went back to 3: %d, %v; want 7, the first odd ID above 5", id, err)
	}
	if st := tk.Status()[0]; st.WentBack != 1 {
		t.Fatalf("Status().WentBack = %d; want 1", st.WentBack)
	}
	// It answers the last ticket it gave once more: that is a repeat too.
	fakes[0].forced = []int64{7}
	if id, err := tk.Next(ctx); err != nil || id != 9 {
		t.Fatalf("after the server answered 7 again: %d, %v; want 9, the first odd ID above 7", id, err)
	}
	fakes[0].forced = []int64{-7}
	if _, err := tk.Next(ctx); !errors.Is(err, ErrExhausted) {
		t.Fatalf("negative ID: %v, want ErrExhausted", err)
	}
}

func TestOpenDegraded(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	fakes := []*fake{{next: 1, step: 2}, {next: 2, step: 2, openErr: errors.New("refused")}}
	cfg := Config{Clock: clk, Servers: []Server{{URL: "a"}, {URL: "b"}}}
	opener := func(_ context.Context, _ Config, s Server, _ connHook) (source, error) {
		f := fakes[s.Offset-1]
		if f.openErr != nil {
			return nil, f.openErr
		}
		return f, nil
	}
	tk, err := open(context.Background(), cfg, opener)
	if err != nil {
		t.Fatalf("Open with one of two servers reachable: %v", err)
	}
	defer tk.Close()
	if st := tk.Status(); st[1].Up {
		t.Errorf("unreachable server reported up: %+v", st)
	}
	fakes[1].openErr = nil
	clk.Advance(time.Minute)
	got := map[bool]bool{}
	for range 4 {
		id, err := tk.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got[id%2 == 0] = true
	}
	if !got[true] {
		t.Error("server opened late never served")
	}
	fakes[0].openErr, fakes[1].openErr = errors.New("x"), errors.New("y")
	if _, err := open(context.Background(), cfg, opener); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Open with no server reachable = %v, want ErrUnavailable", err)
	}
	tk.Close()
	if _, err := tk.Next(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Next after Close = %v, want ErrClosed", err)
	}
}
