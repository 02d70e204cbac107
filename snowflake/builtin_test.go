package snowflake

import (
	"maps"
	"testing"
	"time"
)

// TestKnownIDs decodes IDs with each built-in layout. Real IDs come from the
// cited public sources; where no real ID is published, the vector is built
// with the original implementation's own formula (quoted beside it), so a
// change of bit positions or epoch would break the test.
func TestKnownIDs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		layout string
		id     int64
		time   string
		node   map[string]int64
		seq    int64
		source string
	}{
		{"twitter", 1541815603606036480, "2022-06-28T16:07:40.105Z", map[string]int64{"datacenter": 11, "worker": 26}, 0,
			"Wikipedia, Snowflake ID: a @Wikipedia tweet of June 2022, machine ID 378, created 1656432460.105"},
		{"leaf", 1541815603606036480, "2022-06-28T16:07:40.105Z", map[string]int64{"worker": 378}, 0,
			"Leaf shares Twitter's bits: the same tweet ID reads as worker 378"},
		{"discord", 175928847299117063, "2016-04-30T11:18:25.796Z", map[string]int64{"worker": 1, "process": 0}, 7,
			"discord.com/developers/docs/reference#snowflakes worked example"},
		{"discord", 105484726235607040, "2015-10-19T01:58:38.546Z", map[string]int64{"worker": 0, "process": 11}, 0,
			"twilight-util docs: a Discord user created 2015-10-19T01:58:38.546Z"},
		{"instagram", 2384288897814875714, "2020-08-26T13:43:27.313Z", map[string]int64{"shard": 2675}, 578,
			"Stack Overflow 63683015: a media ID posted 2020-08-26T13:43:27Z"},
		{"instagram", 2383568809444681765, "2020-08-25T13:52:46.09Z", map[string]int64{"shard": 2474}, 37,
			"Stack Overflow 63683015: a media ID posted 2020-08-25T13:52:46Z"},
		{"sonyflake", 516261271147233007, "2024-06-01T12:34:56.78Z", map[string]int64{"machine": 0xBEEF}, 5,
			"sonyflake v1 toID: elapsed<<(8+16) | sequence<<16 | machineID (bench/ also decodes IDs from the real library)"},
		{"baidu", 3925965878072508224, "2020-01-02T03:04:05Z", map[string]int64{"worker": 1234567}, 8000,
			"uid-generator BitsAllocator.allocate: deltaSeconds<<35 | workerId<<13 | sequence"},
		{"customuuid", 2734681111356253193, "2021-03-04T05:06:07.089Z", map[string]int64{"region": 5, "worker": 777}, 9,
			"seed CustomUUID.nextId: (ts-twepoch)<<23 | region<<20 | worker<<10 | sequence"},
		{"simpleflake", 2030460492550159582, "2015-05-05T05:05:05.555Z", nil, 0x2ABCDE,
			"simpleflake: (ms - SIMPLEFLAKE_EPOCH*1000)<<22 | random bits"},
	}
	for _, tt := range tests {
		l, ok := Lookup(tt.layout)
		if !ok {
			t.Fatalf("no built-in %q", tt.layout)
		}
		p, err := Decode(l, tt.id)
		if err != nil {
			t.Fatalf("%s %d: %v", tt.layout, tt.id, err)
		}
		if got := p.Time.Format(time.RFC3339Nano); got != tt.time || !maps.Equal(p.Node, tt.node) || p.Sequence != tt.seq {
			t.Errorf("%s %d (%s)\n got %s %v seq %d\nwant %s %v seq %d", tt.layout, tt.id, tt.source,
				got, p.Node, p.Sequence, tt.time, tt.node, tt.seq)
		}
		back, err := Compose(l, p)
		if err != nil || back != tt.id {
			t.Errorf("%s: Compose(Decode(%d)) = %d, %v", tt.layout, tt.id, back, err)
		}
	}
}

func TestLookup(t *testing.T) {
	t.Parallel()
	names := LayoutNames()
	want := []string{"twitter", "leaf", "sonyflake", "instagram", "baidu", "customuuid", "simpleflake", "discord", "jssafe"}
	if len(names) != len(want) {
		t.Fatalf("LayoutNames = %v", names)
	}
	for i, n := range want {
		if names[i] != n {
			t.Fatalf("LayoutNames = %v, want %v", names, want)
		}
		l, ok := Lookup(n)
		if !ok || l.Name() != n || l.Note() == "" {
			t.Fatalf("Lookup(%q) = %v, %v", n, l, ok)
		}
		back, err := ParseLayout(l.String())
		if err != nil || back.String() != l.String() {
			t.Fatalf("%s: ParseLayout(String()) = %v, %v", n, back, err)
		}
	}
	for alias, name := range map[string]string{"uid-generator": "baidu", " Twitter ": "twitter", "sony": "sonyflake"} {
		if l, ok := Lookup(alias); !ok || l.Name() != name {
			t.Errorf("Lookup(%q) = %v, %v", alias, l.Name(), ok)
		}
	}
	if _, ok := Lookup("flickr"); ok {
		t.Error("Lookup of an unknown name succeeded")
	}
	// Layouts returns copies: changing the slice does not change the built-ins.
	ls := Layouts()
	ls[0] = Layout{}
	if l, _ := Lookup("twitter"); l.IsZero() {
		t.Fatal("Layouts shares its slice with the built-in table")
	}
	fs := ls[1].Fields()
	fs[0].Bits = 1
	if l, _ := Lookup("leaf"); l.Fields()[0].Bits != 10 {
		t.Fatal("Fields shares its slice with the layout")
	}
}

func TestBuiltinSpecs(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"twitter":     "time=41:1ms,datacenter=5,worker=5,seq=12,epoch=2010-11-04T01:42:54.657Z",
		"leaf":        "time=41:1ms,worker=10,seq=12:rand100,epoch=2010-11-04T01:42:54.657Z",
		"sonyflake":   "time=39:10ms,seq=8,machine=16,epoch=2014-09-01T00:00:00Z",
		"instagram":   "time=40:1ms,shard=13,seq=10,epoch=2011-08-24T21:07:01.721Z",
		"baidu":       "time=28:1s,worker=22,seq=13,epoch=2016-05-19T16:00:00Z",
		"customuuid":  "time=40:1ms,region=3,worker=10,seq=10:rand10,epoch=2010-11-04T01:42:54.657Z",
		"simpleflake": "time=41:1ms,seq=22:rand,epoch=2000-01-01T05:00:00Z",
		"discord":     "time=41:1ms,worker=5,process=5,seq=12,epoch=2015-01-01T00:00:00Z",
		"jssafe":      "time=38:10ms,worker=6,seq=9,epoch=2025-01-01T00:00:00Z",
	}
	for name, spec := range want {
		l, _ := Lookup(name)
		if got := l.String(); got != spec {
			t.Errorf("%s.String() = %s, want %s", name, got, spec)
		}
	}
}
