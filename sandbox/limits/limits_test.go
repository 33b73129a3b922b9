package limits

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// allocator returns a command that allocates and touches size bytes,
// says so, and waits to be killed.
func allocator(t *testing.T, size int64) []string {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("HARNESS_REQUIRE_AGENTS") != "" {
			t.Fatal("python3 not installed (scripts/test installs it)")
		}
		t.Skip("python3 not installed")
	}
	return []string{"python3", "-c", fmt.Sprintf("import time\nb = b'x' * %d\nprint('allocated', flush=True)\ntime.sleep(1000)", size)}
}

func requireBwrap(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("bwrap")
	if err != nil {
		if os.Getenv("HARNESS_REQUIRE_AGENTS") != "" {
			t.Fatal("bwrap not installed (scripts/test installs bubblewrap)")
		}
		t.Skip("bwrap not installed")
	}
	return p
}

// bwrapArgs is a minimal sandbox like the harness's: host read-only, a
// private /tmp, the workspace writable, its own PID namespace.
func bwrapArgs(bwrap, exe, ws string) []string {
	a := []string{bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"}
	if strings.HasPrefix(exe, "/tmp/") {
		dir := filepath.Dir(exe)
		a = append(a, "--ro-bind", dir, dir)
	}
	if ws != "" {
		a = append(a, "--bind", ws, ws, "--chdir", ws)
	}
	return append(a, "--unshare-pid", "--die-with-parent", "--new-session", "--")
}

type result struct {
	g      *Group
	out    string
	err    error
	warns  []string
	cgDirs []string
}

// runCapped runs argv in bwrap under caps, the way the sandbox does:
// wrapper, start, watch, wait, close.
func runCapped(t *testing.T, c Caps, opts Options, argv ...string) result {
	t.Helper()
	return runCappedThen(t, c, opts, nil, argv...)
}

// runCappedThen is runCapped calling beforeClose once the command ended,
// with its cgroups still there.
func runCappedThen(t *testing.T, c Caps, opts Options, beforeClose func(*Group), argv ...string) result {
	t.Helper()
	bwrap := requireBwrap(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ws := ""
	if len(opts.DiskDirs) > 0 {
		ws = opts.DiskDirs[0]
	}
	g, warns, err := New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, d := range g.dirs {
		dirs = append(dirs, d.path)
	}
	full := append(g.WrapperArgs(), bwrapArgs(bwrap, exe, ws)...)
	full = append(full, argv...)
	// A bound on a test gone wrong, not a synchronisation: a working cap
	// ends each workload in well under a second.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, full[0], full[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		g.Close()
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	g.Start(pid, func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	werr := cmd.Wait()
	if ctx.Err() != nil {
		t.Errorf("workload still running after %v: the cap did not end it", 2*time.Minute)
	}
	if beforeClose != nil {
		beforeClose(g)
	}
	if err := g.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	return result{g: g, out: out.String(), err: werr, warns: warns, cgDirs: dirs}
}

// requireCgroups fails (in CI, whose machines have writable cgroups) or
// skips when no cgroup could be made here.
func requireCgroups(t *testing.T, r result) {
	t.Helper()
	if len(r.cgDirs) == 0 {
		if os.Getenv("HARNESS_REQUIRE_AGENTS") != "" {
			t.Fatalf("no cgroup could be made: %v", r.warns)
		}
		t.Skipf("no cgroup could be made here: %v", r.warns)
	}
}

// noProcessWith fails when a process's command line holds marker.
func noProcessWith(t *testing.T, marker string) {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cl, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if bytes.Contains(cl, []byte(marker)) {
			st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if p, ok := parseStat(0, string(st)); ok && p.state == 'Z' {
				continue
			}
			t.Errorf("process %s left: %q", e.Name(), bytes.ReplaceAll(cl, []byte{0}, []byte{' '}))
		}
	}
}

func assertRemoved(t *testing.T, dirs []string) {
	t.Helper()
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("cgroup %s still there after Close (%v)", d, err)
		}
	}
}

