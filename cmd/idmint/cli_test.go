package main

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/idmint/idmint/idparts"
)

// runCLI runs idmint with args and returns its exit status and output.
func runCLI(t testing.TB, args ...string) (int, string, string) {
	t.Helper()
	return runCLIEnv(t, nil, args...)
}

// runCLIEnv is runCLI with environment variables.
func runCLIEnv(t testing.TB, vars map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(k string) string { return vars[k] }}
	code := run(context.Background(), e, args)
	return code, out.String(), errb.String()
}

// Real IDs and what their issuers say they contain.
func TestDecodeRealIDs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want []string
	}{
		// Twitter API docs' example Tweet object: id 1050118621198921728,
		// created_at "Wed Oct 10 20:19:24 +0000 2018".
		{[]string{"decode", "1050118621198921728", "--layout", "twitter"},
			[]string{"time       2018-10-10T20:19:24.211Z", "datacenter 10", "node       27 (worker)", "sequence   0"}},
		// Discord's developer docs (Reference, Snowflakes): 175928847299117063
		// is 2016-04-30 11:18:25.796 UTC, worker 1, process 0, increment 7.
		{[]string{"decode", "--layout", "discord", "175928847299117063"},
			[]string{"time       2016-04-30T11:18:25.796Z", "node       1 (worker)", "process    0", "sequence   7"}},
	}
	for _, c := range cases {
		code, out, errOut := runCLI(t, c.args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, errOut)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: output lacks %q:\n%s", c.args, w, out)
			}
		}
	}
}

func TestDecodeJSON(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCLI(t, "decode", "175928847299117063", "--layout", "discord", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var a idparts.Answer
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatalf("not JSON: %v: %s", err, out)
	}
	want := idparts.Answer{ID: "175928847299117063", Layout: "discord", Time: "2016-04-30T11:18:25.796Z", UnixMs: "1462015105796",
		Node: 1, Sequence: 7, Extra: map[string]string{"process": "0"}}
	if !reflect.DeepEqual(a, want) {
		t.Fatalf("decoded %+v, want %+v", a, want)
	}
}

func TestGenSnowflakeRoundTrip(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCLI(t, "gen", "snowflake", "--layout", "twitter", "--node", "worker=3,datacenter=1", "--horizon", "memory", "-n", "1000")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Fields(out)
	if len(lines) != 1000 {
		t.Fatalf("got %d IDs, want 1000", len(lines))
	}
	var prev int64
	for _, l := range lines {
		id, err := strconv.ParseInt(l, 10, 64)
		if err != nil || id <= prev {
			t.Fatalf("ID %q not increasing after %d (%v)", l, prev, err)
		}
		prev = id
	}
	code, out, _ = runCLI(t, "decode", lines[0], "--layout", "twitter")
	if code != 0 || !strings.Contains(out, "datacenter 1\n") || !strings.Contains(out, "node       3 (worker)\n") {
		t.Fatalf("decode of a generated ID: exit %d\n%s", code, out)
	}
}

func TestGenHorizonFile(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/horizon"
	var last int64
	for run := 0; run < 2; run++ {
		code, out, errOut := runCLI(t, "gen", "snowflake", "--layout", "twitter", "--node", "worker=1,datacenter=1", "--horizon", path, "-n", "10")
		if code != 0 {
			t.Fatalf("run %d: exit %d: %s", run, code, errOut)
		}
		for _, l := range strings.Fields(out) {
			id, _ := strconv.ParseInt(l, 10, 64)
			if id <= last {
				t.Fatalf("run %d issued %d, not above %d from before", run, id, last)
			}
			last = id
		}
	}
}

func TestBadInputExits2(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want string // the flag or argument and the value the message must name
	}{
		{[]string{"nope"}, `"nope"`},
		{[]string{"gen"}, "missing kind"},
		{[]string{"gen", "rocket"}, `"rocket"`},
		{[]string{"gen", "snowflake", "--node", "worker=3,datacenter=1", "-n", "0"}, "-n: 0"},
		{[]string{"gen", "snowflake", "--node", "worker=3,datacenter=1", "-n", "x"}, `"x"`},
		{[]string{"gen", "snowflake", "--layout", "twitter", "--node", "worker=32,datacenter=1"}, "32"},
		{[]string{"gen", "snowflake", "--layout", "twitter", "--node", "worker=1"}, "datacenter"},
		{[]string{"gen", "snowflake", "--node", "worker=1024"}, "1024"},
		{[]string{"gen", "snowflake", "--layout", "nosuch"}, "nosuch"},
		{[]string{"gen", "snowflake", "--layout", "baidu", "--node", "worker=1"}, "baidu"},
		{[]string{"gen", "snowflake", "--node", "worker=a"}, "worker"},
		{[]string{"decode"}, "missing argument"},
		{[]string{"decode", "abc"}, `"abc"`},
		{[]string{"decode", "-5"}, "-5"},
		{[]string{"decode", "1", "--layout", "time=70:1ms,seq=12,epoch=2020-01-01"}, "70"},
		{[]string{"layouts", "--bogus"}, "bogus"},
	}
	for _, c := range cases {
		code, _, errOut := runCLI(t, c.args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", c.args, code, errOut)
			continue
		}
		if !strings.Contains(errOut, c.want) {
			t.Errorf("%v: stderr %q does not name %q", c.args, errOut, c.want)
		}
	}
}

