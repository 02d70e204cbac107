package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idmint/idmint/region"
	"github.com/idmint/idmint/server/strategies"
	"github.com/idmint/idmint/sqldb"
	"github.com/idmint/idmint/witness"
)

func init() {
	register(command{name: "region", summary: "retire a region from a region registry, freeing its index: idmint region release --registry URL --name NAME", run: runRegion})
}

const regionSynopsis = "release --registry URL --name NAME"

func runRegion(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] != "release" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help") {
			fmt.Fprintf(e.stdout, "Usage: idmint region %s\n\nRun `idmint region release -h` for the flags.\n", regionSynopsis)
			return flag.ErrHelp
		}
		got := "nothing"
		if len(args) > 0 {
			got = strconv.Quote(args[0])
		}
		return usagef("missing action: want `idmint region %s`, got %s", regionSynopsis, got)
	}
	return runRegionRelease(ctx, e, args[1:])
}

// runRegionRelease deletes a region's claim (its index and its name) from
// the registry its nodes name in region.registry, so another region may
// take the index. The retired region's IDs stay issued: a region that
// takes the index continues above nothing, so release an index only to a
// region whose stores continue the retired one's counters (or never).
func runRegionRelease(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "region release", "--registry URL --name NAME")
	reg := fs.String("registry", "", "the registry URL the regions' configs give as region.registry (etcd://host:2379/prefix, postgres://..., mysql://...)")
	name := fs.String("name", "", "the region to retire (region.name)")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	scheme, _, _ := strings.Cut(*reg, "://")
	switch strings.ToLower(scheme) {
	case "etcd", "postgres", "postgresql", "mysql":
	default:
		return usagef("flag --registry: %q is not an etcd://, postgres:// or mysql:// URL", sqldb.Redact(*reg))
	}
	if err := (region.Region{Name: *name, Count: 1}).Validate(); err != nil {
		return usagef("flag --name: %q is not a region name (lower-case letters, digits and '-')", *name)
	}
	w, err := witness.Open(ctx, *reg, 5*time.Second)
	if err != nil {
		return err
	}
	defer w.Close()
	rec, ok := w.(witness.Recorder)
	if !ok {
		return fmt.Errorf("registry %s keeps no records", sqldb.Redact(*reg))
	}
	i, err := strategies.ReleaseRegion(ctx, rec, *name)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "region %s released index %d\n", *name, i)
	return nil
}
