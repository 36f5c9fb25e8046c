// Package buildinfo says which build of yip-router is running, for
// `yip-router version`, `--version` and the yip_build_info metric: the
// version stamped at link time (make build stamps `git describe`), else
// what the Go toolchain recorded in the binary (the module version of a
// `go install …@vX`, or the VCS revision of a build in a checkout), else
// "dev".
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// version is set with -ldflags "-X github.com/yip-router/yip-router/internal/buildinfo.version=…".
var version string

// Version is the running build's version.
func Version() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	return fromBuildInfo(bi)
}

// fromBuildInfo picks a version from what the toolchain recorded.
func fromBuildInfo(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value[:min(len(s.Value), 12)]
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return "dev"
	}
	return rev + dirty
}

// Go is the Go release the binary was built with.
func Go() string { return runtime.Version() }
