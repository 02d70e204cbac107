//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idmint/idmint/testkit/testserver"
)

// TestFullDataDirectory runs `idmint serve` with its data directory on a
// 1 MiB tmpfs (the segment store is elsewhere, so the disk that fills is
// the one holding the witness's marks.log) and fills it while serving.
// Meanwhile every refusal is a 503 with a JSON error body, and one says
// the witness found no space; once space is freed the same process
// serves again; filled again, the process is killed (kill -9) and
// restarted after space is freed: it starts without a hand edit of
// marks.log, no ID is served twice, and every ID served is below its
// key's mark on disk. A key created through the API on the full disk is
// refused and absent after the restart; one created after space came
// back is in keys.json after a clean stop.
func TestFullDataDirectory(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", data).CombinedOutput(); err != nil {
		msg := fmt.Sprintf("cannot mount a 1 MiB tmpfs for the data directory (this test needs root, or a container allowed to mount): %v: %s", err, strings.TrimSpace(string(out)))
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", data).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", data, err, out)
		}
	})

	// 300 segment keys of step 10: every few requests of a key lease and
	// claim a new segment, so the log's lines cross a page boundary soon
	// after the disk is full (an append then fails half-way).
	const nkeys = 300
	var keys []string
	conf := &strings.Builder{}
	fmt.Fprintf(conf, "stores:\n  default: sqlite://%s\nkeys:\n", filepath.Join(t.TempDir(), "segments.db"))
	for i := range nkeys {
		k := fmt.Sprintf("k%03d", i)
		keys = append(keys, k)
		fmt.Fprintf(conf, "  %s: {strategy: segment, step: 10}\n", k)
	}
	cfg := filepath.Join(t.TempDir(), "idmint.yaml")
	if err := os.WriteFile(cfg, []byte(conf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := buildBinary(t)
	d := startDaemon(t, bin, "--config", cfg, "--data", data)

	hc := &http.Client{Timeout: 30 * time.Second}
	served := map[string][]int64{}
	// take asks key for n IDs; a 200 adds them to served, any other
	// answer must be a 503 with a JSON error body, whose message it
	// returns.
	take := func(d *daemon, key string, n int) (ok bool, refusal string) {
		t.Helper()
		resp, err := hc.Get(fmt.Sprintf("%s/v1/keys/%s/ids?count=%d", d.base, key, n))
		if err != nil {
			t.Fatalf("GET %s: %v; server log:\n%s", key, err, d.stderr)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusOK {
			var body struct{ IDs []string }
			if err := json.Unmarshal(b, &body); err != nil || len(body.IDs) != n {
				t.Fatalf("key %s: 200 with %q (%v); want %d IDs", key, b, err, n)
			}
			for _, s := range body.IDs {
				v, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					t.Fatalf("key %s: ID %q: %v", key, s, err)
				}
				served[key] = append(served[key], v)
			}
			return true, ""
		}
		var e errBody
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Content-Type") != "application/json" ||
			json.Unmarshal(b, &e) != nil || e.Error.Code != "unavailable" || e.Error.Message == "" || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("key %s on a full disk: %d %s %q; want 503, a JSON error body (code unavailable) and Retry-After", key, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
		return false, e.Error.Message
	}
	for _, k := range keys {
		if ok, msg := take(d, k, 5); !ok {
			t.Fatalf("key %s before the disk is full: %s", k, msg)
		}
	}
	// create asks the admin API (loopback, no admin token) for a uuid
	// key: it touches only the key journal in the data directory.
	create := func(d *daemon, name string) (int, []byte) {
		t.Helper()
		resp, err := hc.Post(d.base+"/v1/keys", "application/json", strings.NewReader(`{"name":"`+name+`","strategy":"uuid"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}

	filler := filepath.Join(data, "filler")
	fill := func() {
		t.Helper()
		f, err := os.OpenFile(filler, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		chunk := make([]byte, 4096)
		for {
			if _, err := f.Write(chunk); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("fill the tmpfs: %v", err)
				}
				return
			}
		}
	}
	// untilRefused asks every key in turn until a refusal says the
	// witness found no space.
	untilRefused := func(d *daemon) string {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for i := 0; ; i++ {
			if time.Now().After(deadline) {
				t.Fatalf("no answer said the witness found no space within 2 minutes of filling the disk (%d requests); server log:\n%s", i, d.stderr)
			}
			if ok, msg := take(d, keys[i%nkeys], 5); !ok && strings.Contains(msg, "witness") && strings.Contains(msg, "no space left on device") {
				return msg
			}
		}
	}

	fill()
	msg := untilRefused(d)
	t.Logf("full disk, first answer naming the witness: %s", msg)
	// A key created on the full disk is refused, with a JSON error, and
	// is not there after the restart below.
	if code, b := create(d, "made-while-full"); code < 400 || json.Unmarshal(b, new(errBody)) != nil {
		t.Fatalf("create a key on a full disk: %d %q; want an error with a JSON body", code, b)
	} else {
		t.Logf("create a key on a full disk: %d %s", code, b)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	// The same process serves again once there is room: every key. The
	// first lines appended then follow the one the full disk cut short;
	// after each answer, every ID served must be below its key's mark in
	// the log as it stands (what a crash at that moment would leave).
	marksLog := filepath.Join(data, "marks.log")
	for _, k := range keys {
		testserver.Eventually(t, "key "+k+" to serve again once space was freed", time.Minute, func() bool {
			ok, _ := take(d, k, 5)
			return ok
		})
		checkMarks(t, served, readMarks(t, marksLog))
	}
	if code, b := create(d, "made-after"); code/100 != 2 {
		t.Fatalf("create a key once space was freed: %d %s", code, b)
	}

	// Full again, and the process dies while it is.
	fill()
	untilRefused(d)
	d.cmd.Process.Kill()
	<-d.done
	checkMarks(t, served, readMarks(t, marksLog))
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	d = startDaemon(t, bin, "--config", cfg, "--data", data)
	for _, k := range keys {
		if ok, msg := take(d, k, 25); !ok {
			t.Fatalf("key %s after the restart: %s; server log:\n%s", k, msg, d.stderr)
		}
	}
	for name, want := range map[string]int{"made-after": http.StatusOK, "made-while-full": http.StatusNotFound} {
		resp, err := hc.Get(d.base + "/v1/keys/" + name + "/ids")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("key %s after the restart: %s; want %d (made-after was created before the kill, made-while-full failed)", name, resp.Status, want)
		}
	}
	d.stop(t)
	// A clean stop folded the key journal into keys.json, which is all an
	// older release reads.
	if b, err := os.ReadFile(filepath.Join(data, "keys.json")); err != nil || !strings.Contains(string(b), `"made-after"`) || strings.Contains(string(b), "made-while-full") {
		t.Fatalf("keys.json after a clean stop: %q, %v; want key made-after in it, and not made-while-full", b, err)
	}
	total := checkMarks(t, served, readMarks(t, marksLog))
	t.Logf("%d IDs of %d keys, none twice, every one below its key's mark on disk", total, len(keys))
}

// checkMarks fails the test when an ID was served twice, or is not below
// its key's mark; it returns how many IDs were served.
func checkMarks(t *testing.T, served map[string][]int64, marks map[string]int64) int {
	t.Helper()
	total := 0
	for k, ids := range served {
		seen := make(map[int64]bool, len(ids))
		for _, v := range ids {
			if seen[v] {
				t.Fatalf("key %s: ID %d served twice", k, v)
			}
			seen[v] = true
			if m := marks["segment/"+k]; v >= m {
				t.Fatalf("key %s: ID %d served, but its mark in marks.log is %d: the claim that covered it is not in the log", k, v, m)
			}
		}
		total += len(ids)
	}
	return total
}

// errBody is the native API's error body.
type errBody struct {
	Error struct{ Code, Message, Field string }
}

// readMarks reads a witness log as OpenFile does: the largest mark per
// space; the part after the last newline (a line being appended, or torn
// by a crash) is not a mark yet.
func readMarks(t *testing.T, path string) map[string]int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	out := map[string]int64{}
	for n, ln := range lines[:len(lines)-1] {
		sp, val, ok := strings.Cut(ln, " ")
		space, err := url.QueryUnescape(sp)
		v, verr := strconv.ParseInt(val, 10, 64)
		if !ok || err != nil || verr != nil {
			t.Fatalf("%s line %d: %q is not \"space mark\": the log needs a hand edit", path, n+1, ln)
		}
		out[space] = max(out[space], v)
	}
	return out
}
