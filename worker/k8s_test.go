package worker

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/snowflake"
)

// TestStatefulSetOrdinal: the worker ID is the pod's ordinal plus offset,
// from the URL's pod name, the variable env= names, or $HOSTNAME.
func TestStatefulSetOrdinal(t *testing.T) {
	for _, c := range []struct {
		name, url string
		env       map[string]string
		want      int64
	}{
		{"pod", "k8s://idmint-2", nil, 2},
		{"pod with dashes", "k8s://my-id-set-17/", nil, 17},
		{"offset", "k8s://idmint-2?offset=10", nil, 12},
		{"bare ordinal", "k8s://0", nil, 0},
		{"env ordinal", "k8s://?env=POD_ORDINAL", map[string]string{"POD_ORDINAL": "3"}, 3},
		{"env pod name", "k8s://?env=POD_NAME&offset=1", map[string]string{"POD_NAME": "idmint-5"}, 6},
		{"HOSTNAME", "k8s://", map[string]string{"HOSTNAME": "idmint-4"}, 4},
		{"HOSTNAME, env beside", "k8s:///?offset=100", map[string]string{"HOSTNAME": "idmint-31"}, 131},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			u := c.url + sep(c.url) + "horizon=" + filepath.Join(t.TempDir(), "k8s.horizon")
			l, err := open(t, u).Acquire(context.Background(), 1023)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if l.ID() != c.want {
				t.Fatalf("%s: worker ID %d, want %d", u, l.ID(), c.want)
			}
		})
	}
}

func sep(u string) string {
	if strings.Contains(u, "?") {
		return "&"
	}
	return "?"
}

// TestStatefulSetBadURL: every malformed k8s:// URL, and a host name that
// is no StatefulSet pod's, fails with ErrBadURL naming the value.
func TestStatefulSetBadURL(t *testing.T) {
	t.Setenv("EMPTY_ORDINAL", "")
	t.Setenv("HOSTNAME", "laptop")
	for _, c := range []struct{ url, names string }{
		{"k8s://idmint", `pod name "idmint"`},
		{"k8s://idmint-", `pod name "idmint-"`},
		{"k8s://idmint-x", `pod name "idmint-x"`},
		{"k8s://idmint-2147483648", `pod name "idmint-2147483648"`},
		{"k8s://idmint-99999999999999999999", `pod name "idmint-99999999999999999999"`},
		{"k8s://idmint-+2", `pod name "idmint-+2"`},
		{"k8s://idmint-2?offset=-1", `offset "-1"`},
		{"k8s://idmint-2?offset=two", `offset "two"`},
		{"k8s://idmint-2?offset=2147483648", `offset "2147483648"`},
		{"k8s://?env=1BAD", `env "1BAD"`},
		{"k8s://?env=", `env ""`},
		{"k8s://?env=A-B", `env "A-B"`},
		{"k8s://idmint-2?env=POD", `pod "idmint-2" and env "POD"`},
		{"k8s://idmint-2?colour=red", `unknown parameter "colour" (want ttl, margin, timeout, holder, horizon, env, offset)`},
		{"k8s://idmint-2?horizon=", `horizon ""`},
		{"k8s://idmint-2?%zz", `query "%zz"`},
		{"k8s://?env=EMPTY_ORDINAL&horizon=memory", `env "EMPTY_ORDINAL" names an environment variable that is empty or unset`},
		{"k8s://?horizon=memory", `pod name "laptop"`},
	} {
		t.Run(c.url, func(t *testing.T) {
			a, err := Open(context.Background(), c.url)
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

// TestStatefulSetNeedsHorizon: like static://, k8s:// grants no lease
// without a place to keep its time horizon, and says how to give one.
func TestStatefulSetNeedsHorizon(t *testing.T) {
	t.Parallel()
	_, err := open(t, "k8s://idmint-1").Acquire(context.Background(), 1023)
	if !errors.Is(err, ErrNoHorizon) || !strings.Contains(err.Error(), "horizon=/var/lib/idmint/k8s.horizon") {
		t.Fatalf("err = %v; want ErrNoHorizon with a k8s horizon example", err)
	}
}

// TestStatefulSetRange: an ordinal past the layout's worker field is a
// *RangeError naming the pod, not a truncated ID.
func TestStatefulSetRange(t *testing.T) {
	t.Parallel()
	_, err := open(t, "k8s://idmint-30?offset=2&horizon=memory").Acquire(context.Background(), 31)
	var re *RangeError
	if !errors.As(err, &re) || re.ID != 32 || !strings.Contains(err.Error(), "idmint-30") {
		t.Fatalf("err = %v; want a RangeError for ID 32 naming the pod", err)
	}
}

// TestStatefulSetHorizonOnVolume is design.md U6 for k8s://: the pod's
// horizon file (on its volume) carries the horizon across a restart, so a
// pod rescheduled onto a node whose clock is an hour behind, after a
// kill -9, issues no ID it issued before.
func TestStatefulSetHorizonOnVolume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := "k8s://idmint-3?horizon=" + filepath.Join(t.TempDir(), "pvc", "worker-k8s.horizon")
	f1 := clock.NewFake(hz0)
	r1 := startFixed(t, u, "twitter", "worker", f1, snowflake.RollbackWait)
	seen := map[int64]bool{}
	var maxOld int64
	for range 3000 {
		id, err := r1.g.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen[id], maxOld = true, max(maxOld, id)
		f1.Advance(time.Millisecond)
	}
	r1.l.Close() // the flock goes with the process; nobody lowers the horizon
	r1.g.Close()

	f2 := clock.NewFake(hz0.Add(-time.Hour))
	r2 := startFixed(t, u, "twitter", "worker", f2, snowflake.RollbackLogical)
	if r2.l.ID() != 3 {
		t.Fatalf("restarted pod's worker ID %d, want 3", r2.l.ID())
	}
	dst := make([]int64, 3000)
	nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if n, err := r2.g.NextN(nctx, dst); n != len(dst) || err != nil {
		t.Fatalf("NextN after restart = %d, %v", n, err)
	}
	for _, id := range dst {
		if seen[id] || id <= maxOld {
			t.Fatalf("restarted pod issued %d; the first run issued up to %d (repeat: %v)", id, maxOld, seen[id])
		}
		seen[id] = true
	}
}

// TestStatefulSetSameOrdinal shows what k8s:// does and does not protect
// against. Two pods with one ordinal on one volume (one horizon file) are
// kept apart by its lock. Two pods with one ordinal on different volumes,
// as after a forced delete whose old pod still runs, both get the worker
// ID: the documented limitation (use etcd when that matters).
func TestStatefulSetSameOrdinal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	shared := filepath.Join(t.TempDir(), "worker-k8s.horizon")
	l1, err := open(t, "k8s://idmint-1?horizon="+shared).Acquire(ctx, 1023)
	if err != nil {
		t.Fatal(err)
	}
	defer l1.Close()
	if _, err := open(t, "k8s://idmint-1?horizon="+shared).Acquire(ctx, 1023); !errors.Is(err, ErrHeld) {
		t.Fatalf("second pod on the same horizon file: err = %v, want ErrHeld", err)
	}
	l2, err := open(t, "k8s://idmint-1?horizon="+filepath.Join(t.TempDir(), "other.horizon")).Acquire(ctx, 1023)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if l1.ID() != l2.ID() {
		t.Fatalf("pods with one ordinal on two volumes got IDs %d and %d; the README says they share one", l1.ID(), l2.ID())
	}
}
