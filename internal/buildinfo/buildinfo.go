// Package buildinfo says which build of harness is running: its version,
// the VCS revision it was built from and whether the work tree had
// uncommitted changes, read from the information the Go toolchain embeds
// in every binary.
package buildinfo

import (
	"fmt"
	"runtime/debug"
)

// DevVersion is the version of a build that carries no release version:
// one made with go build or go run from a work tree.
const DevVersion = "0.1.0-dev"

// Info identifies a build.
type Info struct {
	// Version is the release version (a module version such as v1.2.0,
	// or the one set with -ldflags "-X"), else DevVersion.
	Version string
	// Revision is the VCS commit the binary was built from; empty when
	// the build had no VCS information (a tree without .git, or
	// -buildvcs=false).
	Revision string
	// Time is the commit time of Revision (RFC 3339), when known.
	Time string
	// Dirty reports uncommitted changes in the work tree at build time.
	Dirty bool
}

// Read returns the running binary's build information. override, when not
// empty, is the version set at link time and wins over the module version.
func Read(override string) Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return FromBuildInfo(nil, override)
	}
	return FromBuildInfo(bi, override)
}

// FromBuildInfo extracts Info from bi (which may be nil).
func FromBuildInfo(bi *debug.BuildInfo, override string) Info {
	info := Info{Version: DevVersion}
	if bi != nil {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			info.Version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.time":
				info.Time = s.Value
			case "vcs.modified":
				info.Dirty = s.Value == "true"
			}
		}
	}
	if override != "" {
		info.Version = override
	}
	return info
}

// String is the one-line form harness version prints:
// "0.1.0-dev (revision 1a2b3c4d5e6f, dirty)".
func (i Info) String() string {
	if i.Revision == "" {
		return i.Version + " (no VCS revision)"
	}
	rev := i.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	dirty := ""
	if i.Dirty {
		dirty = ", dirty"
	}
	return fmt.Sprintf("%s (revision %s%s)", i.Version, rev, dirty)
}
