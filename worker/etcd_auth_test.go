package worker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/testkit/testserver"
)

// The credentials of an etcd URL: inline, from password_file, none; and
// clear refusals that never echo a password.
func TestEtcdAuthURL(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("from-file\n"), 0o600)
	for _, c := range []struct{ url, user, pass string }{
		{"etcd://h1:2379,h2:2379/idmint?name=a", "", ""},
		{"etcd://idmint:inline@h1:2379,h2:2379/idmint", "idmint", "inline"},
		{"etcd://idmint@h1:2379/idmint?name=a&password_file=" + pw, "idmint", "from-file"},
	} {
		u, p, err := EtcdAuth(c.url)
		if err != nil || u != c.user || p != c.pass {
			t.Errorf("%s: %q %q %v, want %q %q", c.url, u, p, err, c.user, c.pass)
		}
		eps, _, _, err := EtcdURL(c.url)
		if err != nil || strings.Contains(strings.Join(eps, ","), "@") {
			t.Errorf("%s: endpoints %v %v", c.url, eps, err)
		}
	}
	for _, c := range []struct{ url, want string }{
		{"etcd://idmint@h1:2379/idmint", "has no password"},
		{"etcd://idmint@h1:2379/idmint?password_file=" + filepath.Join(dir, "nope"), "password_file"},
		{"etcd://idmint:inline@h1:2379/idmint?password_file=" + pw, "both a password"},
	} {
		_, _, err := EtcdAuth(c.url)
		if !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "inline") {
			t.Errorf("%s: err = %v, want ErrBadURL saying %q, no password", c.url, err, c.want)
		}
	}
	if _, err := Open(context.Background(), "etcd://h1:2379/idmint?nonsense=1"); err == nil || !strings.Contains(err.Error(), "password_file") {
		t.Errorf("the unknown-parameter error does not list password_file: %v", err)
	}
}

// A coordinator URL with credentials leases worker IDs from an etcd with
// authentication on; without them, or with a wrong password, it is refused.
func TestEtcdAuthLease(t *testing.T) {
	srv := testserver.Start(t, testserver.Etcd)
	pw := testserver.EnableEtcdAuth(t, srv.Addr(), "idmint", "idmint-pw", "/idmint/")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := Open(ctx, "etcd://idmint@"+srv.Addr()+"/idmint?name=auth&ttl=2s&password_file="+pw)
	if err != nil {
		t.Fatalf("with credentials: %v", err)
	}
	l, err := a.Acquire(ctx, 32)
	if err != nil {
		t.Fatalf("lease with credentials: %v", err)
	}
	if l.ID() < 0 || l.ID() >= 32 {
		t.Fatalf("worker id %d out of range", l.ID())
	}
	l.Close()
	a.Close()
	if a, err := Open(ctx, "etcd://"+srv.Addr()+"/idmint?name=auth&timeout=2s"); err == nil {
		_, err = a.Acquire(ctx, 32)
		a.Close()
		if err == nil {
			t.Fatal("etcd with authentication leased a worker ID to a client without credentials")
		}
	}
	if _, err := Open(ctx, "etcd://idmint:wrong@"+srv.Addr()+"/idmint?name=auth&timeout=2s"); err == nil {
		t.Fatal("a wrong etcd password was accepted")
	}
}
