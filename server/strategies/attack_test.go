package strategies

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/ordernum"
	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/segment/stores"
	"github.com/idmint/idmint/server"
)

// Attacks on order-number keys through the admin API and the config
// (idmint issue 11, items 1, 3 and 5). Each case reproduces a hole that
// was open and asserts it is closed.

// createKey POSTs a key to /v1/keys (as a loopback admin) and returns the
// status and body.
func createKey(t *testing.T, h http.Handler, body string) (int, string) {
	t.Helper()
	return get(t, h, "POST", "/v1/keys", body)
}

func orderKeyJSON(name string, opts map[string]string) string {
	b, _ := json.Marshal(map[string]any{"name": name, "strategy": "ordernum", "options": opts})
	return string(b)
}

// An API request can no longer make the server read a file it names:
// /dev/zero used to be read without limit (RSS past 1.9 GB), and a
// password file's first bytes came back in the error (`version "root"`).
func TestAttackOrdernumKeyFileFromAPI(t *testing.T) {
	t.Parallel()
	keyDir := t.TempDir()
	secretDir := t.TempDir()
	shadow := filepath.Join(secretDir, "shadow")
	if err := os.WriteFile(shadow, []byte("root:$6$rounds=5000$salt$hash:19000:0:99999:7:::\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A file inside key_dir that is not a key ring, and one too large.
	if err := os.WriteFile(filepath.Join(keyDir, "notes"), []byte("root:secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(keyDir, "big"), []byte("1:"+orderKey1+"\n"+strings.Repeat("#", 8<<10)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(keyDir, "good"), []byte("1:"+orderKey1+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, h := serveWith(t, nil, setup{keyDir: keyDir, env: map[string]string{"SECRET_VAR": "1:" + orderKey2}})

	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	cases := []struct {
		name string
		opts map[string]string
	}{
		{"dev-zero", map[string]string{"format": "length=16", "key_file": "/dev/zero"}},
		{"absolute", map[string]string{"format": "length=16", "key_file": shadow}},
		{"traversal", map[string]string{"format": "length=16", "key_file": "../" + filepath.Base(secretDir) + "/shadow"}},
		{"not-a-ring", map[string]string{"format": "length=16", "key_file": "notes"}},
		{"missing", map[string]string{"format": "length=16", "key_file": "nope"}},
		{"too-big", map[string]string{"format": "length=16", "key_file": "big"}},
		{"env", map[string]string{"format": "length=16", "key_env": "SECRET_VAR"}},
	}
	msgs := map[string]string{}
	for _, tc := range cases {
		code, body := createKey(t, h, orderKeyJSON("k"+strings.ReplaceAll(tc.name, "-", ""), tc.opts))
		if code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", tc.name, code, body)
		}
		for _, leak := range []string{"root", "secret", "$6$", "no such file", "permission", "not a regular"} {
			if strings.Contains(body, leak) {
				t.Errorf("%s: the answer leaks %q: %s", tc.name, leak, body)
			}
		}
		var e struct{ Error struct{ Message string } }
		json.Unmarshal([]byte(body), &e)
		msg, _, _ := strings.Cut(e.Error.Message, "(value")
		msgs[tc.name] = msg
	}
	// Inside key_dir, a missing file, a file that is no key ring and a
	// file too large answer alike: no oracle for what exists.
	if msgs["missing"] != msgs["not-a-ring"] || msgs["missing"] != msgs["too-big"] {
		t.Errorf("answers differ by file:\n missing: %s\n not a ring: %s\n too big: %s", msgs["missing"], msgs["not-a-ring"], msgs["too-big"])
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 64<<20 {
		t.Errorf("heap grew by %d MiB refusing key files", grew>>20)
	}
	// A bare name in key_dir is how an API key gets a key file.
	if code, body := createKey(t, h, orderKeyJSON("kgood", map[string]string{"format": "length=16", "key_file": "good"})); code != http.StatusCreated {
		t.Fatalf("key file in key_dir: %d %s", code, body)
	}
	if code, body := get(t, h, "GET", "/v1/keys/kgood/ids?count=3", ""); code != 200 {
		t.Fatalf("issue: %d %s", code, body)
	}
}

// Without key_dir, an API key can have no key file at all.
func TestAttackOrdernumKeyFileNoKeyDir(t *testing.T) {
	t.Parallel()
	_, h := serveWith(t, nil, setup{})
	if code, body := createKey(t, h, orderKeyJSON("k", map[string]string{"format": "length=16", "key_file": "good"})); code != http.StatusBadRequest || !strings.Contains(body, "key_dir") {
		t.Fatalf("%d %s, want 400 naming key_dir", code, body)
	}
}

// Config key files are bounded too: /dev/zero and a FIFO are refused at
// once (not read forever, not blocked on), and a password file named by
// mistake is not echoed.
func TestAttackOrdernumKeyFileInConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	shadow := filepath.Join(dir, "shadow")
	os.WriteFile(shadow, []byte("root:$6$salt$hash:19000:0:99999:7:::\n"), 0o600)
	big := filepath.Join(dir, "big")
	os.WriteFile(big, make([]byte, 1<<20), 0o600)
	keys := map[string]server.KeyConfig{
		"zero":   {Strategy: "ordernum", Options: map[string]string{"format": "length=16", "key_file": "/dev/zero"}},
		"shadow": {Strategy: "ordernum", Options: map[string]string{"format": "length=16", "key_file": shadow}},
		"big":    {Strategy: "ordernum", Options: map[string]string{"format": "length=16", "key_file": big}},
	}
	done := make(chan map[string]server.Problem, 1)
	go func() { done <- problemsOf(t, keys, nil, nil) }()
	var got map[string]server.Problem
	select {
	case got = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("checking a config with key_file /dev/zero did not finish in 10 s")
	}
	wantProblems(t, got, "keys.zero.options.key_file", "keys.shadow.options.key_file", "keys.big.options.key_file")
	for _, p := range got {
		if strings.Contains(p.String(), "root") || strings.Contains(p.String(), "$6$") {
			t.Errorf("problem echoes the file: %s", p)
		}
	}
}

// Two keys on one key material would issue identical order numbers (same
// permutation, both sequences start at 1): refused in the config, through
// the API against the config, and between two API keys.
func TestAttackOrdernumSharedMaterial(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "ring")
	os.WriteFile(file, []byte("1:"+orderKey1+"\n"), 0o600)
	got := problemsOf(t, map[string]server.KeyConfig{
		"a": {Strategy: "ordernum", Options: map[string]string{"format": "length=16", "key_file": file}},
		"b": {Strategy: "ordernum", Options: map[string]string{"format": "length=16", "key_file": file}},
		"c": {Strategy: "ordernum", Options: map[string]string{"format": "length=12", "key": orderKey1}},
		"d": {Strategy: "ordernum", Options: map[string]string{"format": "length=16", "key": orderKey2}},
	}, nil, nil)
	wantProblems(t, got, "keys.a.options.key_file", "keys.b.options.key_file", "keys.c.options.key")
	if p, bad := got["keys.d.options.key"]; bad {
		t.Errorf("a key with its own material is refused: %s", p)
	}

	_, h := serveWith(t, map[string]server.KeyConfig{
		"cfg": {Strategy: "ordernum", Options: map[string]string{"format": "length=16", "key": orderKey1}},
	}, setup{})
	if code, body := createKey(t, h, orderKeyJSON("api1", map[string]string{"format": "length=16", "key": orderKey1})); code != http.StatusBadRequest {
		t.Errorf("API key on a config key's material: %d %s, want 400", code, body)
	}
	if code, body := createKey(t, h, orderKeyJSON("api2", map[string]string{"format": "length=16", "key": orderKey2})); code != http.StatusCreated {
		t.Fatalf("%d %s", code, body)
	}
	code, body := createKey(t, h, orderKeyJSON("api3", map[string]string{"format": "length=16", "key": orderKey2}))
	if code != http.StatusBadRequest || !strings.Contains(body, "api2") {
		t.Errorf("second API key on one material: %d %s, want 400 naming api2", code, body)
	}
	if strings.Contains(body, orderKey2) {
		t.Errorf("the answer shows key material: %s", body)
	}
	// Deleting the first frees the material.
	if code, body := get(t, h, "DELETE", "/v1/keys/api2", ""); code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", code, body)
	}
	if code, body := createKey(t, h, orderKeyJSON("api3", map[string]string{"format": "length=16", "key": orderKey2})); code != http.StatusCreated {
		t.Errorf("material of a deleted key: %d %s", code, body)
	}
}

// A segment key named like an order-number key's legacy daily row
// (orderno:YYYYMMDD) used to share that row: it revealed the volume and
// advanced the sequence. Now it is a sequence of its own, and the
// order-number key's row lives where no key name can point.
func TestAttackOrdernumSequenceNamespace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clk := clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	const spec = "length=16,date=yyMMdd"
	_, h := serveWith(t, map[string]server.KeyConfig{
		"orderno": {Strategy: "ordernum", Step: 10, Options: map[string]string{"format": spec, "key": orderKey1}},
	}, setup{clk: clk, dir: dir})
	hammer(t, h, "orderno", 50, 4) // 1,600 order numbers
	code, body := createKey(t, h, `{"name":"orderno:20261130","strategy":"segment","step":1}`)
	if code != http.StatusCreated {
		t.Fatalf("%d %s", code, body)
	}
	_, body = get(t, h, "GET", "/v1/keys/orderno:20261130/ids", "")
	var b struct{ IDs []string }
	json.Unmarshal([]byte(body), &b)
	if len(b.IDs) != 1 || b.IDs[0] != "1" {
		t.Fatalf("a segment key named like the legacy row starts at %v, want 1 (a fresh sequence that reveals nothing): %s", b.IDs, body)
	}
	for _, name := range []string{"ordernum/orderno/20261130", "ordernum/orderno"} {
		if err := server.CheckName(name); err == nil {
			t.Errorf("%s is a valid key name: a segment key could name the order-number row", name)
		}
	}
}

