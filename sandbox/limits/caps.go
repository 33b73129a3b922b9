package limits

import (
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// Caps are the resource caps of one sandboxed command and everything it
// starts. A zero field means no cap.
type Caps struct {
	// MemoryBytes caps the memory (resident, plus page cache and tmpfs
	// under a cgroup) of all processes together.
	MemoryBytes int64
	// Pids caps the number of tasks (processes and threads) alive at once,
	// bwrap's own two processes included.
	Pids int
	// CPUs caps the CPU time per wall-clock second, in CPUs (1.5 = one
	// and a half cores' worth).
	CPUs float64
	// DiskBytes caps the space taken by the watched directories (the
	// workspace).
	DiskBytes int64
	// Names says how the caller's users set each cap, for messages.
	Names Names
}

// Names are the caller's names of the settings behind the caps (a
// command's flags, a config file's keys), which warnings and Hit quote
// so that a user knows what to change. An empty name quotes nothing.
type Names struct {
	Memory, Pids, CPUs, Disk string
	// CgroupParent names the setting of Options.CgroupParent.
	CgroupParent string
}

// setBy is " (NAME)" for a setting's name, or "" when it has none.
func setBy(name string) string {
	if name == "" {
		return ""
	}
	return " (" + name + ")"
}

// Cap names, as in Applied.Cap and HitCap.
const (
	CapMemory = "memory"
	CapPids   = "pids"
	CapCPUs   = "cpus"
	CapDisk   = "disk"
)

// Default caps, see DefaultCaps.
const (
	defaultMemoryMax = 4 << 30
	defaultPids      = 4096
	defaultDisk      = 10 << 30
)

// DefaultCaps returns the caps that keep this host alive: see DefaultCapsFor.
func DefaultCaps() Caps {
	var info syscall.Sysinfo_t
	var ram int64
	if syscall.Sysinfo(&info) == nil {
		ram = int64(info.Totalram) * int64(info.Unit)
	}
	return DefaultCapsFor(ram, runtime.NumCPU())
}

// DefaultCapsFor returns the default caps for a host with ram bytes of
// memory and ncpu CPUs:
//
//   - memory: half the RAM, at most 4 GiB. An agent with its tools
//     (node, a language server, a test run) fits in 4 GiB; half the RAM
//     leaves the other half to the host and harness on a small machine.
//   - pids: 4096 tasks, or 64 per CPU when that is more. Threads count:
//     a parallel build on a big machine runs one compiler per CPU with
//     tens of threads each; a fork bomb still stops far below the
//     kernel's pid limit (32768 on small machines).
//   - cpus: no cap. A busy CPU slows the host but does not take it down,
//     the scheduler shares the CPUs fairly, and a cap would slow down
//     legitimate builds and test runs.
//   - disk: 10 GiB of workspace: a repository with its dependencies and
//     build output, far from filling a usual disk.
func DefaultCapsFor(ram int64, ncpu int) Caps {
	c := Caps{MemoryBytes: defaultMemoryMax, Pids: defaultPids, DiskBytes: defaultDisk}
	if ram > 0 && ram/2 < c.MemoryBytes {
		c.MemoryBytes = ram / 2
	}
	if ncpu*64 > c.Pids {
		c.Pids = ncpu * 64
	}
	return c
}

// ParseSize parses a memory or disk size: a number of bytes with an
// optional binary unit K, M, G or T (also written KiB, KB, k...), such as
// "512M", "4G", "1.5G" or "1048576". "0" means no cap.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("size %q: empty (want a number such as 512M or 4G, 0 for no cap)", s)
	}
	num := strings.TrimRightFunc(t, func(r rune) bool { return r < '0' || r > '9' })
	unit := strings.ToUpper(strings.TrimSpace(t[len(num):]))
	if strings.HasSuffix(num, ".") {
		return 0, fmt.Errorf("size %q: want a number such as 512M or 4G, 0 for no cap", s)
	}
	unit = strings.TrimSuffix(strings.TrimSuffix(unit, "B"), "I")
	var mult float64
	switch unit {
	case "":
		mult = 1
	case "K":
		mult = 1 << 10
	case "M":
		mult = 1 << 20
	case "G":
		mult = 1 << 30
	case "T":
		mult = 1 << 40
	default:
		return 0, fmt.Errorf("size %q: unknown unit (want K, M, G or T)", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("size %q: want a number such as 512M or 4G, 0 for no cap", s)
	}
	b := v * mult
	if b >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return int64(b), nil
}

// ParseCPUs parses a CPU cap such as "1.5" (CPUs); "0" means no cap.
func ParseCPUs(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("cpus %q: want a number of CPUs such as 1.5, 0 for no cap", s)
	}
	if v > 0 && v < 0.01 {
		return 0, fmt.Errorf("cpus %q: at least 0.01", s)
	}
	return v, nil
}

// ParsePids parses a task cap, a whole number; "0" means no cap.
func ParsePids(s string) (int, error) {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || v < 0 {
		return 0, fmt.Errorf("pids %q: want a whole number of processes such as 1024, 0 for no cap", s)
	}
	return v, nil
}

// FormatSize writes a size for people: "512 MiB", "1.5 GiB", "100 bytes".
func FormatSize(b int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB"}
	if b < 1<<10 {
		return fmt.Sprintf("%d bytes", b)
	}
	v := float64(b)
	u := ""
	for _, name := range units {
		if v < 1<<10 {
			break
		}
		v /= 1 << 10
		u = name
	}
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64) + " " + u
}
