package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/idmint/idmint/internal/idtext"
	"github.com/idmint/idmint/worker"
)

func init() {
	register(command{name: "workers", summary: "list who holds which worker ID, since when, and its horizon: idmint workers --coordinator URL", run: runWorkers})
}

func runWorkers(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "workers", "[--coordinator URL] [--json]")
	coord := fs.String("coordinator", "", "coordinator URL (default: the file coordinator of ./idmint-data, where a zero-config idmint serve keeps its worker ID): file:///path, etcd://host:2379/prefix?name=app, zk://host:2181/snowflake/name, postgres://..., mysql://..., sqlite:///path, static://N?horizon=FILE (the horizon file of a static, ip or mac coordinator)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *coord == "" {
		// A file:// URL takes an absolute path only, so the default is
		// resolved against the working directory here.
		abs, err := filepath.Abs(filepath.Join("idmint-data", "worker"))
		if err != nil {
			return err
		}
		// Without a data directory here there is nothing to list, and an
		// empty table would not say where it looked.
		if _, err := os.Stat(filepath.Dir(abs)); err != nil {
			return fmt.Errorf("no data directory at %s (where a zero-config idmint serve started in this folder keeps its worker ID): run idmint workers where serve runs, or name the coordinator with --coordinator URL", filepath.Dir(abs))
		}
		*coord = "file://" + filepath.ToSlash(abs)
	}
	a, err := worker.Open(ctx, *coord)
	if err != nil {
		if errors.Is(err, worker.ErrBadURL) {
			return usagef("flag --coordinator: %v", err)
		}
		return err
	}
	defer a.Close()
	hs, err := a.List(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(hs)
	}
	w := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tLIVE\tGENERATION\tHOLDER\tSINCE\tHORIZON")
	for _, h := range hs {
		fmt.Fprintf(w, "%d\t%v\t%d\t%s\t%s\t%s\n", h.ID, h.Live, h.Generation, idtext.Printable(h.Holder), stamp(h.Since), stamp(h.Horizon))
	}
	if len(hs) == 0 {
		fmt.Fprintf(w, "(no worker IDs recorded in %s)\n", idtext.Printable(*coord))
	}
	return w.Flush()
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z") + " (" + strconv.FormatInt(t.UnixMilli(), 10) + ")"
}