// A legacy row (NAME:YYYYMMDD) is continued, never restarted: numbers
// issued before the upgrade are not issued again.
func TestOrdernumContinuesLegacyRow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	day := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const spec = "length=16,date=yyMMdd"
	a, err := stores.OpenAllocator(context.Background(), "sqlite://"+filepath.Join(dir, "seg.db"), segment.Options{CloseStore: true})
	if err != nil {
		t.Fatal(err)
	}
	f := ordernum.MustParseFormat(spec)
	legacy := ordernum.SequenceKey("orderno", f, day)
	if err := a.CreateKey(context.Background(), segment.KeyInfo{Key: legacy, Step: 10, MaxID: 5001}); err != nil {
		t.Fatal(err)
	}
	a.Close()
	_, h := serveWith(t, map[string]server.KeyConfig{
		"orderno": {Strategy: "ordernum", Step: 10, Options: map[string]string{"format": spec, "key": orderKey1}},
	}, setup{clk: clock.NewFake(day), dir: dir})
	key, _ := ordernum.ParseKey(0, orderKey1)
	codec, _ := ordernum.New(f, key)
	for _, id := range hammer(t, h, "orderno", 10, 2) {
		p, err := codec.Decode(id)
		if err != nil || p.Seq < 5001 {
			t.Fatalf("%s decodes to %+v %v: sequence below the legacy row's max_id 5001 (issued again)", id, p, err)
		}
	}
}

