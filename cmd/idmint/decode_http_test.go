package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/monotonic"
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/server/strategies"
)

// decodeServer is a real idmint server (the registry serve builds, the
// default snowflake key on leaf) behind an httptest listener.
func decodeServer(t *testing.T) string {
	t.Helper()
	reg := server.NewRegistry()
	if err := strategies.Register(reg); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := &server.Config{DataDir: dir, Coordinator: "static://7",
		Stores: map[string]string{"default": "sqlite://" + filepath.Join(dir, "seg.db")},
		Keys:   map[string]server.KeyConfig{"snowflake": {Strategy: "snowflake", Layout: defaultLayout}}}
	cfg.SetDefaults()
	s, err := server.New(context.Background(), server.Options{Config: cfg, Registry: reg,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ts.Close()
		s.Close(context.Background())
	})
	return ts.URL
}

// TestDecodeJSONIsTheHTTPAnswer: for snowflake layouts, monotonic IDs and
// every text format, `idmint decode --json` prints the object /v1/decode
// answers for the same ID and layout, field by field: same names, same
// JSON types, same values.
func TestDecodeJSONIsTheHTTPAnswer(t *testing.T) {
	t.Parallel()
	base := decodeServer(t)
	gen := func(kind string, args ...string) string {
		code, out, errOut := runCLI(t, append([]string{"gen", kind}, args...)...)
		if code != 0 {
			t.Fatalf("gen %s: exit %d %s", kind, code, errOut)
		}
		return strings.TrimSpace(out)
	}
	stamp := strconv.FormatInt(monotonic.Stamp(time.Date(2026, 12, 1, 4, 3, 8, 969e6, time.UTC))|5, 10)
	cases := []struct {
		name  string
		cli   []string // decode's arguments
		query string   // /v1/decode/{id}'s
		id    string   // the ID the server is asked about
	}{
		// leaf, the default of both: no layout given to either.
		{"leaf default", []string{"2127614459424800830"}, "", "2127614459424800830"},
		{"leaf", []string{"--layout", "leaf", "1541815603606036480"}, "?layout=leaf", "1541815603606036480"},
		// Two node fields: worker is the node, datacenter extra.
		{"twitter", []string{"--layout", "twitter", "1050118621198921728"}, "?layout=twitter", "1050118621198921728"},
		{"twitter friendly", []string{"--layout", "twitter", "20181010201924211-10-27-0"}, "?layout=twitter", "1050118621198921728"},
		{"discord", []string{"--layout", "discord", "175928847299117063"}, "?layout=discord", "175928847299117063"},
		// One node field not called worker (machine, shard) is the node.
		{"sonyflake", []string{"--layout", "sonyflake", "1234567890123"}, "?layout=sonyflake", "1234567890123"},
		{"instagram", []string{"--layout", "instagram", gen("snowflake", "--layout", "instagram", "--node", "shard=77", "--horizon", "memory")}, "?layout=instagram", ""},
		{"jssafe", []string{"--layout", "jssafe", "198015710397969"}, "?layout=jssafe", "198015710397969"},
		{"monotonic", []string{"--layout", "monotonic", stamp}, "?layout=monotonic", stamp},
		{"monotonic format", []string{"--format", "monotonic", stamp}, "?layout=monotonic", stamp},
		// Text formats: recognised by shape, or named.
		{"uuid-v7 RFC 9562", []string{"017F22E2-79B0-7CC3-98C4-DC0C0C07398F"}, "?layout=uuid", "017F22E2-79B0-7CC3-98C4-DC0C0C07398F"},
		{"uuid-v1", []string{"--format", "uuid", gen("uuid-v1")}, "?layout=uuid", ""},
		{"uuid-v4", []string{gen("uuid-v4")}, "?layout=uuid", ""},
		{"ulid", []string{gen("ulid")}, "?layout=ulid", ""},
		{"ksuid", []string{gen("ksuid")}, "?layout=ksuid", ""},
		{"xid", []string{gen("xid")}, "?layout=xid", ""},
		{"objectid", []string{gen("objectid")}, "?layout=objectid", ""},
		{"flake128", []string{gen("flake128", "--worker", "9")}, "?layout=flake128", ""},
	}
	for _, c := range cases {
		id := c.id
		if id == "" {
			id = c.cli[len(c.cli)-1]
		}
		code, out, errOut := runCLI(t, append([]string{"decode", "--json"}, c.cli...)...)
		if code != 0 {
			t.Errorf("%s: decode --json %v: exit %d %s", c.name, c.cli, code, errOut)
			continue
		}
		resp, err := http.Get(base + "/v1/decode/" + id + c.query)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: /v1/decode/%s%s: %d %s", c.name, id, c.query, resp.StatusCode, body)
			continue
		}
		var cli, api map[string]any
		if err := json.Unmarshal([]byte(out), &cli); err != nil {
			t.Fatalf("%s: decode --json is not one JSON object: %v %q", c.name, err, out)
		}
		if err := json.Unmarshal(body, &api); err != nil {
			t.Fatalf("%s: /v1/decode answer is not JSON: %v %q", c.name, err, body)
		}
		fields := slices.Sorted(maps.Keys(cli))
		for k := range api {
			if _, ok := cli[k]; !ok {
				fields = append(fields, k)
			}
		}
		for _, k := range fields {
			if !reflect.DeepEqual(cli[k], api[k]) {
				t.Errorf("%s: field %q: decode --json has %#v, /v1/decode %#v\ncli  %s\nhttp %s", c.name, k, cli[k], api[k], out, body)
			}
		}
		if !strings.HasPrefix(out, `{"id":"`+id+`","layout":`) {
			t.Errorf("%s: decode --json %s: want the ID %s first, then the layout", c.name, out, id)
		}
	}
}
