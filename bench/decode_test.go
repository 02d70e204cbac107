package bench

import (
	"testing"
	"time"

	bwsnowflake "github.com/bwmarrin/snowflake"
	"github.com/sony/sonyflake"

	"github.com/idmint/idmint/snowflake"
)

// TestDecodeBwmarrinIDs decodes IDs issued by bwmarrin/snowflake (default:
// Twitter epoch, 10-bit node, 12-bit step, i.e. Leaf's bits) with idmint's
// leaf layout and compares with bwmarrin's own accessors.
func TestDecodeBwmarrinIDs(t *testing.T) {
	n, err := bwsnowflake.NewNode(777)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := snowflake.Lookup("leaf")
	for range 1000 {
		id := n.Generate()
		p, err := snowflake.Decode(leaf, id.Int64())
		if err != nil {
			t.Fatal(err)
		}
		if p.Node["worker"] != id.Node() || p.Sequence != id.Step() || p.Time.UnixMilli() != id.Time() {
			t.Fatalf("bwmarrin %d: idmint decodes %+v; bwmarrin says node %d step %d ms %d", id, p, id.Node(), id.Step(), id.Time())
		}
	}
}

// TestDecodeSonyflakeIDs decodes IDs issued by sony/sonyflake v1 with
// idmint's sonyflake layout and compares with sonyflake.Decompose.
func TestDecodeSonyflakeIDs(t *testing.T) {
	sf, err := sonyflake.New(sonyflake.Settings{MachineID: func() (uint16, error) { return 0xBEEF, nil }})
	if err != nil {
		t.Fatal(err)
	}
	layout, _ := snowflake.Lookup("sonyflake")
	start := time.Date(2014, 9, 1, 0, 0, 0, 0, time.UTC)
	for range 300 {
		id, err := sf.NextID()
		if err != nil {
			t.Fatal(err)
		}
		p, err := snowflake.Decode(layout, int64(id))
		if err != nil {
			t.Fatal(err)
		}
		d := sonyflake.Decompose(id)
		want := start.Add(time.Duration(d["time"]) * 10 * time.Millisecond)
		if !p.Time.Equal(want) || p.Node["machine"] != int64(d["machine-id"]) || p.Sequence != int64(d["sequence"]) {
			t.Fatalf("sonyflake %d: idmint decodes %+v; Decompose says %v (time %v)", id, p, d, want)
		}
	}
}
