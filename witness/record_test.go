package witness_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/idmint/idmint/witness"
)

// TestRecords: on every backend a record is written once: the first of
// several concurrent Records wins and every caller gets its value; a
// later Record returns it unchanged; Forget frees the name.
func TestRecords(t *testing.T) {
	for name, open := range backends() {
		t.Run(name, func(t *testing.T) {
			var rec witness.Recorder
			if name == "file" {
				rec = witness.NewDir(t.TempDir())
			} else {
				r, ok := open(t).(witness.Recorder)
				if !ok {
					t.Fatalf("%s keeps no records", name)
				}
				rec = r
			}
			c := ctx(t)
			if _, ok, err := rec.Lookup(c, "region"); err != nil || ok {
				t.Fatalf("a fresh lookup: %v %v", ok, err)
			}
			got := make([]string, 8)
			var wg sync.WaitGroup
			for i := range got {
				wg.Add(1)
				go func() {
					defer wg.Done()
					v, err := rec.Record(c, "region/x", fmt.Sprintf(`{"name":"r%d"}`, i))
					if err != nil {
						t.Error(err)
					}
					got[i] = v
				}()
			}
			wg.Wait()
			for _, v := range got {
				if v != got[0] {
					t.Fatalf("concurrent records returned %q and %q", got[0], v)
				}
			}
			if v, err := rec.Record(c, "region/x", "other"); err != nil || v != got[0] {
				t.Fatalf("a later record: %q %v, want %q", v, err, got[0])
			}
			if v, ok, err := rec.Lookup(c, "region/x"); err != nil || !ok || v != got[0] {
				t.Fatalf("lookup: %q %v %v", v, ok, err)
			}
			if err := rec.Forget(c, "region/x"); err != nil {
				t.Fatal(err)
			}
			if err := rec.Forget(c, "region/x"); err != nil {
				t.Fatalf("forgetting nothing: %v", err)
			}
			if v, err := rec.Record(c, "region/x", "new"); err != nil || v != "new" {
				t.Fatalf("after forget: %q %v", v, err)
			}
			if _, err := rec.Record(c, "", "x"); err == nil {
				t.Error("an empty record name was accepted")
			}
			if _, err := rec.Record(c, "y", ""); err == nil {
				t.Error("an empty value was accepted")
			}
		})
	}
}
