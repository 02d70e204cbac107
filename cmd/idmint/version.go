package main

import (
	"context"
	"fmt"

	"github.com/idmint/idmint/internal/buildinfo"
)

// A release build sets these with -ldflags "-X main.version=v1.2.3
// -X main.commit=<full hash> -X main.commitTime=2026-01-02T03:04:05Z
// -X main.modified=false"
// (scripts/release.sh, deploy/Dockerfile); whatever is left empty comes
// from the build information the Go toolchain records (see
// internal/buildinfo, which /metrics' idmint_build_info reads too).
var (
	version    = ""
	commit     = ""
	commitTime = ""
	modified   = "" // "true": the work tree had uncommitted changes
)

func init() {
	buildinfo.Stamp(version, commit, commitTime, modified)
	register(command{name: "version", summary: "print idmint's version, commit and build", run: runVersion})
}

// runVersion prints the build's identity: a first line "idmint VERSION
// GOVERSION OS/ARCH", then one "name: value" line each for the commit,
// its time and whether the work tree was modified.
func runVersion(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "version", "")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	in := buildinfo.Get()
	fmt.Fprintf(e.stdout, "idmint %s %s %s\ncommit:      %s\ncommit time: %s\nmodified:    %s\n",
		in.Version, in.GoVersion, in.Platform, in.Commit, in.CommitTime, in.Modified)
	return nil
}
