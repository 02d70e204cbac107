package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3";
// otherwise the module version or VCS revision from the build info is used.
var version = ""

func init() {
	register(command{name: "version", summary: "print idmint's version", run: runVersion})
}

func runVersion(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "version", "")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	v := version
	if v == "" {
		v = "(devel)"
		if bi, ok := debug.ReadBuildInfo(); ok {
			if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
				v = bi.Main.Version
			}
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" && len(s.Value) >= 12 {
					v += " " + s.Value[:12]
				}
			}
		}
	}
	fmt.Fprintf(e.stdout, "idmint %s %s %s/%s\n", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
