package worker

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestOpenBadURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ url, names string }{
		{"", "no scheme"},
		{"3", "no scheme"},
		{"nosuch://x", `scheme "nosuch"`},
		{"static://", `worker id ""`},
		{"static://-1", `worker id "-1"`},
		{"static://abc", `worker id "abc"`},
		{"static://3?ttl=fast", `ttl "fast"`},
		{"static://3?ttl=0s", `ttl "0s"`},
		{"static://3?colour=red", `unknown parameter "colour"`},
		{"static://3?horizon=", `horizon ""`},
		{"ip://10.0.0.1?horizon=", `horizon ""`},
		{"file:///var/x?horizon=/h", `unknown parameter "horizon"`},
		{"file://host/var/x", `host "host"`},
		{"file:///var/x?id=-2", `id "-2"`},
		{"file:///var/x?id=one", `id "one"`},
		{"etcd://", "host is empty"},
		{"etcd://h:99999/x", `host "h:99999"`},
		{"etcd://h:2379/x?name=a/b", `name "a/b"`},
		{"etcd://h:2379/x?endpoint=1", `unknown parameter "endpoint"`},
		{"zk://h:2181", "path is empty"},
		{"zk://h:2181/", "path is empty"},
		{"zk:///snowflake/x", "host is empty"},
		{"zk://h:2181/snowflake/x?timeout=soon", `timeout "soon"`},
		{"ip://300.1.1.1", `address "300.1.1.1"`},
		{"ip://::1", `address "::1"`},
		{"mac://zz:zz", `address "zz:zz"`},
		{"mac://00:00:5e:00:53:01:02:03", `address "00:00:5e:00:53:01:02:03"`},
		{"postgres://h:5432/db?ttl=x", `ttl "x"`},
	} {
		t.Run(c.url, func(t *testing.T) {
			a, err := Open(context.Background(), c.url, WithTimeout(200*time.Millisecond))
			if err == nil {
				a.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), c.names) {
				t.Fatalf("err = %v; want ErrBadURL naming %s", err, c.names)
			}
		})
	}
}

func TestOpenUnreachable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().String()
	l.Close() // nothing listens there now
	const timeout = 500 * time.Millisecond
	for _, u := range []string{
		"etcd://" + port + "/idmint?name=x",
		"zk://" + port + "/snowflake/x",
		"postgres://u@" + port + "/db?sslmode=disable",
		"mysql://u@" + port + "/db",
	} {
		t.Run(strings.SplitN(u, ":", 2)[0], func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			a, err := Open(context.Background(), u, WithTimeout(timeout))
			if err == nil {
				a.Close()
				t.Fatal("Open succeeded against a closed port")
			}
			// A generous bound: the point is "fails within the timeout",
			// not a performance figure.
			if el := time.Since(start); el > 10*timeout {
				t.Fatalf("Open took %v with a %v timeout", el, timeout)
			}
			if errors.Is(err, ErrBadURL) {
				t.Fatalf("unreachable reported as a bad url: %v", err)
			}
		})
	}
}

