package snowflake

import (
	"strings"
	"time"
)

// twitterEpoch is 2010-11-04T01:42:54.657Z, Twitter's "twepoch".
var twitterEpoch = time.UnixMilli(1288834974657).UTC()

// builtins holds the published layouts, in the order Layouts lists them.
// It is built once at package initialisation and never modified; Lookup and
// Layouts hand out copies (a Layout's field slice is never written).
var builtins = []Layout{
	// Twitter Snowflake: twitter-archive/snowflake, IdWorker.scala
	// (twepoch = 1288834974657L, workerIdBits = 5, datacenterIdBits = 5,
	// sequenceBits = 12; datacenter above worker).
	mustLayout(LayoutSpec{
		Name: "twitter", Note: "Twitter Snowflake (twitter-archive/snowflake IdWorker.scala)",
		TimeBits: 41, Unit: time.Millisecond, Epoch: twitterEpoch,
		Fields: []Field{{"datacenter", 5}, {"worker", 5}, {Seq, 12}},
	}),
	// Meituan Leaf snowflake: Meituan-Dianping/Leaf, SnowflakeIDGenImpl.java
	// (twepoch 1288834974657L, workerIdBits = 10, sequenceBits = 12; after a
	// sequence wrap or a new millisecond, sequence = RANDOM.nextInt(100)).
	mustLayout(LayoutSpec{
		Name: "leaf", Note: "Meituan Leaf snowflake mode (SnowflakeIDGenImpl.java): Twitter epoch, 10-bit worker from ZooKeeper, random sequence start 0-99",
		TimeBits: 41, Unit: time.Millisecond, Epoch: twitterEpoch,
		Fields: []Field{{"worker", 10}, {Seq, 12}}, SeqStart: 100,
	}),
	// Sonyflake: sony/sonyflake v1 sonyflake.go (BitLenTime = 39 in units of
	// 10 msec, BitLenSequence = 8, BitLenMachineID = 16; the sequence sits
	// above the machine ID; default StartTime 2014-09-01 00:00:00 UTC).
	mustLayout(LayoutSpec{
		Name: "sonyflake", Note: "Sonyflake v1 (sony/sonyflake): 10 ms ticks, sequence above a 16-bit machine ID",
		TimeBits: 39, Unit: 10 * time.Millisecond, Epoch: time.Date(2014, 9, 1, 0, 0, 0, 0, time.UTC),
		Fields: []Field{{Seq, 8}, {"machine", 16}},
	}),
	// Instagram: "Sharding & IDs at Instagram" (Instagram Engineering, 2012):
	// 41 bits of milliseconds, 13-bit logical shard, 10-bit sequence; its
	// PL/pgSQL next_id() uses our_epoch bigint := 1314220021721 and shifts
	// the time left by 23. Those widths fill all 64 bits of a signed bigint,
	// so the original turns negative once the time's top bit is set
	// (2046-06-27T17:00:49.497Z). idmint keeps every bit position and caps
	// the time field at 40 bits: identical IDs until then, and an honest End.
	mustLayout(LayoutSpec{
		Name: "instagram", Note: "Instagram sharded IDs (Instagram Engineering, \"Sharding & IDs at Instagram\", 2012); time capped at 40 bits because 41+13+10 overflows a signed bigint in 2046",
		TimeBits: 40, Unit: time.Millisecond, Epoch: time.UnixMilli(1314220021721).UTC(),
		Fields: []Field{{"shard", 13}, {Seq, 10}},
	}),
	// Baidu uid-generator: baidu/uid-generator DefaultUidGenerator.java
	// (timeBits = 28 seconds, workerBits = 22, seqBits = 13,
	// epochStr = "2016-05-20", i.e. 1463673600000 ms = 2016-05-20 00:00
	// +08:00). 2^28 s after that is 2024-11-20T13:24:16Z: the default ran out.
	mustLayout(LayoutSpec{
		Name: "baidu", Note: "Baidu uid-generator default (28-bit seconds from 2016-05-20 +08:00): RAN OUT on 2024-11-20T13:24:16Z; re-base it, e.g. --layout baidu,epoch=2024-11-21",
		TimeBits: 28, Unit: time.Second, Epoch: time.UnixMilli(1463673600000).UTC(),
		Fields: []Field{{"worker", 22}, {Seq, 13}},
	}),
	// The seed survey's CustomUUID (seed/id-schemes-survey.zh.txt): Twitter
	// epoch, |41 bits ms|3 bits region|10 bits worker|10 bits sequence|,
	// sequence = new SecureRandom().nextInt(10) on a new millisecond. Those
	// widths add up to 64 bits, so the Java original turns negative once the
	// time field's top bit is set (2045-09-06T21:36:42.433Z). idmint keeps
	// every bit position and caps the time field at 40 bits: identical IDs
	// until then, and an honest End instead of negative IDs.
	mustLayout(LayoutSpec{
		Name: "customuuid", Note: "a widely copied Java CustomUUID generator (41+3+10+10 bits, Twitter epoch, random start 0-9); time capped at 40 bits because the original overflows into the sign bit in 2045",
		TimeBits: 40, Unit: time.Millisecond, Epoch: twitterEpoch,
		Fields: []Field{{"region", 3}, {"worker", 10}, {Seq, 10}}, SeqStart: 10,
	}),
	// Simpleflake: SawdustSoftware/simpleflake (simpleflake.py:
	// SIMPLEFLAKE_EPOCH = 946702800, i.e. 2000-01-01 00:00 US Eastern,
	// 41-bit millisecond timestamp, random low bits, no worker ID). The
	// seed survey describes 22 random bits, which keeps IDs positive int64
	// (the Python original packs 23 into an unsigned word).
	//
	// idmint's generator draws the 22 bits at random on the first ID of each
	// millisecond and increments them for later IDs in that millisecond, so
	// one generator never repeats itself and stays strictly increasing. Two
	// independent generators collide only through the random draw. For n
	// generators issuing one ID each in the same millisecond the probability
	// of any collision is the birthday bound 1 - exp(-n(n-1)/2^23):
	//
	//	IDs per ms     10        100       1,000     2,000
	//	P(collision)   1.1e-5    1.2e-3    0.11      0.38
	//
	// (TestSimpleflakeCollisionRate measures it.) Use a layout with a node
	// field when more than a few hundred IDs per millisecond are issued
	// without coordination.
	mustLayout(LayoutSpec{
		Name: "simpleflake", Note: "Simpleflake (SawdustSoftware/simpleflake): 41-bit ms since 2000-01-01 00:00 EST + 22 random bits, no node; collides with probability 1-exp(-n(n-1)/2^23) for n uncoordinated IDs in one ms",
		TimeBits: 41, Unit: time.Millisecond, Epoch: time.Unix(946702800, 0).UTC(),
		Fields: []Field{{Seq, 22}}, SeqStart: 1 << 22,
	}),
	// Discord: discord.com/developers/docs/reference#snowflakes (Discord
	// epoch 1420070400000 = 2015-01-01T00:00:00Z; 5-bit internal worker ID,
	// 5-bit internal process ID, 12-bit increment): Twitter's bits. Discord
	// documents a 42-bit timestamp in an unsigned word; 41 bits last until
	// 2084, and keep IDs positive int64.
	mustLayout(LayoutSpec{
		Name: "discord", Note: "Discord snowflakes (discord.com/developers/docs/reference#snowflakes): Twitter's bits, epoch 2015-01-01",
		TimeBits: 41, Unit: time.Millisecond, Epoch: time.UnixMilli(1420070400000).UTC(),
		Fields: []Field{{"worker", 5}, {"process", 5}, {Seq, 12}},
	}),
	// JavaScript-safe: every ID until End is at most 2^53 - 1
	// (Number.MAX_SAFE_INTEGER, ECMA-262 §21.1.2.6), so a browser's
	// JSON.parse keeps it exact. 53 bits cannot hold Twitter's 41 ms bits
	// plus 22 more, so something gives:
	//
	//   - 1 ms ticks would leave 41+12: with 41 time bits (69.7 years) only
	//     12 bits stay for worker and sequence (16 workers x 256 IDs/ms).
	//   - 1 s ticks (CosId's SafeJavaScriptSnowflakeId.ofSecond, Baidu's
	//     uid-generator) issue a second's quota in a burst and then stall
	//     up to a second: bad latency, and that is how Baidu's 28-bit
	//     seconds ran out.
	//   - 10 ms ticks (Sonyflake's unit) balance the two: 38 bits of 10 ms
	//     last 2^38 x 10 ms = 2,748,779,069.44 s = 87.1 years, and the other
	//     15 bits give 64 workers (6 bits) x 512 IDs per tick (9 bits) =
	//     51,200 IDs/s per worker, 3,276,800 IDs/s across 64 workers.
	//
	// Epoch 2025-01-01T00:00:00Z, so the layout ends on
	// 2112-02-09T13:44:29.44Z. 38+6+9 = 53 bits: the largest ID is
	// 2^53 - 1 itself (TestJSSafeLayout checks both).
	mustLayout(LayoutSpec{
		Name: "jssafe", Note: "JavaScript-safe: 53 bits (<= Number.MAX_SAFE_INTEGER until its end): 38 bits of 10 ms from 2025-01-01 (87 years), 6-bit worker, 9-bit sequence (51,200 IDs/s per worker)",
		TimeBits: 38, Unit: 10 * time.Millisecond, Epoch: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
		Fields: []Field{{"worker", 6}, {Seq, 9}},
	}),
}