func TestForkBombStoppedAtPidsCap(t *testing.T) {
	marker := "forkbomb-" + strconv.Itoa(os.Getpid())
	r := runCapped(t, Caps{Pids: 64, Names: Names{Pids: "pids-setting"}}, Options{},
		"bash", "-c", ": "+marker+"; f(){ f | f & }; f; sleep 1000")
	requireCgroups(t, r)
	if r.g.HitCap() != CapPids || r.g.Hit() != "processes over the 64 cap (pids-setting)" {
		t.Errorf("hit = %q (%s), want the pids cap; output %.300s", r.g.Hit(), r.g.HitCap(), r.out)
	}
	if r.err == nil {
		t.Error("the fork bomb exited normally")
	}
	noProcessWith(t, marker)
	assertRemoved(t, r.cgDirs)
	// The host still forks.
	if err := exec.Command("true").Run(); err != nil {
		t.Errorf("host cannot start a process after the bomb: %v", err)
	}
}

func TestMemoryPastCapIsHit(t *testing.T) {
	r := runCapped(t, Caps{MemoryBytes: 64 << 20, Names: Names{Memory: "mem-setting"}}, Options{}, allocator(t, 256<<20)...)
	requireCgroups(t, r)
	if r.g.HitCap() != CapMemory || r.g.Hit() != "memory over the 64 MiB cap (mem-setting)" {
		t.Errorf("hit = %q, want the memory cap; output %.300s", r.g.Hit(), r.out)
	}
	if strings.Contains(r.out, "allocated") {
		t.Errorf("the allocation went through: %s", r.out)
	}
	assertRemoved(t, r.cgDirs)
}

func TestDiskPastCapIsHit(t *testing.T) {
	ws := t.TempDir()
	marker := "diskfill-" + strconv.Itoa(os.Getpid())
	r := runCapped(t, Caps{DiskBytes: 8 << 20}, Options{DiskDirs: []string{ws}},
		"bash", "-c", ": "+marker+"; head -c 20000000 /dev/zero > big; sleep 1000")
	if r.g.HitCap() != CapDisk || r.g.Hit() != "disk use over the 8 MiB cap" {
		t.Errorf("hit = %q, want the disk cap; output %.300s", r.g.Hit(), r.out)
	}
	noProcessWith(t, marker)
}

func TestNormalCommandUnderAllCaps(t *testing.T) {
	ws := t.TempDir()
	c := Caps{MemoryBytes: 256 << 20, Pids: 64, CPUs: 1, DiskBytes: 64 << 20}
	r := runCapped(t, c, Options{DiskDirs: []string{ws}},
		"sh", "-c", "echo hello > f && cat f && cat /proc/self/cgroup >/dev/null")
	if r.err != nil || r.out != "hello\n" {
		t.Errorf("err %v, output %q", r.err, r.out)
	}
	if r.g.Hit() != "" {
		t.Errorf("hit %q", r.g.Hit())
	}
	requireCgroups(t, r)
	for _, a := range r.g.Applied() {
		if a.How == "not applied" || a.How == "no cap" {
			t.Errorf("%s not applied here: %+v (warnings %v)", a.Cap, a, r.warns)
		}
	}
	assertRemoved(t, r.cgDirs)
}

