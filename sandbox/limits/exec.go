package limits

import "strconv"

// wrapperScript is the wrapper that puts a command under its Group's
// cgroups and rlimits before it starts anything: a /bin/sh script that
// writes "0" (itself) into each cgroup.procs, sets RLIMIT_DATA, and execs
// the command (same pid). A shell starts in a millisecond, where the
// harness executable took tens. Its arguments, after $0:
// [--cgroup DIR]... [--rlimit-data KIB] -- COMMAND ARGS...; any failure
// exits 125 without running the command uncapped.
const wrapperScript = `while [ "$1" != -- ]; do
	case $1 in
	--cgroup)
		{ printf 0 >"$2/cgroup.procs"; } 2>/dev/null || { echo "harness sandbox: cannot join the cgroup $2" >&2; exit 125; } ;;
	--rlimit-data)
		ulimit -d "$2" 2>/dev/null || { echo "harness sandbox: cannot set the data rlimit to $2 KiB" >&2; exit 125; } ;;
	esac
	shift 2
done
shift
exec "$@"`

// wrapperName is the wrapper's $0, which names it in ps and in its errors.
const wrapperName = "harness-sandbox-caps"

// WrapperArgs returns the command-line prefix that puts a command under
// the Group's cgroups and rlimits before it starts anything:
// /bin/sh -c SCRIPT harness-sandbox-caps [--cgroup DIR]... [--rlimit-data
// KIB] --. It is empty when nothing needs the wrapper.
func (g *Group) WrapperArgs() []string {
	if len(g.dirs) == 0 && g.rlimitData == 0 {
		return nil
	}
	a := []string{"/bin/sh", "-c", wrapperScript, wrapperName}
	for _, d := range g.dirs {
		a = append(a, "--cgroup", d.path)
	}
	if g.rlimitData > 0 {
		// ulimit counts KiB; rounded up, the cap stays above rlimitSlack.
		a = append(a, "--rlimit-data", strconv.FormatInt((g.rlimitData+1023)/1024, 10))
	}
	return append(a, "--")
}
