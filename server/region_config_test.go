package server

import (
	"strings"
	"testing"

	"github.com/idmint/idmint/region"
)

// The region: section is checked field by field, each problem naming the
// field, its line and the value; a config without it has no region.
func TestRegionConfig(t *testing.T) {
	validate := func(doc string) error {
		t.Helper()
		c, err := ParseConfig(strings.NewReader(doc))
		if err != nil {
			return err
		}
		c.SetDefaults()
		return c.Validate(NewRegistry())
	}
	good := "region:\n  name: eu-west\n  index: 1\n  count: 2\n  registry: etcd://10.0.0.1:2379/regions\n"
	if err := validate(good); err != nil {
		t.Fatal(err)
	}
	c, _ := ParseConfig(strings.NewReader(good))
	if got := c.RegionSpec(); got != (region.Region{Name: "eu-west", Index: 1, Count: 2}) {
		t.Fatalf("RegionSpec = %+v", got)
	}
	c, _ = ParseConfig(strings.NewReader("listen: 127.0.0.1:1\n"))
	if c.Region.Set() || c.RegionSpec() != (region.Region{}) {
		t.Fatalf("no region: section gave %+v", c.Region)
	}
	for _, tc := range []struct{ doc, want string }{
		{"region:\n  index: 0\n  count: 2\n", "line 1: region.name: is required when region is set"},
		{"region:\n  name: EU_West\n  count: 2\n", `line 2: region.name: is not a region name`},
		{"region:\n  name: eu-west\n  count: 2\n", ""}, // index 0 by default
		{"region:\n  name: -eu\n  count: 2\n", `region.name: is not a region name (lower-case letters, digits and '-', at most 63, starting and ending with a letter or digit, e.g. eu-west) (value "-eu")`},
		{"region:\n  name: " + strings.Repeat("a", 64) + "\n  count: 2\n", "region.name: is not a region name"},
		{"region:\n  name: eu\n  index: 0\n", `line 1: region.count: must be between 1 and 1024: the number of regions the ID space is split among (value "0")`},
		{"region:\n  name: eu\n  count: 1025\n", `line 3: region.count: must be between 1 and 1024`},
		{"region:\n  name: eu\n  index: 2\n  count: 2\n", `line 3: region.index: must be between 0 and 1 (region.count is 2) (value "2")`},
		{"region:\n  name: eu\n  index: -1\n  count: 2\n", `region.index: must be between 0 and 1 (region.count is 2) (value "-1")`},
		{"region:\n  name: eu\n  count: 2\n  registry: zk://h:2181/r\n", `line 4: region.registry: must be empty or an etcd://host:port/prefix, postgres:// or mysql:// URL every region reaches (value "zk://h:2181/r")`},
		{"region:\n  name: eu\n  count: 2\n  registry: postgres://u:hunter2@h/db\n", ""},
		{"region:\n  name: eu\n  count: 2\n  registry: sqlite:///x.db\n", "region.registry: must be empty"},
		{"region:\n  name: eu\n  count: two\n", `line 3: region.count: expected a whole number (value "two")`},
		{"region:\n  name: eu\n  cuont: 2\n", `line 3: region.cuont: unknown field (did you mean "count"?)`},
	} {
		err := validate(tc.doc)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.doc, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v\nwant it to say %q", tc.doc, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: the error shows a password: %v", tc.doc, err)
		}
	}
}
