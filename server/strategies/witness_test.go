package strategies

import (
	"bytes"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/idmint/idmint/server"
)

// TestNodeLocalRefused: the Kubernetes advice followed literally
// ("stores: {shared: postgres://...}" without store: on the key) left every
// key on the pod's own SQLite store, so every pod would issue 1, 2, 3...
// Under a coordinator that implies several nodes such a key is refused,
// naming the key and the fix; store: on the key, or node_local: true,
// makes it pass.
func TestNodeLocalRefused(t *testing.T) {
	reg := server.NewRegistry()
	if err := Register(reg); err != nil {
		t.Fatal(err)
	}
	for _, coord := range []string{"k8s://?env=POD_NAME", "etcd://127.0.0.1:2379/idmint", "zk://127.0.0.1:2181/snowflake/app", "postgres://db/idmint"} {
		t.Run(coord, func(t *testing.T) {
			cfg := &server.Config{DataDir: t.TempDir(), Coordinator: coord,
				Stores: map[string]string{"shared": "postgres://idmint@db:5432/idmint"},
				Keys: map[string]server.KeyConfig{
					"order":   {Strategy: "segment"}, // on default: the pod's SQLite
					"orderno": {Strategy: "ordernum", Options: map[string]string{"key": "0123456789abcdef0123456789abcdef"}},
					"ok":      {Strategy: "segment", Store: "shared"}, // the fix
					"mine":    {Strategy: "segment", NodeLocal: true}, // the opt-in
					"sf":      {Strategy: "snowflake"},                // needs no store
				}}
			cfg.SetDefaults()
			err := cfg.Validate(reg)
			var ve *server.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate = %v; want the node-local keys refused", err)
			}
			got := map[string]string{}
			for _, p := range ve.Problems {
				got[p.Field] = p.Message
			}
			for _, f := range []string{"keys.order.store", "keys.orderno.store"} {
				if !strings.Contains(got[f], "node_local") || !strings.Contains(got[f], "store:") {
					t.Errorf("%s: %q; want the fix (store: or node_local) named", f, got[f])
				}
			}
			for _, f := range []string{"keys.ok.store", "keys.mine.store", "keys.sf.store"} {
				if m, ok := got[f]; ok {
					t.Errorf("%s refused: %s", f, m)
				}
			}
		})
	}
	// A single node (the default file:// coordinator) numbers on its own.
	cfg := &server.Config{DataDir: t.TempDir(), Keys: map[string]server.KeyConfig{"order": {Strategy: "segment"}}}
	cfg.SetDefaults()
	if err := cfg.Validate(reg); err != nil {
		t.Fatalf("zero config refused: %v", err)
	}
}

func TestWitnessConfig(t *testing.T) {
	reg := server.NewRegistry()
	if err := Register(reg); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		witness string
		ok      bool
	}{
		{"", true}, {"none", true}, {"etcd://10.0.0.1:2379/idmint?name=app", true}, {"postgres://w@other:5432/marks", true},
		{"redis://cache:6379", false}, {"nonsense", false}, {"postgres://idmint@db:5432/idmint", false}, // the store itself
	} {
		cfg := &server.Config{DataDir: t.TempDir(), Witness: tc.witness, Stores: map[string]string{"default": "postgres://idmint@db:5432/idmint"}}
		cfg.SetDefaults()
		err := cfg.Validate(reg)
		if (err == nil) != tc.ok {
			t.Errorf("witness %q: %v; want ok=%v", tc.witness, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "witness") {
			t.Errorf("witness %q: %v does not name the field", tc.witness, err)
		}
	}
}

// The warning about a shared store without a cluster witness shows the
// store as its caller redacted it: a ticket key's "default (mysql://...)"
// and a Redis address are no URLs, and were logged as
// store="(unparsable url)".
func TestWarnSharedShowsStore(t *testing.T) {
	var buf bytes.Buffer
	env := &server.Env{Logger: slog.New(slog.NewTextHandler(&buf, nil))}
	var n nodeWitness
	shown := "default (mysql://idmint:xxxxx@db:3306/tickets)"
	n.warnShared(env, "ticket", shown)
	if out := buf.String(); !strings.Contains(out, strconv.Quote(shown)) || strings.Contains(out, "unparsable") {
		t.Fatalf("warning: %s", out)
	}
}
