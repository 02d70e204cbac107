package strategies

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/idmint/idmint/snowflake"
)

// TestK8sCoordinatorHorizonInDataDir: a server on k8s:// (the pod's
// ordinal) issues snowflake IDs with that ordinal as the worker ID and
// keeps their time horizon in the data directory, the pod's volume, as it
// does for static://.
func TestK8sCoordinatorHorizonInDataDir(t *testing.T) {
	dir := t.TempDir()
	s, err := snowflakeServer(t, dir, "k8s://idmint-2?offset=5")
	if err != nil {
		t.Fatalf("server on k8s://: %v", err)
	}
	defer s.Close(context.Background())
	code, body := get(t, s.Handler(), "GET", "/v1/keys/snowflake/ids?count=20", "")
	if code != http.StatusOK {
		t.Fatalf("GET ids: %d %s", code, body)
	}
	var b struct{ IDs []string }
	if err := json.Unmarshal([]byte(body), &b); err != nil || len(b.IDs) != 20 {
		t.Fatalf("%s: %v", body, err)
	}
	layout, _ := snowflake.Lookup(DefaultLayout)
	seen := map[string]bool{}
	for _, v := range b.IDs {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		p, err := snowflake.Decode(layout, id)
		if err != nil {
			t.Fatal(err)
		}
		if p.Node["worker"] != 7 || seen[v] {
			t.Fatalf("ID %s: worker %d (want ordinal 2 + offset 5), repeat %v", v, p.Node["worker"], seen[v])
		}
		seen[v] = true
	}
	if _, err := os.Stat(filepath.Join(dir, "worker-k8s.horizon")); err != nil {
		t.Fatalf("the pod's horizon file in the data directory: %v", err)
	}
}
