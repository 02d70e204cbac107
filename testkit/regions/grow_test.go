package regions

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/idmint/idmint/testkit/servenode"
	"github.com/idmint/idmint/testkit/testserver"
)

// growKeys are the keys TestGrowOneRegionToTwo grows: a segment key, an
// order-number key and a snowflake key (leaf: the regions split the
// worker IDs).
const growKeys = `keys:
  order: {strategy: segment}
  orderno: {strategy: ordernum, options: {format: "length=16", key: "` + orderKey + `"}}
  flake: {strategy: snowflake}
`

// TestGrowOneRegionToTwo follows docs/regions.md's steps for growing a
// running deployment into two regions, on SQLite stores and file
// coordinators (no server needed): a single region issues IDs; it
// restarts as region 0 and goes on with the very numbers it would have
// issued (a segment key's next ID follows its last); region 1 starts on
// a store of its own, with nothing copied into it; no ID of the three
// lives repeats, and region 1's counter IDs lie in its share.
func TestGrowOneRegionToTwo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds idmint and runs three serve processes")
	}
	dir := t.TempDir()
	bin := servenode.Build(t, dir)
	east, west := filepath.Join(dir, "east"), filepath.Join(dir, "west")
	cfg := func(name, region string) string {
		p := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(p, []byte("drain_period: 0s\nmax_count: 100000\n"+region+growKeys), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	single := cfg("single", "")
	r0 := cfg("r0", "region: {name: east, index: 0, count: 2}\n")
	r1 := cfg("r1", "region: {name: west, index: 1, count: 2}\n")

	got := map[string][]string{} // every ID, per key
	lives := map[string][][]string{}
	run := func(name, config, data string) {
		t.Helper()
		lf, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		n := &servenode.Node{Name: name, Bin: bin, Config: config, Data: data, Port: testserver.FreePort(t), Log: lf}
		t.Cleanup(func() { n.Cleanup(t) })
		n.Start(t)
		l := newLoad(0)
		for _, k := range []string{"order", "orderno", "flake"} {
			var ids []string
			for range 3 {
				b, err := l.fetch(n.URL() + "/v1/keys/" + k + "/ids?count=1000")
				if err != nil {
					t.Fatalf("%s: %s: %v", name, k, err)
				}
				ids = append(ids, b...)
			}
			got[k] = append(got[k], ids...)
			lives[k] = append(lives[k], ids)
		}
		n.Signal(t, syscall.SIGTERM)
		select {
		case <-n.Done():
		case <-time.After(wait):
			t.Fatalf("%s did not stop within %v", name, wait)
		}
	}

	run("single", single, east)
	run("east", r0, east)
	// Region 1 starts on a store of its own, nothing copied into it: its
	// order-number block lies above every value the single region used.
	run("west", r1, west)

	for k, ids := range got {
		if n, ex := duplicates(sortedCopy(ids)); n > 0 {
			t.Errorf("key %s: %d IDs issued twice across the growth, e.g. %v", k, n, ex)
		}
	}
	// Region 0 goes on where the single region stopped: the segment key's
	// next ID follows its last (the node's buffer is lost on a stop, so
	// the next segment's first).
	o := lives["order"]
	lastSingle, firstEast := num(t, o[0][len(o[0])-1]), num(t, o[1][0])
	if firstEast <= lastSingle || firstEast >= 1<<62 {
		t.Errorf("region 0's first segment ID %d after the growth: want above the single region's last %d and below 2^62", firstEast, lastSingle)
	}
	for _, id := range o[2] {
		if n := num(t, id); n < 1<<62 || n > math.MaxInt64 {
			t.Fatalf("region 1 issued segment ID %d, outside its share [2^62, 2^63-1]", n)
		}
	}
	for i, life := range []string{"single", "east", "west"} {
		t.Logf("%s: order %s..%s, flake %s..%s, %d order numbers", life, o[i][0], o[i][len(o[i])-1],
			lives["flake"][i][0], lives["flake"][i][len(lives["flake"][i])-1], len(lives["orderno"][i]))
	}
	if len(got["order"]) != 9000 {
		t.Errorf("collected %d segment IDs, want 9000", len(got["order"]))
	}
}

func num(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("ID %q is not an int64: %v", s, err)
	}
	return n
}
