package snowflake_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/snowflake"
)

func ExampleNew() {
	layout, _ := snowflake.Lookup("twitter")
	// A fake clock makes the output reproducible; omit Clock in production.
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	gen, err := snowflake.New(layout, snowflake.Settings{
		Node:  map[string]int64{"datacenter": 1, "worker": 3},
		Clock: clk,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer gen.Close()
	ctx := context.Background()
	for range 3 {
		id, err := gen.Next(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(id)
	}
	// Output:
	// 2006924427392069632
	// 2006924427392069633
	// 2006924427392069634
}

func ExampleDecode() {
	layout, _ := snowflake.Lookup("twitter")
	p, err := snowflake.Decode(layout, 1541815603606036480) // a tweet by @Wikipedia
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Time.Format(time.RFC3339Nano))
	fmt.Println("datacenter", p.Node["datacenter"], "worker", p.Node["worker"], "sequence", p.Sequence)
	// Output:
	// 2022-06-28T16:07:40.105Z
	// datacenter 11 worker 26 sequence 0
}

func ExampleCompose() {
	layout, _ := snowflake.Lookup("discord")
	id, err := snowflake.Compose(layout, snowflake.Parts{
		Time:     time.Date(2016, 4, 30, 11, 18, 25, 796e6, time.UTC),
		Node:     map[string]int64{"worker": 1, "process": 0},
		Sequence: 7,
	})
	fmt.Println(id, err)
	// Output:
	// 175928847299117063 <nil>
}

func ExampleParseLayout() {
	layout, err := snowflake.ParseLayout("time=41:1ms,region=3,worker=7,seq=12:rand10,epoch=2024-01-01")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(layout)
	fmt.Println("ends", layout.End().Format(time.RFC3339), "capacity/s", layout.CapacityPerSecond())

	_, err = snowflake.ParseLayout("time=41:1ms,worker=11,seq=12,epoch=2024-01-01")
	fmt.Println(err)
	// Output:
	// time=41:1ms,region=3,worker=7,seq=12:rand10,epoch=2024-01-01T00:00:00Z
	// ends 2093-09-06T15:47:35Z capacity/s 4.096e+06
	// snowflake: seq bits "12": makes the layout 64 bits wide: time and fields must fit in 63 bits so IDs stay positive int64
}

func ExampleLayouts() {
	for _, l := range snowflake.Layouts() {
		fmt.Printf("%-12s %2d bits  ends %s\n", l.Name(), l.Bits(), l.End().Format(time.DateOnly))
	}
	// Output:
	// twitter      63 bits  ends 2080-07-10
	// leaf         63 bits  ends 2080-07-10
	// sonyflake    63 bits  ends 2188-11-16
	// instagram    63 bits  ends 2046-06-27
	// baidu        63 bits  ends 2024-11-20
	// customuuid   63 bits  ends 2045-09-06
	// simpleflake  63 bits  ends 2069-09-06
	// discord      63 bits  ends 2084-09-06
	// jssafe       53 bits  ends 2112-02-09
}

func ExampleNewFileHorizon() {
	dir, _ := os.MkdirTemp("", "idmint-example")
	defer os.RemoveAll(dir)
	layout, _ := snowflake.Lookup("twitter")
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	gen, _ := snowflake.New(layout, snowflake.Settings{
		Node:    map[string]int64{"datacenter": 0, "worker": 1},
		Clock:   clk,
		Horizon: snowflake.NewFileHorizon(filepath.Join(dir, "worker-1.horizon")),
	})
	defer gen.Close()
	if _, err := gen.Next(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	// The horizon is on disk, 3 s (HorizonLead) ahead of the first ID.
	fmt.Println("horizon", gen.Horizon().Format(time.RFC3339Nano))
	// Output:
	// horizon 2026-01-02T03:04:08.001Z
}

func ExampleClockBehindError() {
	layout, _ := snowflake.Lookup("twitter")
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	gen, _ := snowflake.New(layout, snowflake.Settings{Node: map[string]int64{"datacenter": 0, "worker": 1}, Clock: clk})
	defer gen.Close()
	gen.Next(context.Background())
	clk.Step(-time.Minute) // an operator sets the clock back
	_, err := gen.Next(context.Background())
	fmt.Println(err)
	// Output:
	// snowflake: clock moved backwards: 1m0s behind the last issued ID (waits out at most 5ms)
}
