package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/server/strategies"
	"github.com/idmint/idmint/sqldb"
)

func init() {
	register(command{name: "monotonic", summary: "seed a monotonic key's bound so it starts above a value: idmint monotonic seed KEY VALUE --data DIR", run: runMonotonic})
}

const monotonicSynopsis = "seed KEY VALUE [--config idmint.yaml] [--data DIR] [--coordinator URL]"

func runMonotonic(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] != "seed" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help") {
			fmt.Fprintf(e.stdout, "Usage: idmint monotonic %s\n\nRun `idmint monotonic seed -h` for the flags.\n", monotonicSynopsis)
			return flag.ErrHelp
		}
		got := "nothing"
		if len(args) > 0 {
			got = strconv.Quote(args[0])
		}
		return usagef("missing action: want `idmint monotonic %s`, got %s", monotonicSynopsis, got)
	}
	return runMonotonicSeed(ctx, e, args[1:])
}

// runMonotonicSeed raises a monotonic key's marks in the data directory's
// witness and the cluster witness the configuration implies (the same ones
// `idmint serve` opens), so the key's next start serves above VALUE.
func runMonotonicSeed(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "monotonic seed", "KEY VALUE [--config idmint.yaml] [--data DIR] [--coordinator URL]")
	var f serveFlags
	fs.StringVar(&f.config, "config", "", "YAML config file of the node (env IDMINT_CONFIG): its data_dir, coordinator and witness")
	fs.StringVar(&f.data, "data", "", "data directory (env IDMINT_DATA_DIR; default ./"+server.DefaultDataDir+"); it must not be in use by a running idmint serve")
	fs.StringVar(&f.coordinator, "coordinator", "", "the node's coordinator URL (env IDMINT_COORDINATOR): an etcd:// or zk:// coordinator is the cluster witness, seeded too")
	for _, a := range args {
		// A negative VALUE would otherwise be taken for an unknown flag.
		if _, err := strconv.ParseInt(a, 10, 64); err == nil && a[0] == '-' {
			return usagef("argument VALUE: %s is negative: a seed is a non-negative integer (the key's next start serves above it)", a)
		}
	}
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) < 2:
		return usagef("missing argument: want KEY VALUE (run `idmint monotonic seed -h`)")
	case len(pos) > 2:
		return usagef("unexpected argument %q (idmint monotonic seed takes KEY VALUE)", pos[2])
	}
	key := pos[0]
	if err := server.CheckName(key); err != nil {
		return usagef("argument KEY: %v", err)
	}
	value, err := strconv.ParseInt(pos[1], 10, 64)
	if err != nil || value < 0 {
		return usagef("argument VALUE: %q is not a non-negative integer (the key's next start serves above it)", pos[1])
	}
	reg := server.NewRegistry()
	if err := strategies.Register(reg); err != nil {
		return err
	}
	cfg, err := loadServeConfig(e, f, reg)
	if err != nil {
		return err
	}
	// Only what the seed uses must be valid: the data directory, the
	// coordinator and witness (where the marks go), and the key itself.
	// Other keys' problems are serve's to report.
	if err := cfg.Validate(reg); err != nil {
		var ve *server.ValidationError
		if !errors.As(err, &ve) {
			return err
		}
		var ps []server.Problem
		for _, p := range ve.Problems {
			switch {
			case p.Field == "data_dir", p.Field == "coordinator", p.Field == "witness",
				p.Field == "keys."+key, strings.HasPrefix(p.Field, "keys."+key+"."):
				ps = append(ps, p)
			}
		}
		if len(ps) > 0 {
			return configProblems(ps)
		}
	}
	if k, ok := cfg.Keys[key]; ok && k.Strategy != "monotonic" {
		return usagef("argument KEY: %q is a %s key in the configuration, not a monotonic one", key, k.Strategy)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	// A running server holds the data directory: the marks it keeps in
	// memory would not see the seed, and its key has started already.
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		if errors.Is(err, errDataDirInUse) {
			return fmt.Errorf("cannot seed while idmint serve runs on the data directory: stop it, seed, then start it again "+
				"(the key's next start serves above the seed): %w", err)
		}
		return err
	}
	defer lock.Release()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	marks, err := strategies.SeedMonotonic(ctx, cfg, nil, key, value)
	if err != nil {
		return err
	}
	above := value
	for _, m := range marks {
		above = max(above, m.After)
	}
	dir, _ := filepath.Abs(cfg.DataDir)
	fmt.Fprintf(e.stdout, "monotonic key %q seeded at %d (data directory %s, coordinator %s): its next start serves above %d\n",
		key, value, dir, sqldb.Redact(cfg.Coordinator), above)
	w := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "WITNESS\tBEFORE\tMARK")
	for _, m := range marks {
		note := ""
		if m.Before > value {
			note = " (already above the seed: unchanged)"
		}
		fmt.Fprintf(w, "%s\t%d\t%d%s\n", m.Witness, m.Before, m.After, note)
	}
	if _, ok := cfg.Keys[key]; !ok {
		fmt.Fprintf(w, "(note: %q is not a key of this configuration; the mark waits for a monotonic key of that name)\n", key)
	}
	return w.Flush()
}
