package snowflake

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func twitterSpec() LayoutSpec {
	return LayoutSpec{TimeBits: 41, Unit: time.Millisecond, Epoch: twitterEpoch,
		Fields: []Field{{"datacenter", 5}, {"worker", 5}, {Seq, 12}}}
}

func TestNewLayoutValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		modify func(*LayoutSpec)
		field  string // must appear in the error
		value  string // must appear in the error
	}{
		{"zero time bits", func(s *LayoutSpec) { s.TimeBits = 0 }, "time bits", `"0"`},
		{"time bits too wide", func(s *LayoutSpec) { s.TimeBits = 63 }, "time bits", `"63"`},
		{"zero unit", func(s *LayoutSpec) { s.Unit = 0 }, "time unit", `"0s"`},
		{"negative unit", func(s *LayoutSpec) { s.Unit = -time.Millisecond }, "time unit", `"-1ms"`},
		{"no epoch", func(s *LayoutSpec) { s.Epoch = time.Time{} }, "epoch", "must be set"},
		{"epoch before 1970", func(s *LayoutSpec) { s.Epoch = time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC) }, "epoch", "1969"},
		{"end after 9999", func(s *LayoutSpec) { s.TimeBits = 45; s.Unit = time.Hour }, "time bits", `"45"`},
		{"zero-width field", func(s *LayoutSpec) { s.Fields[1].Bits = 0 }, "worker bits", `"0"`},
		{"negative field", func(s *LayoutSpec) { s.Fields[0].Bits = -3 }, "datacenter bits", `"-3"`},
		{"oversized field", func(s *LayoutSpec) { s.Fields[1].Bits = 63 }, "worker bits", `"63"`},
		{"total over 63 bits", func(s *LayoutSpec) { s.Fields[2].Bits = 13 }, "seq bits", "64 bits"},
		{"overlapping fields", func(s *LayoutSpec) { s.Fields[1].Name = "datacenter" }, "field name", `"datacenter"`},
		{"zero-bit sequence", func(s *LayoutSpec) { s.Fields[2].Bits = 0 }, "seq bits", `"0"`},
		{"no sequence", func(s *LayoutSpec) { s.Fields = s.Fields[:2] }, "fields", "seq"},
		{"no fields", func(s *LayoutSpec) { s.Fields = nil }, "fields", "seq"},
		{"bad field name", func(s *LayoutSpec) { s.Fields[0].Name = "Data Center" }, "field name", `"Data Center"`},
		{"reserved field name", func(s *LayoutSpec) { s.Fields[0].Name = "epoch" }, "field name", `"epoch"`},
		{"bad layout name", func(s *LayoutSpec) { s.Name = "9lives" }, "name", `"9lives"`},
		{"seq start too wide", func(s *LayoutSpec) { s.SeqStart = 4097 }, "seq start", `"4097"`},
		{"seq start negative", func(s *LayoutSpec) { s.SeqStart = -1 }, "seq start", `"-1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := twitterSpec()
			tt.modify(&s)
			_, err := NewLayout(s)
			if !errors.Is(err, ErrInvalidLayout) {
				t.Fatalf("NewLayout = %v, want ErrInvalidLayout", err)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %T is not a *FieldError", err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "snowflake: ") || !strings.Contains(msg, tt.field) || !strings.Contains(msg, tt.value) {
				t.Fatalf("error %q does not name field %q and value %s", msg, tt.field, tt.value)
			}
		})
	}
	if _, err := NewLayout(twitterSpec()); err != nil {
		t.Fatalf("valid spec rejected: %v", err)
	}
}

func TestLayoutCheck(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	tw, _ := Lookup("twitter")
	if err := tw.Check(now); err != nil {
		t.Fatalf("twitter at %v: %v", now, err)
	}
	future, err := tw.WithEpoch(now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	err = future.Check(now)
	if !errors.Is(err, ErrEpochInFuture) || !strings.Contains(err.Error(), "epoch") {
		t.Fatalf("future epoch: %v", err)
	}
	baidu, _ := Lookup("baidu")
	err = baidu.Check(now)
	if !errors.Is(err, ErrLayoutExpired) || !strings.Contains(err.Error(), "2024-11-20T13:24:16Z") {
		t.Fatalf("baidu default in 2026: %v, want ErrLayoutExpired naming 2024-11-20T13:24:16Z", err)
	}
	if err := (Layout{}).Check(now); !errors.Is(err, ErrInvalidLayout) {
		t.Fatalf("zero layout: %v", err)
	}
}

func TestLifetime(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		end      string
		capacity float64
	}{
		{"twitter", "2080-07-10T17:30:30.209Z", 4096000},
		{"leaf", "2080-07-10T17:30:30.209Z", 4096000},
		{"sonyflake", "2188-11-16T03:28:58.88Z", 25600},
		{"instagram", "2046-06-27T17:00:49.497Z", 1024000},
		{"baidu", "2024-11-20T13:24:16Z", 8192},
		{"customuuid", "2045-09-06T21:36:42.433Z", 1024000},
		{"simpleflake", "2069-09-06T20:47:35.552Z", 4194304000},
		{"discord", "2084-09-06T15:47:35.552Z", 4096000},
	}
	for _, tt := range tests {
		l, ok := Lookup(tt.name)
		if !ok {
			t.Fatalf("no built-in %q", tt.name)
		}
		if got := l.End().Format(time.RFC3339Nano); got != tt.end {
			t.Errorf("%s End = %s, want %s", tt.name, got, tt.end)
		}
		if got := l.CapacityPerSecond(); got != tt.capacity {
			t.Errorf("%s CapacityPerSecond = %v, want %v", tt.name, got, tt.capacity)
		}
	}
	tw, _ := Lookup("twitter")
	if got := tw.Remaining(tw.End().Add(-time.Hour)); got != time.Hour {
		t.Errorf("Remaining an hour before End = %v", got)
	}
	if got := tw.Remaining(tw.End()); got != 0 {
		t.Errorf("Remaining at End = %v", got)
	}
	long := MustParseLayout("time=37:1s,seq=10,epoch=2020-01-01")
	if got := long.Remaining(long.Epoch()); got <= 0 {
		t.Errorf("Remaining of a 4,000-year layout = %v, want saturated positive", got)
	}
}

func TestRebasedBaidu(t *testing.T) {
	t.Parallel()
	l, err := ParseLayout("baidu,epoch=2024-11-21")
	if err != nil {
		t.Fatal(err)
	}
	if got := l.End().Format(time.RFC3339); got != "2033-05-24T21:24:16Z" {
		t.Errorf("re-based End = %s", got)
	}
	if err := l.Check(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatalf("re-based baidu refused: %v", err)
	}
	if l.Bits() != 63 || l.SeqBits() != 13 || l.Unit() != time.Second {
		t.Fatalf("re-base changed the bits: %v", l)
	}
}

func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	sf, _ := Lookup("sonyflake")
	if _, err := Decode(sf, -1); !errors.Is(err, ErrInvalidID) {
		t.Errorf("negative: %v", err)
	}
	short := MustParseLayout("time=20:1s,seq=4,epoch=2020-01-01")
	if _, err := Decode(short, 1<<24); !errors.Is(err, ErrInvalidID) || !strings.Contains(err.Error(), "24 bits") {
		t.Errorf("too wide: %v", err)
	}
	if _, err := Decode(Layout{}, 1); !errors.Is(err, ErrInvalidLayout) {
		t.Errorf("zero layout: %v", err)
	}
}

func TestComposeErrors(t *testing.T) {
	t.Parallel()
	tw, _ := Lookup("twitter")
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		p    Parts
		err  error
		text string
	}{
		{"node too wide", Parts{Time: at, Node: map[string]int64{"worker": 32}}, ErrInvalidNode, `worker "32"`},
		{"negative node", Parts{Time: at, Node: map[string]int64{"datacenter": -1}}, ErrInvalidNode, `datacenter "-1"`},
		{"unknown node", Parts{Time: at, Node: map[string]int64{"shard": 1}}, ErrInvalidNode, `"shard"`},
		{"seq too wide", Parts{Time: at, Sequence: 4096}, ErrInvalidID, `seq "4096"`},
		{"before epoch", Parts{Time: twitterEpoch.Add(-time.Millisecond)}, ErrInvalidID, "2010-11-04T01:42:54.656Z"},
		{"after end", Parts{Time: tw.End()}, ErrInvalidID, "2080-07-10"},
	}
	for _, tt := range tests {
		_, err := Compose(tw, tt.p)
		if !errors.Is(err, tt.err) || !strings.Contains(err.Error(), tt.text) {
			t.Errorf("%s: Compose = %v, want %v naming %s", tt.name, err, tt.err, tt.text)
		}
	}
}

func TestTickMath(t *testing.T) {
	t.Parallel()
	sf, _ := Lookup("sonyflake")
	for _, tick := range []int64{0, 1, 12345678901, sf.maxTick} {
		at := sf.tickTime(tick)
		if got := sf.tickOf(at); got != tick {
			t.Errorf("tickOf(tickTime(%d)) = %d", tick, got)
		}
		if got := sf.tickOf(at.Add(-time.Nanosecond)); got != tick-1 {
			t.Errorf("tickOf(tickTime(%d)-1ns) = %d", tick, got)
		}
	}
	if got := sf.tickOf(sf.End().Add(time.Hour)); got != sf.maxTick+1 {
		t.Errorf("tickOf past End = %d, want clamp %d", got, sf.maxTick+1)
	}
	if got := sf.tickOf(time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)); got != -1<<61 {
		t.Errorf("tickOf far before epoch = %d", got)
	}
}

// FuzzDecodeCompose checks that Decode and Compose are inverse for every
// built-in layout and a custom one with the sequence in the middle.
func FuzzDecodeCompose(f *testing.F) {
	layouts := append(Layouts(), MustParseLayout("time=30:10ms,region=7,seq=9:rand300,shard=17,epoch=2001-02-03T04:05:06.789Z"))
	for _, id := range []int64{0, 1, 1541815603606036480, 175928847299117063, 1<<62 - 1, -1, 1<<63 - 1} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id int64) {
		for _, l := range layouts {
			p, err := Decode(l, id)
			if err != nil {
				if id >= 0 && (l.total == 63 || id>>l.total == 0) {
					t.Fatalf("%s: Decode(%d) = %v", l.name, id, err)
				}
				continue
			}
			back, err := Compose(l, p)
			if err != nil || back != id {
				t.Fatalf("%s: Compose(Decode(%d)) = %d, %v", l.name, id, back, err)
			}
		}
	})
}
