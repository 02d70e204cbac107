package main

import (
	"context"
	"fmt"
	"time"

	"github.com/idmint/idmint/instagram"
)

func init() {
	register(command{name: "sql", summary: "print SQL that issues IDs inside the database: idmint sql instagram --schema S --shard N", run: runSQL})
}

func runSQL(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
		fmt.Fprintln(e.stdout, "Usage: idmint sql instagram --schema NAME --shard N [flags]\n\n"+
			"Prints the PL/pgSQL of Instagram's in-database IDs for one shard.\nRun `idmint sql instagram -h` for the flags.")
		return nil
	}
	if len(args) == 0 || args[0] != "instagram" {
		return usagef("want `idmint sql instagram --schema NAME --shard N` (the only in-database generator)")
	}
	fs := newFlags(e, "sql instagram", "--schema NAME --shard N [--sequence NAME] [--function NAME] [--epoch-ms MS]")
	schema := fs.String("schema", "", "PostgreSQL schema of the shard, e.g. shard_5")
	shard := fs.Int("shard", -1, "logical shard ID stamped into every ID (0..8191)")
	seq := fs.String("sequence", "", "sequence name inside the schema (default table_id_seq)")
	fn := fs.String("function", "", "function name inside the schema (default next_id)")
	epoch := fs.Int64("epoch-ms", 0, "custom epoch in Unix milliseconds (default Instagram's 1314220021721)")
	if err := parseNoArgs(fs, args[1:]); err != nil {
		return err
	}
	o := instagram.Options{Schema: *schema, Shard: *shard, Sequence: *seq, Function: *fn}
	if *epoch != 0 {
		o.Epoch = time.UnixMilli(*epoch)
	}
	script, err := instagram.Render(o)
	if err != nil {
		return usagef("%v", err)
	}
	fmt.Fprint(e.stdout, script)
	return nil
}
