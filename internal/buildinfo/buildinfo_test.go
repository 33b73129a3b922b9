package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{
		Main: debug.Module{Path: "harness", Version: "(devel)"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-11-01T10:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	got := FromBuildInfo(bi, "")
	want := Info{Version: DevVersion, Revision: "0123456789abcdef0123456789abcdef01234567", Time: "2026-11-01T10:00:00Z", Dirty: true}
	if got != want {
		t.Fatalf("FromBuildInfo = %+v, want %+v", got, want)
	}
	if s := got.String(); s != "0.1.0-dev (revision 0123456789ab, dirty)" {
		t.Errorf("String = %q", s)
	}
	bi.Main.Version = "v1.2.3"
	bi.Settings[3].Value = "false"
	if got := FromBuildInfo(bi, ""); got.Version != "v1.2.3" || got.Dirty {
		t.Errorf("module version: %+v", got)
	}
	if got := FromBuildInfo(bi, "9.9.9"); got.Version != "9.9.9" {
		t.Errorf("override: %+v", got)
	}
	if got := FromBuildInfo(nil, ""); got != (Info{Version: DevVersion}) || got.String() != "0.1.0-dev (no VCS revision)" {
		t.Errorf("no build info: %+v %q", got, got.String())
	}
}
