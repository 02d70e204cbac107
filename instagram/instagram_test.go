package instagram

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestRenderDefaults(t *testing.T) {
	sql, err := Render(Options{Schema: "shard_5", Shard: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`CREATE SCHEMA IF NOT EXISTS "shard_5";`,
		`CREATE SEQUENCE IF NOT EXISTS "shard_5"."table_id_seq";`,
		`CREATE OR REPLACE FUNCTION "shard_5"."next_id"(OUT result bigint)`,
		"our_epoch bigint := 1314220021721;",
		"shard_id int := 5;",
		`nextval('"shard_5"."table_id_seq"') % 1024`,
		"result := (now_millis - our_epoch) << 23;",
		"result := result | (shard_id << 10);",
		"(1::bigint << 40)",
	} {
		if !strings.Contains(sql, want) {
			t.Errorf("rendered SQL lacks %q:\n%s", want, sql)
		}
	}
	if strings.Contains(sql, "%!") || strings.Contains(sql, "%%") {
		t.Errorf("rendered SQL has a formatting artefact:\n%s", sql)
	}
}

func TestRenderOverrides(t *testing.T) {
	epoch := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	sql, err := Render(Options{Schema: "user", Shard: MaxShard, Sequence: "ids", Function: "mint", Epoch: epoch})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`FUNCTION "user"."mint"(`, `nextval('"user"."ids"')`, "shard_id int := 8191;",
		"our_epoch bigint := 1704067200000;",
	} {
		if !strings.Contains(sql, want) {
			t.Errorf("rendered SQL lacks %q", want)
		}
	}
}

func TestOptionsInvalid(t *testing.T) {
	long := strings.Repeat("a", 64)
	for _, tc := range []struct {
		name  string
		o     Options
		field string
	}{
		{"empty schema", Options{Shard: 1}, "schema"},
		{"upper case", Options{Schema: "Shard5"}, "schema"},
		{"injection", Options{Schema: `x"; DROP TABLE t; --`}, "schema"},
		{"quote", Options{Schema: "a'b"}, "schema"},
		{"dot", Options{Schema: "a.b"}, "schema"},
		{"leading digit", Options{Schema: "5shard"}, "schema"},
		{"too long", Options{Schema: long}, "schema"},
		{"unicode", Options{Schema: "shärd"}, "schema"},
		{"negative shard", Options{Schema: "s", Shard: -1}, "shard"},
		{"shard past 13 bits", Options{Schema: "s", Shard: 8192}, "shard"},
		{"bad sequence", Options{Schema: "s", Sequence: "seq-1"}, "sequence"},
		{"bad function", Options{Schema: "s", Function: "next id"}, "function"},
		{"epoch before 1970", Options{Schema: "s", Epoch: time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC)}, "epoch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Render(tc.o)
			var oe *OptionError
			if !errors.As(err, &oe) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Render(%+v) = %v, want an *OptionError wrapping ErrInvalid", tc.o, err)
			}
			if oe.Field != tc.field {
				t.Errorf("error names field %q, want %q (%v)", oe.Field, tc.field, err)
			}
			if !strings.HasPrefix(err.Error(), "instagram: "+tc.field) {
				t.Errorf("message %q does not start with the package and field", err)
			}
			if _, err := New(nil, tc.o); !errors.Is(err, ErrInvalid) {
				t.Errorf("New accepted %+v: %v", tc.o, err)
			}
		})
	}
}

func TestIdentBoundaries(t *testing.T) {
	for _, ok := range []string{"a", "_", "shard_5", "a1_b2", strings.Repeat("z", 63)} {
		if err := checkIdent("schema", ok); err != nil {
			t.Errorf("checkIdent(%q) = %v, want nil", ok, err)
		}
	}
}

// FuzzRender checks that whatever the input, Render either refuses it with
// an *OptionError or emits SQL in which the names appear only as validated,
// quoted identifiers.
func FuzzRender(f *testing.F) {
	f.Add("shard_5", 5, "", "")
	f.Add(`x"y`, 8192, "s;q", "f'n")
	f.Fuzz(func(t *testing.T, schema string, shard int, seq, fn string) {
		o := Options{Schema: schema, Shard: shard, Sequence: seq, Function: fn}
		sql, err := Render(o)
		if err != nil {
			var oe *OptionError
			if !errors.As(err, &oe) {
				t.Fatalf("error %v is not an *OptionError", err)
			}
			return
		}
		for _, id := range []string{schema, seq, fn} {
			if id == "" {
				continue
			}
			if checkIdent("x", id) != nil {
				t.Fatalf("Render accepted identifier %q", id)
			}
		}
		if shard < 0 || shard > MaxShard {
			t.Fatalf("Render accepted shard %d", shard)
		}
		if strings.Count(sql, "$idmint$") != 2 {
			t.Fatalf("dollar quoting broken:\n%s", sql)
		}
	})
}
