package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/idmint/idmint/idparts"
)

// Every text kind of `idmint gen` issues distinct IDs that `idmint decode`
// recognises by shape as the same format.
func TestGenDecodeFamily(t *testing.T) {
	t.Parallel()
	formatOf := map[string]string{"uuid-v1": "uuid", "uuid-v4": "uuid", "uuid-v6": "uuid", "uuid-v7": "uuid",
		"ulid": "ulid", "ksuid": "ksuid", "xid": "xid", "objectid": "objectid", "flake128": "flake128"}
	for kind, format := range formatOf {
		args := []string{"gen", kind, "-n", "500"}
		if kind == "flake128" {
			args = append(args, "--worker", "9")
		}
		code, out, errOut := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("gen %s: exit %d: %s", kind, code, errOut)
		}
		ids := strings.Fields(out)
		seen := map[string]bool{}
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("gen %s issued %s twice", kind, id)
			}
			seen[id] = true
		}
		if len(seen) != 500 {
			t.Fatalf("gen %s: %d IDs, want 500", kind, len(seen))
		}
		code, out, errOut = runCLI(t, "decode", ids[0])
		if code != 0 || !strings.Contains(out, "\n  layout     "+format+"\n") {
			t.Errorf("decode of %s %s: exit %d, %q %s", kind, ids[0], code, out, errOut)
		}
	}
}

// RFC 9562 Appendix A.6: the example UUIDv7 017F22E2-79B0-7CC3-98C4-DC0C0C07398F
// carries the time Tuesday, February 22, 2022 2:22:22.00 PM GMT-05:00.
func TestDecodeRFC9562Example(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCLI(t, "decode", "--json", "017F22E2-79B0-7CC3-98C4-DC0C0C07398F")
	if code != 0 || !strings.Contains(out, `"time":"2022-02-22T19:22:22Z"`) || !strings.Contains(out, `"version":"7"`) {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
}

func TestGenMember(t *testing.T) {
	t.Parallel()
	vars := map[string]string{geneSecretEnv: "000102030405060708090a0b0c0d0e0f"}
	code, out, errOut := runCLIEnv(t, vars, "gen", "timeid-gene", "--member", "alice", "-n", "50")
	if code != 0 || len(strings.Fields(out)) != 50 {
		t.Fatalf("exit %d: %q %s", code, out, errOut)
	}
	for _, c := range []struct {
		vars map[string]string
		args []string
		want string
	}{
		{nil, []string{"gen", "timeid-gene", "--member", "alice"}, geneSecretEnv},
		{vars, []string{"gen", "timeid-gene"}, "--member"},
		{nil, []string{"gen", "uuid-v4", "-n", "-1"}, "-n: -1"},
		{nil, []string{"decode", "--format", "nosuch", "x"}, `"nosuch"`},
		{nil, []string{"decode", "zzzz"}, "zzzz"},
		{nil, []string{"decode", "--format", "uuid", "017F22E2-79B0-7CC3-98C4"}, "uuid"},
	} {
		code, out, errOut := runCLIEnv(t, c.vars, c.args...)
		if code != 2 || !strings.Contains(out+errOut, c.want) {
			t.Errorf("%v: exit %d %q %q, want exit 2 naming %q", c.args, code, out, errOut, c.want)
		}
	}
}

// Instagram's layout with the shard taken from a shard key through the
// keyed gene: every ID of one key decodes to one shard, and different keys
// spread over shards.
func TestGenInstagramShardKey(t *testing.T) {
	t.Parallel()
	vars := map[string]string{geneSecretEnv: "000102030405060708090a0b0c0d0e0f"}
	shardOf := func(member string) string {
		code, out, errOut := runCLIEnv(t, vars, "gen", "snowflake", "--layout", "instagram", "--shard-key", member, "--horizon", "memory", "-n", "20")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		shards := map[string]bool{}
		for _, id := range strings.Fields(out) {
			_, dec, _ := runCLI(t, "decode", id, "--layout", "instagram", "--json")
			var a idparts.Answer // instagram's one node field, shard, is the node
			if err := json.Unmarshal([]byte(dec), &a); err != nil || a.Layout != "instagram" {
				t.Fatalf("decode %s: %v %q", id, err, dec)
			}
			shards[strconv.FormatInt(a.Node, 10)] = true
		}
		if len(shards) != 1 {
			t.Fatalf("member %s spread over shards %v", member, shards)
		}
		for s := range shards {
			return s
		}
		return ""
	}
	distinct := map[string]bool{}
	for _, m := range []string{"alice", "bob", "carol", "dave", "erin"} {
		distinct[shardOf(m)] = true
	}
	if len(distinct) < 2 {
		t.Fatalf("five members all on shard %v", distinct)
	}
	if code, _, errOut := runCLIEnv(t, vars, "gen", "snowflake", "--shard-key", "alice", "--node", "worker=1,datacenter=1"); code != 2 || !strings.Contains(errOut, "shard field") {
		t.Fatalf("twitter layout with --shard-key: exit %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "gen", "snowflake", "--layout", "instagram", "--shard-key", "alice"); code != 2 || !strings.Contains(errOut, geneSecretEnv) {
		t.Fatalf("no gene secret: exit %d %s", code, errOut)
	}
}
