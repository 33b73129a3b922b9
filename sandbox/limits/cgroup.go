package limits

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// host says where the kernel's files are; tests point it at fakes.
type host struct {
	// selfCgroup is /proc/self/cgroup, mountinfo /proc/self/mountinfo.
	selfCgroup, mountinfo string
	// proc is the proc filesystem, for the process-tree fallback.
	proc string
}

func realHost() host {
	return host{selfCgroup: "/proc/self/cgroup", mountinfo: "/proc/self/mountinfo", proc: "/proc"}
}

// mount is one cgroup filesystem.
type mount struct {
	dir, root string
	v2        bool
	opts      []string // v1: the controllers (and name=) it holds
}

// cgroupDir is a cgroup the Group made.
type cgroupDir struct {
	path string
	v2   bool
	// controllers lists the caps applied through it ("memory", "pids",
	// "cpu"); empty for a v2 group made only to track and kill.
	controllers []string
}

func (h host) mounts() ([]mount, error) {
	f, err := os.Open(h.mountinfo)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ms []mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint opts... - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 {
			continue
		}
		switch qf[0] {
		case "cgroup2":
			ms = append(ms, mount{dir: unescape(pf[4]), root: unescape(pf[3]), v2: true})
		case "cgroup":
			ms = append(ms, mount{dir: unescape(pf[4]), root: unescape(pf[3]), opts: strings.Split(qf[2], ",")})
		}
	}
	return ms, sc.Err()
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ownPaths returns this process's cgroup path per hierarchy: key "" for
// the v2 hierarchy, else each v1 controller (and name=...).
func (h host) ownPaths() (map[string]string, error) {
	data, err := os.ReadFile(h.selfCgroup)
	if err != nil {
		return nil, err
	}
	own := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			own[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			own[c] = parts[2]
		}
	}
	return own, nil
}

// dirOf joins a cgroup path to the mount that shows it, or "" when the
// mount does not show it (a namespace or bind mount of another subtree).
func dirOf(m mount, path string) string {
	root := strings.TrimSuffix(m.root, "/")
	if root != "" {
		if path != root && !strings.HasPrefix(path, root+"/") {
			return ""
		}
		path = strings.TrimPrefix(path, root)
	}
	return filepath.Join(m.dir, path)
}

func writeFile(path, value string) error {
	// O_CREATE only matters for fake trees in tests: a cgroup filesystem
	// makes its files itself and refuses new ones.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s to %s: %w", strings.TrimSpace(value), path, err)
	}
	return nil
}

func readWords(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(data)), nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// writable says whether this process may write the file (access(2)).
func writable(path string) bool {
	return syscall.Access(path, 2) == nil
}

// v2Limits writes the caps of the controllers in want into a v2 group
// and returns the controllers whose cap took.
func v2Limits(dir string, c Caps, want []string) []string {
	var ok []string
	for _, ctl := range want {
		var err error
		switch ctl {
		case "memory":
			err = writeFile(filepath.Join(dir, "memory.max"), strconv.FormatInt(c.MemoryBytes, 10))
			if err == nil {
				// No swapping around the cap, and one OOM kill takes the
				// whole group; both are best effort (no swap, old kernels).
				_ = writeFile(filepath.Join(dir, "memory.swap.max"), "0")
				_ = writeFile(filepath.Join(dir, "memory.oom.group"), "1")
			}
		case "pids":
			err = writeFile(filepath.Join(dir, "pids.max"), strconv.Itoa(c.Pids))
		case "cpu":
			quota, period := cpuQuota(c.CPUs)
			err = writeFile(filepath.Join(dir, "cpu.max"), fmt.Sprintf("%d %d", quota, period))
		}
		if err == nil {
			ok = append(ok, ctl)
		}
	}
	return ok
}