// MaxSafeInteger is JavaScript's Number.MAX_SAFE_INTEGER, 2^53 - 1
// (ECMA-262 §21.1.2.6): the largest integer a JavaScript number (an IEEE 754
// double) and so JSON.parse in a browser hold exactly. Layouts at most 53
// bits wide, such as "jssafe", never exceed it.
const MaxSafeInteger = 1<<53 - 1

// aliases maps other common names to built-in layout names.
var aliases = map[string]string{
	"uid-generator": "baidu",
	"snowflake":     "twitter",
	"x":             "twitter",
	"sony":          "sonyflake",
	"js-safe":       "jssafe",
	"javascript":    "jssafe",
}

func mustLayout(s LayoutSpec) Layout {
	l, err := NewLayout(s)
	if err != nil {
		panic(err) // constant input: a broken built-in is a programming error
	}
	return l
}

// Lookup returns the built-in layout with the given name (case-insensitive;
// "uid-generator" is an alias of "baidu", "snowflake" of "twitter").
func Lookup(name string) (Layout, bool) {
	name = strings.ToLower(strings.TrimSpace(name))
	if a, ok := aliases[name]; ok {
		name = a
	}
	for _, l := range builtins {
		if l.name == name {
			return l, true
		}
	}
	return Layout{}, false
}

// Layouts returns every built-in layout, in a fixed order. The slice is a
// fresh copy on each call.
func Layouts() []Layout { return append([]Layout(nil), builtins...) }

// LayoutNames returns the names of the built-in layouts, in Layouts order.
func LayoutNames() []string {
	names := make([]string, len(builtins))
	for i, l := range builtins {
		names[i] = l.name
	}
	return names
}

// MustParseLayout is like ParseLayout but panics on error. Use it only with
// constant input, for package-level layouts.
func MustParseLayout(text string) Layout {
	l, err := ParseLayout(text)
	if err != nil {
		panic(err)
	}
	return l
}
