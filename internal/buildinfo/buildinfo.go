// Package buildinfo says which build of idmint is running: its version,
// the commit it was built from, that commit's time and whether the work
// tree had changes. It is the one place `idmint version` and the server's
// idmint_build_info series take these from.
//
// A release build stamps them (scripts/release.sh passes -ldflags
// "-X main.version=... -X main.commit=... -X main.commitTime=...
// -X main.modified=...", and cmd/idmint hands them to Stamp before
// anything runs); what is not
// stamped comes from the build information the Go toolchain records in
// the binary (runtime/debug.ReadBuildInfo: the module version and, for a
// `go build` inside a git checkout, the settings vcs.revision, vcs.time and
// vcs.modified).
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// Unknown stands for a field neither stamped nor recorded by the
// toolchain (a test binary, `go run`, a build with -buildvcs=false).
const Unknown = "unknown"

// Info is one build's identity.
type Info struct {
	// Version is the stamped version, else the main module's version
	// (v1.2.3 for `go install ...@v1.2.3`), else "(devel)".
	Version string
	// Commit is the full git commit hash, or Unknown.
	Commit string
	// CommitTime is the commit's time, RFC 3339 in UTC, or Unknown.
	CommitTime string
	// Modified is "true" when the work tree had uncommitted changes,
	// "false" when it had none, Unknown when nobody recorded it.
	Modified string
	// GoVersion is the toolchain that built the binary (go1.26.8).
	GoVersion string
	// Platform is GOOS/GOARCH.
	Platform string
}

var (
	mu      sync.Mutex
	stamped Info // only Version, Commit, CommitTime, Modified
)

// Stamp records the values a release build set with -ldflags (modified:
// "true" or "false"); empty ones leave the build information's in place.
// cmd/idmint calls it once, at start-up.
func Stamp(version, commit, commitTime, modified string) {
	mu.Lock()
	defer mu.Unlock()
	stamped = Info{Version: version, Commit: commit, CommitTime: commitTime, Modified: modified}
}

// Get returns the running binary's identity: stamped values first, then
// the build information's.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	mu.Lock()
	s := stamped
	mu.Unlock()
	return merge(s, bi)
}

// merge fills in, field by field, what s (the stamp) lacks from bi (nil:
// none).
func merge(s Info, bi *debug.BuildInfo) Info {
	in := Info{Version: "(devel)", Commit: Unknown, CommitTime: Unknown, Modified: Unknown,
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			in.Version = v
		}
		if bi.GoVersion != "" {
			in.GoVersion = bi.GoVersion
		}
		for _, st := range bi.Settings {
			switch st.Key {
			case "vcs.revision":
				in.Commit = st.Value
			case "vcs.time":
				in.CommitTime = st.Value
			case "vcs.modified":
				in.Modified = st.Value
			}
		}
	}
	if s.Version != "" {
		in.Version = s.Version
	}
	if s.Commit != "" {
		in.Commit = s.Commit
	}
	if s.CommitTime != "" {
		in.CommitTime = s.CommitTime
	}
	if s.Modified != "" {
		in.Modified = s.Modified
	}
	return in
}

// ShortCommit is the commit's first 12 hex digits (the whole of a shorter
// or unknown one).
func (in Info) ShortCommit() string {
	if len(in.Commit) > 12 {
		return in.Commit[:12]
	}
	return in.Commit
}