// Bad input on key creation is 400 naming the field, never 503; --check
// (Validate) and serve agree on order-number key names of 111–128 bytes.
func TestAttackKeyCreationBadInput(t *testing.T) {
	t.Parallel()
	_, h := serveWith(t, nil, setup{})
	long := strings.Repeat("n", ordernum.MaxSequenceBase+1)
	for name, body := range map[string]string{
		"description-257": fmt.Sprintf(`{"name":"s1","strategy":"segment","options":{"description":%q}}`, strings.Repeat("d", 257)),
		"description-nul": `{"name":"s2","strategy":"segment","options":{"description":"a\u0000b"}}`,
		"ordernum-desc":   orderKeyJSON("o1", map[string]string{"format": "length=16", "key": orderKey3, "description": strings.Repeat("d", 300)}),
		"ordernum-name":   orderKeyJSON(long, map[string]string{"format": "length=16", "key": orderKey3}),
	} {
		code, out := createKey(t, h, body)
		if code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", name, code, out)
		}
	}
	// The longest name serves; one byte more is refused by Validate,
	// exactly as serve would.
	ok := strings.Repeat("n", ordernum.MaxSequenceBase)
	got := problemsOf(t, map[string]server.KeyConfig{
		ok:   {Strategy: "ordernum", Options: map[string]string{"format": "length=16,date=yyyyMMdd", "key": orderKey1}},
		long: {Strategy: "ordernum", Options: map[string]string{"format": "length=16,date=yyyyMMdd", "key": orderKey2}},
	}, nil, nil)
	wantProblems(t, got, "keys."+long)
	if p, bad := got["keys."+ok]; bad {
		t.Fatalf("a %d-byte name is refused: %s", len(ok), p)
	}
	_, h2 := serveWith(t, map[string]server.KeyConfig{
		ok: {Strategy: "ordernum", Options: map[string]string{"format": "length=16,date=yyyyMMdd", "key": orderKey1}},
	}, setup{})
	if code, body := get(t, h2, "GET", "/v1/keys/"+ok+"/ids", ""); code != 200 {
		t.Fatalf("%d-byte name: %d %s", len(ok), code, body)
	}
}