// v1Limit writes one controller's cap into a v1 group.
func v1Limit(dir string, c Caps, ctl string) error {
	switch ctl {
	case "memory":
		if err := writeFile(filepath.Join(dir, "memory.limit_in_bytes"), strconv.FormatInt(c.MemoryBytes, 10)); err != nil {
			return err
		}
		// Only present with swap accounting; must follow the limit.
		_ = writeFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), strconv.FormatInt(c.MemoryBytes, 10))
		return nil
	case "pids":
		return writeFile(filepath.Join(dir, "pids.max"), strconv.Itoa(c.Pids))
	case "cpu":
		quota, period := cpuQuota(c.CPUs)
		if err := writeFile(filepath.Join(dir, "cpu.cfs_period_us"), strconv.FormatInt(period, 10)); err != nil {
			return err
		}
		return writeFile(filepath.Join(dir, "cpu.cfs_quota_us"), strconv.FormatInt(quota, 10))
	}
	return fmt.Errorf("unknown controller %s", ctl)
}

// cpuQuota turns CPUs into a CFS quota per 100 ms period, in µs.
func cpuQuota(cpus float64) (quota, period int64) {
	period = 100000
	quota = int64(cpus * float64(period))
	if quota < 1000 {
		quota = 1000 // the kernel's minimum
	}
	return quota, period
}

// counter reads "key value" lines (memory.events, pids.events,
// memory.oom_control) and returns the value of key, 0 when absent.
func counter(path, key string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// hitIn returns the cap a group's event counters say was hit, or "".
func (d cgroupDir) hitIn() string {
	for _, ctl := range d.controllers {
		switch {
		case ctl == "memory" && d.v2:
			f := filepath.Join(d.path, "memory.events")
			if counter(f, "oom_kill") > 0 || counter(f, "oom") > 0 {
				return CapMemory
			}
		case ctl == "memory":
			// Not memory.failcnt: it also counts page cache reclaimed at
			// the limit (a big write), which is no failure.
			f := filepath.Join(d.path, "memory.oom_control")
			if counter(f, "oom_kill") > 0 || counter(f, "under_oom") > 0 {
				return CapMemory
			}
		case ctl == "pids":
			if counter(filepath.Join(d.path, "pids.events"), "max") > 0 {
				return CapPids
			}
		}
	}
	return ""
}

// procs lists the processes in a group.
func (d cgroupDir) procs() []int {
	words, _ := readWords(filepath.Join(d.path, "cgroup.procs"))
	pids := make([]int, 0, len(words))
	for _, w := range words {
		if p, err := strconv.Atoi(w); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}

// killAll kills every process in the groups until none is left or the
// deadline passes; it says whether they are empty.
func killAll(dirs []cgroupDir, deadline time.Time) bool {
	for _, d := range dirs {
		// cgroup.kill came with Linux 5.14.
		if f := filepath.Join(d.path, "cgroup.kill"); d.v2 && exists(f) {
			_ = writeFile(f, "1")
		}
	}
	pause := newBackoff()
	for {
		left := 0
		for _, d := range dirs {
			for _, p := range d.procs() {
				left++
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
		}
		if left == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		pause()
	}
}

// removeDirs removes the groups, retrying while the kernel still counts
// exiting processes in them.
func removeDirs(dirs []cgroupDir, deadline time.Time) error {
	var errs []error
	for _, d := range dirs {
		pause := newBackoff()
		for {
			err := syscall.Rmdir(d.path)
			if err == nil || errors.Is(err, syscall.ENOENT) {
				break
			}
			if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d.path, err))
				break
			}
			pause()
		}
	}
	return errors.Join(errs...)
}

// newBackoff returns a pause for retry loops waiting on processes that
// are exiting: short at first (most are gone within a millisecond), then
// doubling up to 10 ms.
func newBackoff() func() {
	d := 100 * time.Microsecond
	return func() {
		time.Sleep(d)
		if d < 10*time.Millisecond {
			d *= 2
		}
	}
}
