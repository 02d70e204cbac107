package snowflake

import (
	"errors"
	"maps"
	"strings"
	"testing"
	"time"
)

func TestParseLayout(t *testing.T) {
	t.Parallel()
	valid := []struct {
		text, want string
	}{
		{"twitter", "time=41:1ms,datacenter=5,worker=5,seq=12,epoch=2010-11-04T01:42:54.657Z"},
		{"time=41:1ms,datacenter=5,worker=5,seq=12,epoch=2010-11-04T01:42:54.657Z", "time=41:1ms,datacenter=5,worker=5,seq=12,epoch=2010-11-04T01:42:54.657Z"},
		{" Epoch = 1420070400000 , TIME=41:1ms, worker=5,process=5,sequence=12", "time=41:1ms,worker=5,process=5,seq=12,epoch=2015-01-01T00:00:00Z"},
		{"time=39:10ms,seq=8,machine=16,epoch=2014-09-01", "time=39:10ms,seq=8,machine=16,epoch=2014-09-01T00:00:00Z"},
		{"baidu,epoch=2024-11-21T00:00:00+08:00", "time=28:1s,worker=22,seq=13,epoch=2024-11-20T16:00:00Z"},
		{"time=20:1s,seq=10:rand,epoch=2020-01-01", "time=20:1s,seq=10:rand,epoch=2020-01-01T00:00:00Z"},
		{"time=20:1s,seq=10:rand1024,epoch=2020-01-01", "time=20:1s,seq=10:rand,epoch=2020-01-01T00:00:00Z"},
		{"name=orders,time=30:1s,shard=3,seq=8:rand7,epoch=2020-01-01", "time=30:1s,shard=3,seq=8:rand7,epoch=2020-01-01T00:00:00Z"},
	}
	for _, tt := range valid {
		l, err := ParseLayout(tt.text)
		if err != nil {
			t.Errorf("ParseLayout(%q) = %v", tt.text, err)
			continue
		}
		if got := l.String(); got != tt.want {
			t.Errorf("ParseLayout(%q).String() = %s, want %s", tt.text, got, tt.want)
		}
	}
	if l, _ := ParseLayout("name=orders,time=30:1s,seq=8,epoch=2020-01-01"); l.Name() != "orders" {
		t.Errorf("name= ignored: %q", l.Name())
	}
	invalid := []struct {
		text, names string
	}{
		{"", "layout spec"},
		{"flickr", `layout "flickr"`},
		{"twitter,worker=3", `worker "3"`},
		{"twitter,epoch=yesterday", `epoch "yesterday"`},
		{"time=41:1ms,worker=10,seq=12", "epoch"},
		{"worker=10,seq=12,epoch=2020-01-01", "time"},
		{"time=41,seq=12,epoch=2020-01-01", `time "41"`},
		{"time=x:1ms,seq=12,epoch=2020-01-01", `time bits "x"`},
		{"time=41:fortnight,seq=12,epoch=2020-01-01", `time unit "fortnight"`},
		{"time=41:1ms,time=41:1ms,seq=12,epoch=2020-01-01", `time "41:1ms"`},
		{"time=41:1ms,seq=12,epoch=2020-01-01,epoch=2021-01-01", `epoch "2021-01-01"`},
		{"time=41:1ms,worker=ten,seq=12,epoch=2020-01-01", `worker bits "ten"`},
		{"time=41:1ms,worker,seq=12,epoch=2020-01-01", `layout item "worker"`},
		{"time=41:1ms,seq=12:random,epoch=2020-01-01", `seq start "random"`},
		{"time=41:1ms,seq=12:rand1,epoch=2020-01-01", `seq start "rand1"`},
		{"time=41:1ms,seq=12:rand5000,epoch=2020-01-01", `seq start "5000"`},
		{"time=41:1ms,worker=10,worker=2,seq=12,epoch=2020-01-01", `field name "worker"`},
		{"time=41:1ms,worker=11,seq=12,epoch=2020-01-01", `seq bits "12"`},
		{"time=41:1ms,seq=12,epoch=2020-01-01," + strings.Repeat("x", 1100), "layout spec"},
	}
	for _, tt := range invalid {
		_, err := ParseLayout(tt.text)
		if !errors.Is(err, ErrInvalidLayout) || !strings.Contains(err.Error(), tt.names) {
			t.Errorf("ParseLayout(%.60q) = %v, want ErrInvalidLayout naming %s", tt.text, err, tt.names)
		}
	}
}

func TestParseNode(t *testing.T) {
	t.Parallel()
	got, err := ParseNode(" Worker=3, datacenter=1 ")
	if err != nil || !maps.Equal(got, map[string]int64{"worker": 3, "datacenter": 1}) {
		t.Fatalf("ParseNode = %v, %v", got, err)
	}
	if got, err := ParseNode(""); err != nil || len(got) != 0 {
		t.Fatalf("ParseNode(\"\") = %v, %v", got, err)
	}
	for text, names := range map[string]string{
		"worker":                      `node "worker"`,
		"worker=-1":                   `worker "-1"`,
		"worker=x":                    `worker "x"`,
		"worker=1,worker=2":           `worker "2"`,
		"worker=99999999999999999999": `worker "99999999999999999999"`,
	} {
		_, err := ParseNode(text)
		if !errors.Is(err, ErrInvalidNode) || !strings.Contains(err.Error(), names) {
			t.Errorf("ParseNode(%q) = %v, want ErrInvalidNode naming %s", text, err, names)
		}
	}
}

// FuzzParseLayout checks that ParseLayout never panics, that what it accepts
// is a valid layout, and that String round-trips.
func FuzzParseLayout(f *testing.F) {
	for _, l := range Layouts() {
		f.Add(l.String())
		f.Add(l.Name())
	}
	f.Add("baidu,epoch=2024-11-21")
	f.Add("time=30:10ms,region=7,seq=9:rand300,shard=17,epoch=2001-02-03T04:05:06.789Z")
	f.Add("time=1:1ns,seq=1,epoch=0")
	f.Fuzz(func(t *testing.T, text string) {
		l, err := ParseLayout(text)
		if err != nil {
			if !errors.Is(err, ErrInvalidLayout) {
				t.Fatalf("ParseLayout(%q) error %v does not wrap ErrInvalidLayout", text, err)
			}
			return
		}
		if l.Bits() > 63 || l.End().Before(l.Epoch()) || l.SeqBits() < 1 {
			t.Fatalf("ParseLayout(%q) accepted a broken layout %v", text, l)
		}
		back, err := ParseLayout(l.String())
		if err != nil || back.String() != l.String() {
			t.Fatalf("round trip of %q: %q -> %v, %v", text, l.String(), back, err)
		}
		if _, err := Decode(l, 1<<l.Bits()-1); err != nil {
			t.Fatalf("Decode of the widest ID of %v: %v", l, err)
		}
		_ = l.Check(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	})
}

func FuzzParseNode(f *testing.F) {
	f.Add("worker=3,datacenter=1")
	f.Add("a=1,,b=2")
	f.Fuzz(func(t *testing.T, text string) {
		m, err := ParseNode(text)
		if err != nil {
			if !errors.Is(err, ErrInvalidNode) {
				t.Fatalf("ParseNode(%q) error %v does not wrap ErrInvalidNode", text, err)
			}
			return
		}
		for k, v := range m {
			if v < 0 || k == "" {
				t.Fatalf("ParseNode(%q) = %v", text, m)
			}
		}
	})
}
