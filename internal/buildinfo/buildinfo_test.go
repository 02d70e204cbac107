package buildinfo

import (
	"runtime/debug"
	"testing"
)

// TestMerge: the stamp wins field by field; what it lacks comes from the
// toolchain's build information, and what neither has reads "unknown",
// never "".
func TestMerge(t *testing.T) {
	vcs := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-12-07T05:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	for _, c := range []struct {
		name  string
		stamp Info
		bi    *debug.BuildInfo
		want  Info
	}{
		{"nothing", Info{}, nil, Info{Version: "(devel)", Commit: Unknown, CommitTime: Unknown, Modified: Unknown}},
		{"vcs only", Info{}, vcs, Info{Version: "(devel)", Commit: "0123456789abcdef0123456789abcdef01234567", CommitTime: "2026-12-07T05:00:00Z", Modified: "true", GoVersion: "go1.26.8"}},
		{"module version", Info{}, &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, Info{Version: "v1.4.0", Commit: Unknown, CommitTime: Unknown, Modified: Unknown}},
		{"stamp wins", Info{Version: "v2.0.0", Commit: "feedfacefeedfacefeedfacefeedfacefeedface", CommitTime: "2026-01-02T03:04:05Z", Modified: "false"}, vcs,
			Info{Version: "v2.0.0", Commit: "feedfacefeedfacefeedfacefeedfacefeedface", CommitTime: "2026-01-02T03:04:05Z", Modified: "false", GoVersion: "go1.26.8"}},
		{"partial stamp", Info{Version: "v2.0.0"}, vcs, Info{Version: "v2.0.0", Commit: "0123456789abcdef0123456789abcdef01234567", CommitTime: "2026-12-07T05:00:00Z", Modified: "true", GoVersion: "go1.26.8"}},
	} {
		got := merge(c.stamp, c.bi)
		if c.want.GoVersion == "" {
			c.want.GoVersion = got.GoVersion // the running toolchain's
		}
		c.want.Platform = got.Platform
		if got != c.want {
			t.Errorf("%s: merge = %+v, want %+v", c.name, got, c.want)
		}
		if got.GoVersion == "" || got.Platform == "" {
			t.Errorf("%s: empty Go version or platform: %+v", c.name, got)
		}
	}
	if s := merge(Info{}, vcs).ShortCommit(); s != "0123456789ab" {
		t.Errorf("ShortCommit = %q, want 12 digits", s)
	}
}

// TestStampThenGet: Get returns what Stamp recorded.
func TestStampThenGet(t *testing.T) {
	Stamp("v9.9.9-test", "abc", "", "")
	t.Cleanup(func() { Stamp("", "", "", "") })
	if in := Get(); in.Version != "v9.9.9-test" || in.Commit != "abc" {
		t.Errorf("Get after Stamp = %+v", in)
	}
}