// The admin views never show inline key material.
func TestAttackAdminViewsRedactKey(t *testing.T) {
	t.Parallel()
	_, h := serveWith(t, map[string]server.KeyConfig{
		"o": {Strategy: "ordernum", Options: map[string]string{"format": "length=16", "key": orderKey1}},
	}, setup{})
	if code, body := createKey(t, h, orderKeyJSON("p", map[string]string{"format": "length=16", "key": orderKey2})); code != http.StatusCreated || strings.Contains(body, orderKey2) {
		t.Errorf("create answers %d %s", code, body)
	}
	for _, page := range []string{"/v1/keys", "/v1/keys/o", "/v1/keys/p", "/db", "/cache"} {
		if _, body := get(t, h, "GET", page, ""); strings.Contains(body, orderKey1) || strings.Contains(body, orderKey2) {
			t.Errorf("%s shows key material: %s", page, body)
		}
	}
}

// /metrics must not reveal order-number volume: the per-route request
// counter used to rise by exactly the number of order numbers issued one
// at a time.
func TestAttackMetricsHideOrderVolume(t *testing.T) {
	t.Parallel()
	_, h := serveWith(t, map[string]server.KeyConfig{
		"orderno": {Strategy: "ordernum", Options: map[string]string{"format": "length=16", "key": orderKey1}},
	}, setup{})
	scrape := func() string {
		t.Helper()
		code, m := get(t, h, "GET", "/metrics", "")
		if code != 200 {
			t.Fatalf("/metrics: %d", code)
		}
		var keep []string
		for _, l := range strings.Split(m, "\n") {
			// Process and runtime figures move on their own.
			if strings.HasPrefix(l, "idmint_") {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	before := scrape()
	for i := 0; i < 37; i++ {
		if code, body := get(t, h, "GET", "/v1/keys/orderno/ids", ""); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
		if code, body := get(t, h, "HEAD", "/v1/keys/orderno/ids", ""); code != 200 {
			t.Fatalf("HEAD: %d %s", code, body)
		}
	}
	if after := scrape(); after != before {
		t.Errorf("/metrics changed while only order numbers were issued:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// The dashboard's state must not reveal order-number volume either: it
// read the counter /metrics leaves out ("issued": 50 after 50 numbers).
func TestAttackDashboardHidesOrderVolume(t *testing.T) {
	t.Parallel()
	_, h := serveWith(t, map[string]server.KeyConfig{
		"orderno": {Strategy: "ordernum", Options: map[string]string{"format": "length=16", "key": orderKey1}},
	}, setup{})
	for range 50 {
		if code, body := get(t, h, "GET", "/v1/keys/orderno/ids", ""); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
	}
	code, body := get(t, h, "GET", "/ui/api/state", "")
	if code != 200 {
		t.Fatalf("/ui/api/state: %d %s", code, body)
	}
	var st struct {
		Keys []struct {
			Name         string
			Issued       int64
			History      [][2]int64
			VolumeHidden bool `json:"volume_hidden"`
		}
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	for _, k := range st.Keys {
		if k.Name == "orderno" && (k.Issued != 0 || len(k.History) != 0 || !k.VolumeHidden) {
			t.Fatalf("the dashboard shows an order-number key's volume: issued %d, history %v, hidden %v", k.Issued, k.History, k.VolumeHidden)
		}
	}
}