// TestCgroupCapsWritten checks the caps in the cgroups this host gives.
func TestCgroupCapsWritten(t *testing.T) {
	g, warns, err := New(Caps{MemoryBytes: 100 << 20, Pids: 50, CPUs: 0.5}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if len(g.dirs) == 0 {
		if os.Getenv("HARNESS_REQUIRE_AGENTS") != "" {
			t.Fatalf("no cgroup could be made: %v", warns)
		}
		t.Skipf("no cgroup could be made here: %v", warns)
	}
	want := map[string]string{
		"memory.max": "104857600", "pids.max": "50", "cpu.max": "50000 100000",
		"memory.limit_in_bytes": "104857600", "cpu.cfs_quota_us": "50000", "cpu.cfs_period_us": "100000",
	}
	seen := 0
	for _, d := range g.dirs {
		for file, v := range want {
			data, err := os.ReadFile(filepath.Join(d.path, file))
			if err != nil {
				continue
			}
			seen++
			if got := strings.TrimSpace(string(data)); got != v {
				t.Errorf("%s/%s = %s, want %s", d.path, file, got, v)
			}
		}
	}
	if seen == 0 {
		t.Errorf("no cap file in %+v", g.dirs)
	}
	dirs := g.dirs
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d.path); !os.IsNotExist(err) {
			t.Errorf("%s left", d.path)
		}
	}
}

// The fallback without cgroups: RLIMIT_DATA in the wrapper and the
// watcher over the process tree.
func TestFallbackRlimitAndWatcher(t *testing.T) {
	t.Run("rlimit set", func(t *testing.T) {
		r := runCapped(t, Caps{MemoryBytes: 64 << 20, Pids: 32, CPUs: 1}, Options{NoCgroup: true},
			"grep", "Max data size", "/proc/self/limits")
		want := strconv.Itoa(64<<20 + 256<<20)
		if !strings.Contains(r.out, want+" ") {
			t.Errorf("limits %q, want data capped at %s", r.out, want)
		}
		if len(r.cgDirs) != 0 {
			t.Errorf("cgroups made: %v", r.cgDirs)
		}
		hows := map[string]string{}
		for _, a := range r.g.Applied() {
			hows[a.Cap] = a.How
		}
		if hows[CapMemory] != "rlimit" || hows[CapPids] != "watcher" || hows[CapCPUs] != "not applied" {
			t.Errorf("applied %+v", r.g.Applied())
		}
		if len(r.warns) != 3 || !strings.Contains(r.warns[2], "the cpus cap of 1 is not applied") {
			t.Errorf("warnings %q", r.warns)
		}
	})
	t.Run("memory", func(t *testing.T) {
		// Over the cap, under the rlimit: the watcher ends it.
		r := runCapped(t, Caps{MemoryBytes: 64 << 20}, Options{NoCgroup: true}, allocator(t, 96<<20)...)
		if r.g.HitCap() != CapMemory {
			t.Errorf("hit %q; output %.300s", r.g.Hit(), r.out)
		}
	})
	t.Run("pids", func(t *testing.T) {
		marker := "spawn-" + strconv.Itoa(os.Getpid())
		r := runCapped(t, Caps{Pids: 10}, Options{NoCgroup: true},
			"bash", "-c", ": "+marker+"; for i in $(seq 20); do sleep 1000 & done; wait")
		if r.g.HitCap() != CapPids {
			t.Errorf("hit %q; output %.300s", r.g.Hit(), r.out)
		}
		noProcessWith(t, marker)
	})
}

// TestCPUCapCoversTheCommand runs a busy loop under half a CPU: the
// kernel's bandwidth control accounts it. (Whether it is also throttled
// depends on the load: on a busy machine it may never get half a CPU.)
func TestCPUCapCoversTheCommand(t *testing.T) {
	periods := int64(-1)
	r := runCappedThen(t, Caps{CPUs: 0.5}, Options{}, func(g *Group) {
		for _, d := range g.dirs {
			if contains(d.controllers, "cpu") {
				periods = counter(filepath.Join(d.path, "cpu.stat"), "nr_periods")
			}
		}
	}, "sh", "-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done")
	requireCgroups(t, r)
	if r.err != nil {
		t.Fatalf("%v: %s", r.err, r.out)
	}
	if periods <= 0 {
		t.Errorf("nr_periods = %d, want the loop under the CPU quota (applied %+v)", periods, r.g.Applied())
	}
}