func TestStaticIPMAC(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		url    string
		max    int64
		id     int64
		outOfR bool
	}{
		{"static://3?horizon=memory", 31, 3, false},
		{"static://32?horizon=memory", 31, 0, true},
		{"ip://10.1.2.3?horizon=memory", 65535, 2<<8 | 3, false},
		{"ip://192.168.255.254?horizon=memory", 1023, 0, true},
		{"mac://02:00:00:00:01:02?horizon=memory", 1<<48 - 1, 0x020000000102, false},
	} {
		t.Run(c.url, func(t *testing.T) {
			a, err := Open(ctx, c.url)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			l, err := a.Acquire(ctx, c.max)
			if c.outOfR {
				var re *RangeError
				if !errors.As(err, &re) || !errors.Is(err, ErrOutOfRange) || re.Max != c.max {
					t.Fatalf("Acquire = %v, want *RangeError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if l.ID() != c.id || !l.Valid() {
				t.Fatalf("ID = %d (valid %v), want %d", l.ID(), l.Valid(), c.id)
			}
			if _, err := a.Acquire(ctx, c.max); !errors.Is(err, ErrHeld) {
				t.Fatalf("second Acquire = %v, want ErrHeld", err)
			}
		})
	}
}

func TestFileAssignerKeepsIDAndHorizon(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state", "worker")
	a, err := Open(ctx, "file://"+path+"?id=5")
	if err != nil {
		t.Fatal(err)
	}
	l, err := a.Acquire(ctx, 31)
	if err != nil {
		t.Fatal(err)
	}
	if l.ID() != 5 {
		t.Fatalf("ID = %d, want 5", l.ID())
	}
	h := time.Date(2030, 1, 1, 0, 0, 0, 123, time.UTC)
	if _, err := l.Extend(ctx, h); err != nil {
		t.Fatal(err)
	}
	// A second process (another assigner on the same file) is refused
	// while the first holds it.
	b, _ := NewFile(path, 9)
	if _, err := b.Acquire(ctx, 31); !errors.Is(err, ErrHeld) {
		t.Fatalf("concurrent Acquire = %v, want ErrHeld", err)
	}
	gen := l.Generation()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Restart: same ID (the initial id of the new assigner is ignored),
	// larger generation, the horizon it recorded.
	l2, err := b.Acquire(ctx, 31)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	got, _ := l2.Load(ctx)
	if l2.ID() != 5 || l2.Generation() <= gen || !got.Equal(h) {
		t.Fatalf("after restart: ID %d gen %d (was %d) horizon %v; want 5, >%d, %v", l2.ID(), l2.Generation(), gen, got, gen, h)
	}
	hs, err := b.List(ctx)
	if err != nil || len(hs) != 1 || hs[0].ID != 5 || !hs[0].Live || !hs[0].Horizon.Equal(h) {
		t.Fatalf("List = %+v, %v", hs, err)
	}
	// A layout too narrow for the stored ID.
	l2.Close()
	if _, err := b.Acquire(ctx, 3); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Acquire with max 3 = %v, want ErrOutOfRange", err)
	}
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"static://3", "file:///x?id=2", "etcd://a:1,b:2/p?name=n&ttl=3s", "zk://h/snowflake/a?endpoint=1.2.3.4:5",
		"ip://10.0.0.1", "mac://02:00:00:00:00:01?horizon=/h", "static://3?horizon=%2Fa%23b", "sqlite:///x.db?ttl=2s", "mysql://u@tcp(h:1)/d", "%", "etcd://[::1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		open, err := parseURL(s, nil)
		if (open == nil) == (err == nil) {
			t.Fatalf("parseURL(%q) = (opener %v, %v)", s, open != nil, err)
		}
		if err != nil && !errors.Is(err, ErrBadURL) && !errors.Is(err, ErrBadOption) && !strings.HasPrefix(err.Error(), "worker: ") {
			t.Fatalf("parseURL(%q) error lacks the package prefix: %v", s, err)
		}
	})
}

// TestFixedWithoutHorizonRefused: static, ip and mac have no coordinator to
// keep the time horizon in; without a horizon file (or an explicit
// horizon=memory) Acquire refuses, saying how to supply one, instead of
// granting a lease that a restart with the clock set back would reuse.
func TestFixedWithoutHorizonRefused(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		url string
		max int64
	}{
		{"static://3", 31},
		{"ip://10.1.2.3", 65535},
		{"mac://02:00:00:00:01:02", 1<<48 - 1},
	} {
		t.Run(c.url, func(t *testing.T) {
			a, err := Open(ctx, c.url)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			l, err := a.Acquire(ctx, c.max)
			if !errors.Is(err, ErrNoHorizon) {
				if l != nil {
					l.Close()
				}
				t.Fatalf("Acquire without a horizon = %v, want ErrNoHorizon", err)
			}
			for _, want := range []string{"?horizon=/", "horizon=memory"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			// The refusal held nothing: the same assigner refuses again
			// the same way, not with ErrHeld.
			if _, err := a.Acquire(ctx, c.max); !errors.Is(err, ErrNoHorizon) {
				t.Fatalf("second Acquire = %v, want ErrNoHorizon again", err)
			}
		})
	}
	if _, err := NewStatic(1, WithMemoryHorizon(), WithHorizonFile("/x")); !errors.Is(err, ErrBadOption) {
		t.Fatalf("memory and file horizon together = %v, want ErrBadOption", err)
	}
}

// TestMultiHostURLs: etcd and ZooKeeper URLs name a cluster as a host list,
// as the README shows; url.Parse alone refuses "h1:2379,h2:2379" as a port.
func TestMultiHostURLs(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"etcd://h1:2379,h2:2379,h3:2379/idmint?name=app",
		"etcd://h1,h2/idmint",
		"zk://zk1:2181,zk2:2181/snowflake/app?endpoint=10.0.0.7:8080",
	} {
		if _, err := parseURL(u, nil); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	if _, err := parseURL("etcd://h1:2379,:2379/idmint", nil); !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), `":2379"`) {
		t.Errorf("a host list with an empty host: %v, want ErrBadURL naming it", err)
	}
}