func TestHelpAndVersion(t *testing.T) {
	t.Parallel()
	if code, out, _ := runCLI(t); code != 0 || !strings.Contains(out, "decode") {
		t.Fatalf("help: exit %d\n%s", code, out)
	}
	if code, out, _ := runCLI(t, "version"); code != 0 || !strings.HasPrefix(out, "idmint ") {
		t.Fatalf("version: exit %d %q", code, out)
	}
	if code, out, _ := runCLI(t, "layouts"); code != 0 || !strings.Contains(out, "EXPIRED") || !strings.Contains(out, "twitter") {
		t.Fatalf("layouts: exit %d\n%s", code, out)
	}
}

// FuzzArgs feeds arbitrary argument lists to the CLI: whatever they are, it
// must not panic, and it must exit 0, 1 or 2.
func FuzzArgs(f *testing.F) {
	f.Add("decode\x001050118621198921728\x00--layout\x00twitter")
	f.Add("gen\x00snowflake\x00--node\x00worker=1,datacenter=2\x00-n\x003")
	f.Add("gen\x00snowflake\x00--layout\x00time=41:1ms,worker=10,seq=12,epoch=2020-01-01")
	f.Add("layouts\x00--spec")
	f.Fuzz(func(t *testing.T, joined string) {
		args := strings.Split(joined, "\x00")
		for _, a := range args {
			if a == "serve" || a == "-n" { // never start servers or issue millions of IDs
				return
			}
		}
		code, _, _ := runCLI(t, args...)
		if code < 0 || code > 2 {
			t.Fatalf("%q: exit %d", args, code)
		}
	})
}

// Two runs in a row on one file coordinator: the first Close releases the
// horizon to its last ID, so the second issues at once and only above it.
func TestGenCoordinatorFileRestart(t *testing.T) {
	t.Parallel()
	url := "file://" + t.TempDir() + "/worker"
	var last int64
	for run := 0; run < 3; run++ {
		code, out, errOut := runCLI(t, "gen", "snowflake", "--layout", "twitter", "--node", "datacenter=1", "--coordinator", url, "-n", "100")
		if code != 0 {
			t.Fatalf("run %d: exit %d: %s", run, code, errOut)
		}
		for _, l := range strings.Fields(out) {
			id, _ := strconv.ParseInt(l, 10, 64)
			if id <= last {
				t.Fatalf("run %d issued %d, not above %d", run, id, last)
			}
			last = id
		}
	}
}

// TestDecodeUidGeneratorSample decodes the ID uid-generator's README prints
// from parseUID ({"UID":"180363646902239241", timestamp "2017-01-19
// 12:15:46" in the JVM's +08:00 zone, workerId "4", sequence "9"}) with the
// layout of the README's sample beans (timeBits 29, workerBits 21, seqBits
// 13, epochStr 2016-09-20, i.e. 2016-09-19T16:00:00Z), as
// docs/migrating-from-uid-generator.md tells teams to check theirs. The
// same ID read with the class defaults (the built-in baidu layout) gives a
// plausible but wrong time, which is why the guide says to check a known ID.
func TestDecodeUidGeneratorSample(t *testing.T) {
	t.Parallel()
	const readme = "time=29:1s,worker=21,seq=13,epoch=2016-09-19T16:00:00Z,name=uid"
	for _, c := range []struct {
		layout string
		want   idparts.Answer
	}{
		{readme, idparts.Answer{ID: "180363646902239241", Layout: "uid", Time: "2017-01-19T04:15:46Z", UnixMs: "1484799346000", Node: 4, Sequence: 9}},
		{"baidu", idparts.Answer{ID: "180363646902239241", Layout: "baidu", Time: "2016-07-19T10:07:53Z", UnixMs: "1468922873000", Node: 4, Sequence: 9}},
	} {
		code, out, errOut := runCLI(t, "decode", "--json", "--layout", c.layout, "180363646902239241")
		if code != 0 {
			t.Fatalf("--layout %s: exit %d: %s", c.layout, code, errOut)
		}
		var a idparts.Answer
		if err := json.Unmarshal([]byte(out), &a); err != nil {
			t.Fatalf("--layout %s: not JSON: %v: %s", c.layout, err, out)
		}
		if !reflect.DeepEqual(a, c.want) {
			t.Errorf("--layout %s: decoded %+v, want %+v", c.layout, a, c.want)
		}
	}
}
