package limits

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	good := map[string]int64{
		"0": 0, "1024": 1024, "512M": 512 << 20, "4G": 4 << 30, "4g": 4 << 30, "1.5G": 3 << 29,
		"100K": 100 << 10, "2T": 2 << 40, "512MiB": 512 << 20, "512MB": 512 << 20, " 8M ": 8 << 20, "3 GiB": 3 << 30,
	}
	for in, want := range good {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "M", "-1G", "12X", "1.G", "abc", "1e400", "9999999T"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, no error", in, got)
		} else if !strings.Contains(err.Error(), "size") {
			t.Errorf("ParseSize(%q) error %q does not say what", in, err)
		}
	}
}

func TestParseCPUsAndPids(t *testing.T) {
	if v, err := ParseCPUs("1.5"); err != nil || v != 1.5 {
		t.Errorf("ParseCPUs(1.5) = %v, %v", v, err)
	}
	if v, err := ParseCPUs("0"); err != nil || v != 0 {
		t.Errorf("ParseCPUs(0) = %v, %v", v, err)
	}
	for _, in := range []string{"", "-1", "x", "0.001", "NaN", "Inf"} {
		if _, err := ParseCPUs(in); err == nil {
			t.Errorf("ParseCPUs(%q): no error", in)
		}
	}
	if v, err := ParsePids("1024"); err != nil || v != 1024 {
		t.Errorf("ParsePids(1024) = %v, %v", v, err)
	}
	for _, in := range []string{"", "-1", "1.5", "many"} {
		if _, err := ParsePids(in); err == nil {
			t.Errorf("ParsePids(%q): no error", in)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for in, want := range map[int64]string{100: "100 bytes", 1 << 10: "1 KiB", 512 << 20: "512 MiB", 3 << 29: "1.5 GiB", 5 << 40: "5 TiB"} {
		if got := FormatSize(in); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestDefaultCaps(t *testing.T) {
	if got := DefaultCapsFor(24<<30, 2); got != (Caps{MemoryBytes: 4 << 30, Pids: 4096, DiskBytes: 10 << 30}) {
		t.Errorf("big host: %+v", got)
	}
	if got := DefaultCapsFor(2<<30, 128); got != (Caps{MemoryBytes: 1 << 30, Pids: 128 * 64, DiskBytes: 10 << 30}) {
		t.Errorf("small host, many CPUs: %+v", got)
	}
	if c := DefaultCaps(); c.MemoryBytes <= 0 || c.Pids <= 0 || c.DiskBytes <= 0 || c.CPUs != 0 {
		t.Errorf("DefaultCaps() = %+v", c)
	}
}

func TestParseStat(t *testing.T) {
	line := "4242 (a (b) c) S 17 4242 4242 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 7 0 123456 1000000 300 18446744073709551615"
	p, ok := parseStat(4242, line)
	if !ok || p.ppid != 17 || p.state != 'S' || p.threads != 7 || p.start != 123456 || p.rss != 300*int64(os.Getpagesize()) {
		t.Errorf("parseStat = %+v, %v", p, ok)
	}
	if _, ok := parseStat(1, "1 (x) S 0"); ok {
		t.Error("short line parsed")
	}
}

func TestCommonAncestorAndDirOf(t *testing.T) {
	if got := commonAncestor("/sys/fs/cgroup/a/b", "/sys/fs/cgroup/a/c/x"); got != "/sys/fs/cgroup/a" {
		t.Errorf("commonAncestor = %s", got)
	}
	if got := dirOf(mount{dir: "/sys/fs/cgroup", root: "/"}, "/user.slice/x.scope"); got != "/sys/fs/cgroup/user.slice/x.scope" {
		t.Errorf("dirOf = %s", got)
	}
	// A container sees its own subtree mounted as the root.
	if got := dirOf(mount{dir: "/sys/fs/cgroup", root: "/docker/abc"}, "/docker/abc/sub"); got != "/sys/fs/cgroup/sub" {
		t.Errorf("dirOf in a container = %s", got)
	}
	if got := dirOf(mount{dir: "/sys/fs/cgroup", root: "/docker/abc"}, "/other"); got != "" {
		t.Errorf("dirOf outside the mount = %s", got)
	}
	if got := unescape(`/a\040b`); got != "/a b" {
		t.Errorf("unescape = %q", got)
	}
}

// fakeV2 builds a cgroup v2 tree whose controllers are delegated to the
// parent of this process's cgroup (as systemd delegates user@.service),
// and none to the process's own.
func fakeV2(t *testing.T) (host, string) {
	t.Helper()
	root := t.TempDir()
	cg := filepath.Join(root, "cg")
	own := filepath.Join(cg, "user.slice", "app.slice", "term.scope")
	for _, d := range []string{own} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(own, "cgroup.controllers"), "")
	write(filepath.Join(own, "cgroup.procs"), "1\n")
	up := filepath.Dir(own)
	write(filepath.Join(up, "cgroup.controllers"), "cpuset cpu io memory pids\n")
	write(filepath.Join(up, "cgroup.subtree_control"), "memory pids\n")
	write(filepath.Join(up, "cgroup.procs"), "")
	write(filepath.Join(root, "mountinfo"), "30 1 0:26 / "+cg+" rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n")
	write(filepath.Join(root, "cgroup"), "0::/user.slice/app.slice/term.scope\n")
	return host{selfCgroup: filepath.Join(root, "cgroup"), mountinfo: filepath.Join(root, "mountinfo"), proc: "/proc"}, up
}

// emptyDir removes the files a fake cgroup got, as the kernel would on
// rmdir.
func emptyDir(t *testing.T, dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		os.Remove(filepath.Join(dir, e.Name()))
	}
}

func TestCgroupV2Delegated(t *testing.T) {
	h, parent := fakeV2(t)
	g, warns, err := New(Caps{MemoryBytes: 512 << 20, Pids: 100, CPUs: 1.5, Names: Names{Memory: "mem-setting"}}, Options{host: &h})
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 0 {
		t.Errorf("warnings %q", warns)
	}
	if len(g.dirs) != 1 || filepath.Dir(g.dirs[0].path) != parent || !g.dirs[0].v2 {
		t.Fatalf("dirs %+v, want one v2 group beside this process's, under %s", g.dirs, parent)
	}
	dir := g.dirs[0].path
	for file, want := range map[string]string{"memory.max": "536870912", "memory.swap.max": "0", "memory.oom.group": "1", "pids.max": "100", "cpu.max": "150000 100000"} {
		if b, _ := os.ReadFile(filepath.Join(dir, file)); string(b) != want {
			t.Errorf("%s = %q, want %q", file, b, want)
		}
	}
	// cpu was delegated but not enabled for children: New enables it.
	if b, _ := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control")); !strings.Contains(string(b), "cpu") {
		t.Errorf("subtree_control = %q, want cpu enabled", b)
	}
	want := []Applied{
		{Cap: "memory", Value: "512 MiB", How: "cgroup v2"},
		{Cap: "pids", Value: "100", How: "cgroup v2"},
		{Cap: "cpus", Value: "1.5", How: "cgroup v2"},
		{Cap: "disk", Value: "0", How: "no cap"},
	}
	if got := g.Applied(); !reflect.DeepEqual(got, want) {
		t.Errorf("applied %+v\nwant %+v", got, want)
	}
	if got := g.WrapperArgs(); !reflect.DeepEqual(got, []string{"/bin/sh", "-c", wrapperScript, wrapperName, "--cgroup", dir, "--"}) {
		t.Errorf("wrapper args %q", got)
	}
	// No event yet, then an OOM kill.
	if g.check(false) {
		t.Errorf("hit %q before any event", g.Hit())
	}
	os.WriteFile(filepath.Join(dir, "memory.events"), []byte("low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "pids.events"), []byte("max 3\n"), 0o644)
	if !g.check(false) || g.Hit() != "memory over the 512 MiB cap (mem-setting)" {
		t.Errorf("hit %q after an OOM kill", g.Hit())
	}
	emptyDir(t, dir)
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s left", dir)
	}
	if g.Hit() != "memory over the 512 MiB cap (mem-setting)" {
		t.Errorf("first hit not kept: %q", g.Hit())
	}
}

func TestCgroupParentMustWork(t *testing.T) {
	h, _ := fakeV2(t)
	if _, _, err := New(Caps{Pids: 10}, Options{host: &h, CgroupParent: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "not a cgroup v2 directory") {
		t.Errorf("err = %v", err)
	}
	if _, _, err := New(Caps{Pids: 10}, Options{CgroupParent: "/x", NoCgroup: true}); err == nil {
		t.Error("no error for a parent with cgroups off")
	}
	if _, _, err := New(Caps{Pids: -1}, Options{}); err == nil {
		t.Error("no error for a negative cap")
	}
}

func TestNoCapsNeedNoWrapper(t *testing.T) {
	g, warns, err := New(Caps{}, Options{NoCgroup: true})
	if err != nil || len(warns) != 0 {
		t.Fatal(err, warns)
	}
	defer g.Close()
	if a := g.WrapperArgs(); a != nil {
		t.Errorf("wrapper args %q for no caps", a)
	}
	g2, warns, _ := New(Caps{DiskBytes: 1 << 20, Names: Names{Disk: "disk-setting"}}, Options{NoCgroup: true})
	defer g2.Close()
	if len(warns) != 1 || !strings.Contains(warns[0], "the disk cap of 1 MiB (disk-setting) is not applied") {
		t.Errorf("warnings %q", warns)
	}
}

// The wrapper joins every cgroup and sets the data rlimit before it execs
// the command, with the same pid; a cgroup it cannot join stops the
// command from running.
func TestWrapperJoinsThenExecs(t *testing.T) {
	dir := t.TempDir()
	procs := filepath.Join(dir, "cgroup.procs")
	if err := os.WriteFile(procs, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	g := &Group{dirs: []cgroupDir{{path: dir}}, rlimitData: 3 << 30}
	argv := append(g.WrapperArgs(), "/bin/sh", "-c", `echo "pid $$ data $(ulimit -d) joined $(cat "$0")"`, procs)
	cmd := exec.Command(argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if want := fmt.Sprintf("pid %d data %d joined 0\n", pid, 3<<20); out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
	g = &Group{dirs: []cgroupDir{{path: filepath.Join(dir, "gone")}}}
	argv = append(g.WrapperArgs(), "/bin/sh", "-c", "echo ran")
	out.Reset()
	cmd = exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 125 || strings.Contains(out.String(), "ran") || !strings.Contains(out.String(), "cannot join the cgroup "+filepath.Join(dir, "gone")) {
		t.Errorf("err %v, output %q", err, out.String())
	}
}

// A Group that never started a command is closed without walking its disk
// directories: the sandbox makes one only to learn how the caps apply, over
// the whole temp directory, and closing it must not cost a walk of it.
func TestCloseWithoutStartDoesNotWalkTheDisk(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "big"), bytes.Repeat([]byte("x"), 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	g, _, err := New(Caps{DiskBytes: 1 << 10}, Options{NoCgroup: true, DiskDirs: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if hit := g.Hit(); hit != "" {
		t.Errorf("a group never started was checked on Close: %s", hit)
	}
	// Started, the same group is checked a last time on Close.
	g, _, err = New(Caps{DiskBytes: 1 << 10}, Options{NoCgroup: true, DiskDirs: []string{dir}, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g.Start(cmd.Process.Pid, func() {})
	g.Close() // kills the sleep
	cmd.Wait()
	if g.HitCap() != CapDisk {
		t.Errorf("a started group's final check missed the disk over its cap: %q", g.Hit())
	}
}
