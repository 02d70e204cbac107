package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/idmint/idmint/snowflake"
)

func init() {
	register(command{name: "layouts", summary: "list the built-in snowflake layouts with their capacity and end date", run: runLayouts})
}

func runLayouts(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "layouts", "[--spec]")
	spec := fs.Bool("spec", false, "also print each layout as a spec usable with --layout")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	now := time.Now()
	w := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tBITS (time/node/seq)\tUNIT\tIDS/S PER NODE\tEPOCH\tENDS\tLEFT\tJS-SAFE")
	for _, l := range snowflake.Layouts() {
		node := 0
		for _, f := range l.NodeFields() {
			node += f.Bits
		}
		left := "EXPIRED"
		if r := l.Remaining(now); r > 0 {
			left = fmt.Sprintf("%.0f years", r.Hours()/24/365.25)
		}
		js := "no"
		if l.JSSafe() {
			js = "yes" // every ID <= 2^53-1: exact as a JavaScript number
		}
		fmt.Fprintf(w, "%s\t%d/%d/%d\t%v\t%.0f\t%s\t%s\t%s\t%s\n", l.Name(), l.TimeBits(), node, l.SeqBits(),
			l.Unit(), l.CapacityPerSecond(), l.Epoch().UTC().Format("2006-01-02"), l.End().UTC().Format("2006-01-02"), left, js)
		if *spec {
			fmt.Fprintf(w, "\t%s\n", l.String())
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, l := range snowflake.Layouts() {
		if l.Remaining(now) <= 0 {
			fmt.Fprintf(e.stdout, "\n%s: %s\n", l.Name(), l.Note())
		}
	}
	return nil
}
