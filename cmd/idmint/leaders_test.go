package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/idmint/idmint/monotonic"
	"github.com/idmint/idmint/testkit/testserver"
)

func TestLeadersBadFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--etcd or --coordinator"},
		{[]string{"--etcd", "nohost"}, `--etcd: "nohost"`},
		{[]string{"--coordinator", "file:///tmp/w"}, "--coordinator"},
		{[]string{"--etcd", "h:1", "--coordinator", "etcd://h"}, "give one"},
		{[]string{"--etcd", "h:1", "--prefix", "x"}, "--prefix"},
		{[]string{"--etcd", "h:1", "stray"}, "stray"},
	} {
		code, _, errOut := runCLI(t, append([]string{"leaders"}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("leaders %v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

// TestLeadersList: a monotonic key led by a node of this process shows
// with its leader, node name and bound, as a table and as JSON.
func TestLeadersList(t *testing.T) {
	addr := testserver.Addr(t, testserver.Etcd)
	parent := "/" + testserver.Prefix(t) + "/"
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	src, err := monotonic.NewEtcd(monotonic.EtcdConfig{Client: cli, Prefix: parent + "orders/", Name: "orders", TTL: 2 * time.Second,
		Advertise: "10.1.2.3:7070", NodeName: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var out string
	testserver.Eventually(t, "idmint leaders to name node-a", 15*time.Second, func() bool {
		var code int
		var errOut string
		code, out, errOut = runCLI(t, "leaders", "--etcd", addr, "--prefix", parent)
		if code != 0 {
			t.Fatalf("leaders: exit %d: %s", code, errOut)
		}
		return strings.Contains(out, "node-a")
	})
	for _, want := range []string{"KEY", "orders", "10.1.2.3:7070", "node-a"} {
		if !strings.Contains(out, want) {
			t.Fatalf("leaders output lacks %q:\n%s", want, out)
		}
	}
	code, js, errOut := runCLI(t, "leaders", "--etcd", addr, "--prefix", parent, "--json")
	var ls []monotonic.LeaderInfo
	if code != 0 || json.Unmarshal([]byte(js), &ls) != nil || len(ls) != 1 || ls[0].Leader != "10.1.2.3:7070" || ls[0].Bound < 1 || ls[0].Since.IsZero() {
		t.Fatalf("leaders --json: exit %d %s: %s", code, errOut, js)
	}
	if code, out, _ := runCLI(t, "leaders", "--etcd", addr, "--prefix", parent+"nothing/"); code != 0 || !strings.Contains(out, "no monotonic keys") || !strings.Contains(out, "try --coordinator") {
		t.Fatalf("empty prefix: exit %d:\n%s", code, out)
	}
}

// TestLeadersEscapesTerminalCodes: an election value written by anyone
// with access to etcd (here a node name holding escape sequences that
// retitle and clear a terminal) is printed quoted, never raw.
func TestLeadersEscapesTerminalCodes(t *testing.T) {
	addr := testserver.Addr(t, testserver.Etcd)
	parent := "/" + testserver.Prefix(t) + "/"
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	evil := "node\x1b]0;owned\x07\x1b[2J"
	src, err := monotonic.NewEtcd(monotonic.EtcdConfig{Client: cli, Prefix: parent + "orders/", Name: "orders", TTL: 2 * time.Second,
		Advertise: "10.1.2.3:7070", NodeName: evil})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var out string
	testserver.Eventually(t, "idmint leaders to show the leader's node name", 15*time.Second, func() bool {
		var code int
		code, out, _ = runCLI(t, "leaders", "--etcd", addr, "--prefix", parent)
		return code == 0 && strings.Contains(out, "owned") // the node name is recorded after the leader
	})
	if strings.ContainsAny(out, "\x1b\x07") {
		t.Fatalf("leaders printed terminal control characters raw: %q", out)
	}
	if !strings.Contains(out, `\x1b]0;owned`) {
		t.Fatalf("leaders output does not show the escaped node name: %q", out)
	}
}
